package linkkeysserver

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/net/bpf"
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

// SpreadIndex is the SteerReusePort index that hands new connections back
// to the kernel's hash spread over the whole group.
const SpreadIndex = -1

// SteerReusePort attaches a classic-BPF program to ln's SO_REUSEPORT group
// that sends every new connection to the group's listener number index (the
// order in which the group's sockets started listening, from 0), or, with
// SpreadIndex, spreads them by hash again. The program belongs to the group,
// so any member may set it and it outlives the member that set it. An index
// beyond the group's size also falls back to the hash (the kernel's rule), so
// a stale index never strands a connection.
func SteerReusePort(ln *net.TCPListener, index int) error {
	ret := uint32(0xffffffff) // out of range: the kernel spreads by hash
	if index >= 0 {
		ret = uint32(index)
	}
	raw, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: ret}})
	if err != nil {
		return fmt.Errorf("linkkeysserver: steering SO_REUSEPORT: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	rc, err := ln.SyscallConn()
	if err != nil {
		return fmt.Errorf("linkkeysserver: steering SO_REUSEPORT: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
	}); err != nil {
		return fmt.Errorf("linkkeysserver: steering SO_REUSEPORT: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("linkkeysserver: steering SO_REUSEPORT to listener %d (SO_ATTACH_REUSEPORT_CBPF): %w", index, serr)
	}
	return nil
}
