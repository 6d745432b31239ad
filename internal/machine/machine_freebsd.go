package machine

func collectOS(r *Record) {
	collectBSD(r, sysctlNames{
		cpuModel: "hw.model", memory: "hw.physmem", somaxconn: "kern.ipc.soacceptqueue",
		portFirst: "net.inet.ip.portrange.first", portLast: "net.inet.ip.portrange.last",
	})
}

// nofileCap is 0: FreeBSD's hard limit is already kern.maxfilesperproc.
func nofileCap() uint64 { return 0 }
