package keycastload

import (
	"syscall"
	"unsafe"
)

// rawSocketIO turns on the write-then-wait path of conn.Read for plain TCP (see conn.send).
const rawSocketIO = true

// rawWrite and rawRead are write(2) and read(2) on the non-blocking socket without the runtime's
// entersyscall/exitsyscall: the socket never blocks, so the call returns at once and need not give
// up its P. Besides the bookkeeping this saves, entersyscall wakes the runtime's sysmon thread
// whenever it sleeps because every P was idle, which on a generator that idles between responses
// (one P pinned to one core) is nearly every request: a futex wake and two context switches each.
func rawWrite(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawRead(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
