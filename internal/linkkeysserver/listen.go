package linkkeysserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
)

// ErrReusePort is returned, off Linux, for what needs SO_REUSEPORT spreading
// connections over processes: ListenOptions.ReusePort, ReservePort, and so
// the multi-process server (--processes above 1).
var ErrReusePort = errors.New("linkkeysserver: --processes above 1 (SO_REUSEPORT fan-out) is supported on Linux only, not on " +
	runtime.GOOS + "; run one process (--processes 1, the default), which serves on every core")

// ListenOptions configures Listen.
type ListenOptions struct {
	// Backlog is passed to listen(2) after the socket is bound (Go's net
	// package uses net.core.somaxconn otherwise); 0 keeps Go's choice. The
	// kernel clamps it to somaxconn. A failure is logged by the caller, not
	// fatal, as upstream.
	Backlog int
	// ReusePort sets SO_REUSEPORT, so several processes can listen on one
	// port and the kernel spreads connections over them by 4-tuple hash.
	// Linux only (ErrReusePort elsewhere): other systems either lack the
	// option or do not spread connections with it.
	ReusePort bool
}

// Listen opens a TCP listener on addr. It returns the listener and, when
// setting the backlog failed, a non-nil warning (the listener still works).
// Accepted sockets get TCP_NODELAY (Go's default) and no SO_KEEPALIVE, as
// upstream's: Go would otherwise turn keep-alive on with 15 s probes, which
// costs four setsockopt calls per accepted connection and a probe every 15 s
// per idle held connection.
func Listen(ctx context.Context, addr string, opt ListenOptions) (ln *net.TCPListener, backlogErr error, err error) {
	// KeepAlive -1: no SO_KEEPALIVE on accepted sockets, as upstream. Go's default (probes after
	// 15 s idle, every 15 s) would cost a held million connections about 130,000 loopback packets
	// a second, and on a saturated machine the lost probes abort healthy idle connections
	// (docs/load-testing.md, One million connections).
	lc := net.ListenConfig{KeepAlive: -1}
	// Plain TCP, as upstream's listener. Since Go 1.24 a listener is a Multipath TCP socket by
	// default where the kernel has MPTCP; a plain TCP client then falls back per connection, the
	// SYN takes MPTCP's request path, and a SO_REUSEPORT group of MPTCP sockets refuses a steering
	// program (EOPNOTSUPP), which the sequential fill needs (SteerReusePort).
	lc.SetMultipathTCP(false)
	if opt.ReusePort {
		if reusePortControl == nil {
			return nil, nil, ErrReusePort
		}
		lc.Control = reusePortControl
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

// PortReservation holds a TCP port for a group of SO_REUSEPORT listeners: a
// socket bound with SO_REUSEPORT but never listening, so it takes no
// connections, while keeping any other program from taking the port until
// the group's listeners are up.
type PortReservation struct {
	fd   int
	Port int
}
