//go:build !unix

package linkkeysserver

import (
	"fmt"
	"net"
	"runtime"
)

// setBacklog reports that the backlog cannot be changed here (Go's default
// stays); the caller logs it as a warning.
func setBacklog(_ *net.TCPListener, backlog int) error {
	return fmt.Errorf("linkkeysserver: setting listen backlog %d is not supported on %s; Go's default backlog is used", backlog, runtime.GOOS)
}
