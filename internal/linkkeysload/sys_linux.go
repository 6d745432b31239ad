package linkkeysload

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpEstablished reads the socket's state with TCP_INFO; 1 is Linux's TCP_ESTABLISHED
// (tcp_states.h).
func tcpEstablished(fd uintptr) (established, known bool) {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return false, false
	}
	return info.State == 1, true
}

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT before the socket is bound: bind then reserves only the
// address and the kernel picks the port at connect time, so one source address can reach every
// server port with the whole ephemeral range instead of one port per bind.
func bindNoPort(_ context.Context, _ string, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
