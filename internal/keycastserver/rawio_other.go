//go:build !linux

package keycastserver

import "syscall"

// rawSocketIO is false: the raw read(2) and write(2) were built and measured on Linux, and on
// Windows a socket is not a descriptor those calls take. fastSock then reads and writes through
// net.Conn.
const rawSocketIO = false

// rawRead and rawWrite are never called here (rawSocketIO is false).
func rawRead(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

func rawWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }
