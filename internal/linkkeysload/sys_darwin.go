package linkkeysload

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpEstablished reads the socket's state with TCP_CONNECTION_INFO; 4 is TCPS_ESTABLISHED
// (netinet/tcp_fsm.h).
func tcpEstablished(fd uintptr) (established, known bool) {
	info, err := unix.GetsockoptTCPConnectionInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_CONNECTION_INFO)
	if err != nil {
		return false, false
	}
	return info.State == 4, true
}

// bindNoPort is nil: macOS has no IP_BIND_ADDRESS_NO_PORT, so every bound source address takes a
// port at bind time and one address opens at most one ephemeral range of connections in all,
// whatever the server port.
var bindNoPort func(ctx context.Context, network, address string, c syscall.RawConn) error
