package keycastserver

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketReadable returns how many bytes the kernel holds for the socket under rc (SIOCINQ, alias FIONREAD):
// tests wait on it instead of guessing how long loopback takes.
func socketReadable(rc syscall.RawConn) int {
	n := -1
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
