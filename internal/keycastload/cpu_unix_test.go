//go:build unix

package keycastload

import "syscall"

// processCPU is the user+system CPU time of this process in nanoseconds: a benchmark's cpu-ns/op
// stays meaningful when other work shares the cores and wall-clock ns/op does not.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
