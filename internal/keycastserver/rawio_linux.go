package keycastserver

import (
	"syscall"
	"unsafe"
)

// rawSocketIO turns on fastSock's raw read(2) and write(2) for plain TCP connections.
const rawSocketIO = true

// rawRead and rawWrite are read(2) and write(2) on the non-blocking socket without the
// runtime's entersyscall/exitsyscall: the socket never blocks, so the call returns at once and
// need not give up its P (the load generator does the same, internal/keycastload).
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}
