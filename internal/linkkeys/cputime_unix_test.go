//go:build unix

package linkkeys

import (
	"syscall"
	"time"
)

// processCPU is this process's CPU time so far (user plus system), for the crypto benchmarks'
// cpu-ns/op: on a shared machine a benchmark's ns/op is wall time and grows whenever another
// process takes the core, while the CPU it spends per operation does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
