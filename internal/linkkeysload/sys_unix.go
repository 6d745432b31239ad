//go:build unix

package linkkeysload

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// errnoName is the errno's C name ("ECONNREFUSED"), or "" when unknown.
func errnoName(e syscall.Errno) string { return unix.ErrnoName(e) }
