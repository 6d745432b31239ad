package machine

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReadKernel reads the kernel counters of this process's network namespace, the machine's CPU
// steal and this process's CPU time. What cannot be read is named in Missing.
func ReadKernel() Kernel {
	k := Kernel{At: time.Now(), ConntrackCount: -1, ConntrackMax: -1, ProcessCPU: ProcessCPU()}
	readTCP(&k)
	miss := func(what string, err error) { k.Missing = append(k.Missing, what+": "+err.Error()) }
	if b, err := readBounded("/proc/net/sockstat"); err != nil {
		miss("sockstat", err)
	} else if s, err := ParseSockstat(b); err != nil {
		miss("sockstat", err)
	} else {
		k.Sockstat = s
	}
	if b, err := readBounded("/proc/stat"); err != nil {
		miss("steal", err)
	} else if steal, total, err := ParseProcStatCPU(b); err != nil {
		miss("steal", err)
	} else {
		k.StealTicks, k.TotalTicks = steal, total
	}
	// Connection tracking is a module: absent files mean it is not loaded, which is not a fault.
	if n, ok := readInt("/proc/sys/net/netfilter/nf_conntrack_count"); ok {
		k.ConntrackCount = n
	}
	if n, ok := readInt("/proc/sys/net/netfilter/nf_conntrack_max"); ok {
		k.ConntrackMax = n
	}
	k.Netns, _ = os.Readlink("/proc/self/ns/net")
	return k
}

// ReadTCPCounters reads only the TCP counters of this process's network namespace (TcpExt and Tcp:
// the fields TCPCountersRead vouches for), for a caller that reads them often (the LinkKeys server's
// every METRICS line and scrape); the rest of a Kernel is left zero.
func ReadTCPCounters() Kernel {
	k := Kernel{At: time.Now(), ConntrackCount: -1, ConntrackMax: -1}
	readTCP(&k)
	return k
}

// readTCP fills k's TcpExt and Tcp counters from /proc/net/netstat and /proc/net/snmp.
func readTCP(k *Kernel) {
	miss := func(what string, err error) { k.Missing = append(k.Missing, what+": "+err.Error()) }
	if b, err := readBounded("/proc/net/netstat"); err != nil {
		miss(missTcpExt, err)
	} else if ns, err := ParseNetstat(b); err != nil {
		miss(missTcpExt, err)
	} else {
		ext := ns["TcpExt"]
		k.ListenOverflows, k.ListenDrops = ext["ListenOverflows"], ext["ListenDrops"]
		k.TCPTimeouts, k.SyncookiesSent = ext["TCPTimeouts"], ext["SyncookiesSent"]
		k.DSACKRecv = ext["TCPDSACKRecv"]
	}
	if b, err := readBounded("/proc/net/snmp"); err != nil {
		miss(missTcp, err)
	} else if ns, err := ParseNetstat(b); err != nil {
		miss(missTcp, err)
	} else {
		k.RetransSegs = ns["Tcp"]["RetransSegs"]
	}
}

// readBounded reads a /proc file, at most one byte more than the parsers accept (so they refuse it).
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxKernelFileBytes+1))
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
