package linkkeysserver

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenOptions configures Listen.
type ListenOptions struct {
	// Backlog is passed to listen(2) after the socket is bound (Go's net
	// package uses net.core.somaxconn otherwise); 0 keeps Go's choice. The
	// kernel clamps it to somaxconn. A failure is logged by the caller, not
	// fatal, as upstream.
	Backlog int
	// ReusePort sets SO_REUSEPORT, so several processes can listen on one
	// port and the kernel spreads connections over them by 4-tuple hash.
	ReusePort bool
}

// Listen opens a TCP listener on addr. It returns the listener and, when
// setting the backlog failed, a non-nil warning (the listener still works).
func Listen(ctx context.Context, addr string, opt ListenOptions) (ln *net.TCPListener, backlogErr error, err error) {
	lc := net.ListenConfig{}
	if opt.ReusePort {
		lc.Control = func(network, address string, c syscall.RawConn) error {
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
	}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("linkkeysserver: listening on %s: %w", addr, err)
	}
	tl := l.(*net.TCPListener)
	if opt.Backlog > 0 {
		backlogErr = setBacklog(tl, opt.Backlog)
	}
	return tl, backlogErr, nil
}

// setBacklog calls listen(2) again on a listening socket, which Linux allows
// and which changes only the backlog.
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

// PortReservation holds a TCP port for a group of SO_REUSEPORT listeners: a
// socket bound with SO_REUSEPORT but never listening, so it takes no
// connections, while keeping any other program from taking the port until
// the group's listeners are up.
type PortReservation struct {
	fd   int
	Port int
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
