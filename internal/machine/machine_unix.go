//go:build unix

package machine

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// collectUnix fills what every Unix answers the same way: the kernel release and the open-file
// limits.
func collectUnix(r *Record) {
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		r.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	r.NofileSoft, r.NofileHard, _ = nofile()
}

func nofile() (soft, hard uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("machine: reading RLIMIT_NOFILE: %w", err)
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}

func raiseNofile() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("machine: reading RLIMIT_NOFILE: %w", err)
	}
	want := uint64(lim.Max)
	if c := nofileCap(); c > 0 && want > c {
		want = c
	}
	if uint64(lim.Cur) < want {
		setLimit(&lim.Cur, want)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("machine: raising the soft RLIMIT_NOFILE to %d: %w", want, err)
		}
	}
	return uint64(lim.Cur), nil
}

// setLimit stores v in an rlimit field: uint64 on most systems, int64 on FreeBSD.
func setLimit[T ~int64 | ~uint64](p *T, v uint64) { *p = T(v) }

// ProcessCPU is this process's CPU time so far, user plus system (getrusage). Benchmarks divide
// it by their operations: on a shared machine wall time per operation grows whenever another
// process takes the core, the CPU spent per operation does not.
func ProcessCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
