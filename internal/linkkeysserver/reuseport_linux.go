package linkkeysserver

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePortControl sets SO_REUSEPORT on a socket before it binds.
var reusePortControl = func(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting SO_REUSEPORT: %w", serr)
	}
	return nil
}

// ReservePort binds a SO_REUSEPORT socket to ip:port (port 0 picks a free
// one) without listening on it.
func ReservePort(ip string, port int) (*PortReservation, error) {
	addr := net.ParseIP(ip).To4()
	if addr == nil {
		return nil, fmt.Errorf("linkkeysserver: reserving a port: %q is not an IPv4 address", ip)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: reserving a port: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("linkkeysserver: reserving a port: SO_REUSEPORT: %w", err)
	}
	sa := &unix.SockaddrInet4{Port: port}
	copy(sa.Addr[:], addr)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("linkkeysserver: reserving port %s:%d: %w", ip, port, err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("linkkeysserver: reserving a port: %w", err)
	}
	return &PortReservation{fd: fd, Port: got.(*unix.SockaddrInet4).Port}, nil
}

// Release closes the reservation socket.
func (r *PortReservation) Release() error { return unix.Close(r.fd) }
