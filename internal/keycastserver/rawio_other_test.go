//go:build !linux

package keycastserver

import "syscall"

// socketReadable is Linux-only (fastSock reads raw only there, and its tests skip elsewhere).
func socketReadable(rc syscall.RawConn) int { return -1 }
