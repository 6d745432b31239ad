//go:build unix

package linkkeysload

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns this process's user plus system CPU time so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// errnoName is the errno's C name ("ECONNREFUSED"), or "" when unknown.
func errnoName(e syscall.Errno) string { return unix.ErrnoName(e) }
