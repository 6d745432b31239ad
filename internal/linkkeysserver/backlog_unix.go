//go:build unix

package linkkeysserver

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// setBacklog calls listen(2) again on a listening socket, which Linux and
// the BSDs (macOS included) allow and which changes only the backlog.
func setBacklog(l *net.TCPListener, backlog int) error {
	rc, err := l.SyscallConn()
	if err != nil {
		return fmt.Errorf("linkkeysserver: setting listen backlog %d: %w", backlog, err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), backlog) }); err != nil {
		return fmt.Errorf("linkkeysserver: setting listen backlog %d: %w", backlog, err)
	}
	if lerr != nil {
		return fmt.Errorf("linkkeysserver: setting listen backlog %d: %w", backlog, lerr)
	}
	return nil
}
