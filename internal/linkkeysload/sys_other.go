//go:build !linux && !darwin

package linkkeysload

import (
	"context"
	"syscall"
)

// tcpEstablished cannot read the socket's state here.
func tcpEstablished(uintptr) (established, known bool) { return false, false }

// bindNoPort is nil: IP_BIND_ADDRESS_NO_PORT is Linux's, so every bound source address takes a
// port at bind time and one address opens at most one ephemeral range of connections in all.
var bindNoPort func(ctx context.Context, network, address string, c syscall.RawConn) error
