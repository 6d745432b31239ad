//go:build !linux

package keycastload

import "syscall"

// rawSocketIO is false: the write-then-wait path of conn.Read, with its raw read(2) and write(2),
// was built and measured on Linux, and on Windows a socket is not a descriptor those calls take.
// Plain TCP then reads and writes through net.Conn, as TLS always does.
const rawSocketIO = false

// rawWrite and rawRead are never called here (rawSocketIO is false).
func rawWrite(uintptr, []byte) (int, error) { return 0, syscall.EINVAL }

func rawRead(uintptr, []byte) (int, error) { return 0, syscall.EINVAL }

// peekIdle is not implemented here: an idle connection is not checked before it is reused, so a
// request sent on one the server has closed fails (and is not retried, as bytes of it were
// written) instead of moving to a fresh connection.
func peekIdle(syscall.RawConn) (closed, data bool) { return false, false }
