//go:build !linux

package machine

import (
	"runtime"
	"time"
)

// ReadKernel reads this process's CPU time; the network counters come from Linux's /proc, so
// elsewhere they are named in Missing and the run's validity rests on CPU and schedule alone.
func ReadKernel() Kernel {
	return Kernel{At: time.Now(), ConntrackCount: -1, ConntrackMax: -1, ProcessCPU: ProcessCPU(),
		Missing: []string{missNetwork + ": read from /proc on Linux only, not on " + runtime.GOOS}}
}

// ReadTCPCounters is ReadKernel's TCP part: off Linux, nothing, named in Missing.
func ReadTCPCounters() Kernel {
	return Kernel{At: time.Now(), ConntrackCount: -1, ConntrackMax: -1,
		Missing: []string{missNetwork + ": read from /proc on Linux only, not on " + runtime.GOOS}}
}
