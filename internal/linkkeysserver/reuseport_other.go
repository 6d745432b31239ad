//go:build !linux

package linkkeysserver

import "syscall"

// reusePortControl is nil: Listen refuses ReusePort here (ErrReusePort).
var reusePortControl func(network, address string, c syscall.RawConn) error

// ReservePort returns ErrReusePort: a reservation only makes sense for a
// group of SO_REUSEPORT listeners, which need Linux.
func ReservePort(ip string, port int) (*PortReservation, error) {
	return nil, ErrReusePort
}

// Release does nothing; no reservation exists here.
func (r *PortReservation) Release() error { return nil }
