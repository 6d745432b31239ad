//go:build !linux

package linkkeysserver

import (
	"net"
	"syscall"
)

// reusePortControl is nil: Listen refuses ReusePort here (ErrReusePort).
var reusePortControl func(network, address string, c syscall.RawConn) error

// ReservePort returns ErrReusePort: a reservation only makes sense for a
// group of SO_REUSEPORT listeners, which need Linux.
func ReservePort(ip string, port int) (*PortReservation, error) {
	return nil, ErrReusePort
}

// Release does nothing; no reservation exists here.
func (r *PortReservation) Release() error { return nil }

// SpreadIndex is the SteerReusePort index that hands new connections back
// to the kernel's hash spread.
const SpreadIndex = -1

// SteerReusePort returns ErrReusePort: steering needs a Linux SO_REUSEPORT
// group.
func SteerReusePort(ln *net.TCPListener, index int) error { return ErrReusePort }
