package machine

import "golang.org/x/sys/unix"

func collectOS(r *Record) {
	collectBSD(r, sysctlNames{
		cpuModel: "machdep.cpu.brand_string", memory: "hw.memsize", somaxconn: "kern.ipc.somaxconn",
		portFirst: "net.inet.ip.portrange.first", portLast: "net.inet.ip.portrange.last",
	})
}

// nofileCap is kern.maxfilesperproc: macOS refuses a soft limit above it, and its hard limit is
// usually "unlimited".
func nofileCap() uint64 {
	v, err := unix.SysctlUint32("kern.maxfilesperproc")
	if err != nil {
		return 0
	}
	return uint64(v)
}
