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

// peekIdle looks at an idle connection's socket without consuming anything: closed reports that
// the peer closed or reset the connection, data that bytes are waiting. One non-blocking
// recv(MSG_PEEK); the callback returns true at once, so the poller never waits here.
func peekIdle(sc syscall.RawConn) (closed, data bool) {
	var b [1]byte
	err := sc.Read(func(fd uintptr) bool {
		for {
			n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
				syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
			case e != 0, n == 0:
				closed = true
			default:
				data = true
			}
			return true
		}
	})
	return closed || err != nil, data
}
