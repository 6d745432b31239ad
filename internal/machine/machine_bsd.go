//go:build darwin || freebsd

package machine

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// sysctlNames are the sysctl variables that hold the record's fields on this system.
type sysctlNames struct {
	cpuModel, memory, somaxconn, portFirst, portLast string
}

// collectBSD fills the fields Linux reads from /proc from sysctl variables instead.
func collectBSD(r *Record, n sysctlNames) {
	collectUnix(r)
	r.CPUModel, _ = unix.Sysctl(n.cpuModel)
	r.MemoryBytes, _ = unix.SysctlUint64(n.memory)
	if v, err := unix.SysctlUint32(n.somaxconn); err == nil {
		r.Somaxconn = int(v)
	}
	first, err1 := unix.SysctlUint32(n.portFirst)
	last, err2 := unix.SysctlUint32(n.portLast)
	if err1 == nil && err2 == nil {
		r.IPLocalPortRange = strconv.FormatUint(uint64(first), 10) + "-" + strconv.FormatUint(uint64(last), 10)
	}
}

// rssBytes is unknown here: getrusage gives only the peak, and the current figure needs the Mach
// task API (macOS) or kvm (FreeBSD).
func rssBytes() (uint64, bool) { return 0, false }

func rssSplit() (RSS, bool) { return RSS{}, false }
