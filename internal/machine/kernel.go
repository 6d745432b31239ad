package machine

import (
	"bytes"
	"context"
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kernel is one reading of what the kernel counted for the network namespace this process runs in
// (TCP counters, socket table, connection tracking), what the whole machine's CPUs lost to steal,
// and this process's CPU time. Two readings, before and after a run, give [RunStats]: whether the
// load generator itself was the limit of the figures it measured. Counters that could not be read
// are named in Missing and left zero.
type Kernel struct {
	At time.Time
	// TcpExt (/proc/net/netstat) counters.
	ListenOverflows, ListenDrops, TCPTimeouts, SyncookiesSent int64
	// RetransSegs is Tcp RetransSegs (/proc/net/snmp).
	RetransSegs int64
	// DSACKRecv is TcpExt TCPDSACKRecv: duplicate SACKs received, the peer saying it already had a
	// segment this side sent again (a spurious retransmission, typically a tail-loss probe sent
	// while the peer was slow to answer).
	DSACKRecv int64
	// Sockstat is the TCP line of /proc/net/sockstat.
	Sockstat Sockstat
	// ConntrackCount and ConntrackMax are nf_conntrack_count and _max; -1 where connection tracking
	// is not loaded.
	ConntrackCount, ConntrackMax int64
	// StealTicks and TotalTicks are the steal and all columns of /proc/stat's "cpu" line summed.
	StealTicks, TotalTicks uint64
	// ProcessCPU is this process's user plus system time.
	ProcessCPU time.Duration
	// Netns names the network namespace read ("net:[4026531840]"): hosts of a test bed share a host
	// name but not a namespace.
	Netns string
	// Missing names what could not be read, and why.
	Missing []string
}

// The names of [Kernel.Missing] entries ("name: why") for the TCP counters: the TcpExt section of
// /proc/net/netstat, the Tcp section of /proc/net/snmp, or every network counter (off Linux).
const (
	missTcpExt  = "TcpExt"
	missTcp     = "Tcp"
	missNetwork = "kernel network counters"
)

// TCPCountersRead reports whether k holds the TCP counters (ListenOverflows, ListenDrops,
// TCPTimeouts, SyncookiesSent, DSACKRecv and RetransSegs): false off Linux, or where
// /proc/net/netstat or /proc/net/snmp could not be read or parsed.
func (k Kernel) TCPCountersRead() bool {
	for _, m := range k.Missing {
		name, _, _ := strings.Cut(m, ":")
		if name == missTcpExt || name == missTcp || name == missNetwork {
			return false
		}
	}
	return true
}

// Sockstat is the TCP line of /proc/net/sockstat: sockets in use, orphaned, in TIME_WAIT,
// allocated, and the pages of memory TCP holds.
type Sockstat struct {
	InUse    int64 `json:"inuse"`
	Orphan   int64 `json:"orphan"`
	TimeWait int64 `json:"tw"`
	Alloc    int64 `json:"alloc"`
	MemPages int64 `json:"mem_pages"`
}

// MaxKernelFileBytes bounds each /proc file the parsers read: a real /proc/net/netstat is about
// 6 KB, /proc/stat a few KB per CPU.
const MaxKernelFileBytes = 1 << 20

// maxNetstatNames bounds the counters of one section of a netstat or snmp file.
const maxNetstatNames = 4096

// ParseNetstat reads a /proc/net/netstat or /proc/net/snmp text: sections of two lines each, a
// header "Name: Counter Counter …" followed by "Name: value value …" with as many integers.
// It returns the values by section and counter name. A header without its values line, a count
// mismatch, or a value that is not an integer is an error naming the line.
func ParseNetstat(text []byte) (map[string]map[string]int64, error) {
	if len(text) > MaxKernelFileBytes {
		return nil, fmt.Errorf("machine: netstat: %d bytes is more than the %d such a file may be", len(text), MaxKernelFileBytes)
	}
	out := map[string]map[string]int64{}
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil, fmt.Errorf("machine: netstat: the file is empty; expected header and value lines (\"TcpExt: ListenOverflows …\")")
	}
	for i := 0; i < len(lines); i += 2 {
		hname, hrest, ok := strings.Cut(lines[i], ":")
		if !ok || hname == "" || strings.ContainsAny(hname, " \t") {
			return nil, fmt.Errorf("machine: netstat line %d: %q is not a \"Section: Name …\" header", i+1, textclip.String(lines[i], 80))
		}
		if i+1 >= len(lines) {
			return nil, fmt.Errorf("machine: netstat line %d: header %q has no values line after it", i+1, hname)
		}
		vname, vrest, ok := strings.Cut(lines[i+1], ":")
		if !ok || vname != hname {
			return nil, fmt.Errorf("machine: netstat line %d: expected the values of %q, got %q", i+2, hname, textclip.String(lines[i+1], 80))
		}
		names, values := strings.Fields(hrest), strings.Fields(vrest)
		if len(names) != len(values) {
			return nil, fmt.Errorf("machine: netstat line %d: %s has %d names but %d values", i+2, hname, len(names), len(values))
		}
		if len(names) > maxNetstatNames {
			return nil, fmt.Errorf("machine: netstat line %d: %s has %d counters, more than %d", i+1, hname, len(names), maxNetstatNames)
		}
		sec := out[hname]
		if sec == nil {
			sec = make(map[string]int64, len(names))
			out[hname] = sec
		}
		for j, n := range names {
			v, err := strconv.ParseInt(values[j], 10, 64)
			if err != nil {
				// Some counters are unsigned 64-bit; a wrapped one is still a count.
				u, uerr := strconv.ParseUint(values[j], 10, 64)
				if uerr != nil {
					return nil, fmt.Errorf("machine: netstat line %d: %s %s = %q is not an integer", i+2, hname, n, textclip.String(values[j], 80))
				}
				v = int64(u & math.MaxInt64)
			}
			sec[n] = v
		}
	}
	return out, nil
}

// ParseSockstat reads the TCP line of a /proc/net/sockstat text ("TCP: inuse 3 orphan 0 tw 1 alloc
// 5 mem 2"). A missing TCP line, an odd key/value list or a value that is not an integer is an error.
func ParseSockstat(text []byte) (Sockstat, error) {
	var s Sockstat
	if len(text) > MaxKernelFileBytes {
		return s, fmt.Errorf("machine: sockstat: %d bytes is more than the %d such a file may be", len(text), MaxKernelFileBytes)
	}
	for ln, line := range strings.Split(string(text), "\n") {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f)%2 != 0 {
			return s, fmt.Errorf("machine: sockstat line %d: %q is not a list of name and value pairs", ln+1, textclip.String(line, 80))
		}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("machine: sockstat line %d: TCP %s = %q is not an integer", ln+1, f[i], textclip.String(f[i+1], 80))
			}
			switch f[i] {
			case "inuse":
				s.InUse = v
			case "orphan":
				s.Orphan = v
			case "tw":
				s.TimeWait = v
			case "alloc":
				s.Alloc = v
			case "mem":
				s.MemPages = v
			}
		}
		return s, nil
	}
	return s, fmt.Errorf("machine: sockstat: no \"TCP:\" line; expected one like \"TCP: inuse 3 orphan 0 tw 1 alloc 5 mem 2\"")
}

// ParseProcStatCPU reads the aggregate "cpu" line of a /proc/stat text and returns its steal column
// (the eighth; 0 on kernels too old to have it) and the sum of all its columns, in clock ticks.
func ParseProcStatCPU(text []byte) (steal, total uint64, err error) {
	if len(text) > MaxKernelFileBytes {
		return 0, 0, fmt.Errorf("machine: /proc/stat: %d bytes is more than the %d such a file may be", len(text), MaxKernelFileBytes)
	}
	line, _, _ := bytes.Cut(text, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("machine: /proc/stat: the first line %q is not \"cpu user nice system idle …\"", textclip.Bytes(line, 80))
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("machine: /proc/stat: cpu column %d = %q is not a whole number", i+1, textclip.String(s, 80))
		}
		// guest and guest_nice (columns 9, 10) are already inside user and nice.
		if i < 8 {
			total += v
		}
		if i == 7 {
			steal = v
		}
	}
	return steal, total, nil
}

// RunStats is what the kernel and this process counted over one run, from two [Kernel] readings:
// the counters as differences, the socket table before and after, CPU as shares of the run. The
// generator-limited verdict and its reasons ride with it (see [Judge]), so a merged result that
// appends the machine records of its hosts keeps every host's verdict.
type RunStats struct {
	Seconds         float64 `json:"seconds"`
	ListenOverflows int64   `json:"listen_overflows"`
	ListenDrops     int64   `json:"listen_drops"`
	TCPTimeouts     int64   `json:"tcp_timeouts"`
	RetransSegs     int64   `json:"retrans_segs"`
	// DSACKRecv is the retransmissions the peer reported it already had (TcpExt TCPDSACKRecv):
	// spurious, so not held against the generator.
	DSACKRecv      int64    `json:"dsack_recv,omitempty"`
	SyncookiesSent int64    `json:"syncookies_sent"`
	SockstatBefore Sockstat `json:"sockstat_before"`
	SockstatAfter  Sockstat `json:"sockstat_after"`
	// ConntrackCount (at the end) and ConntrackMax are -1 where connection tracking is not loaded.
	ConntrackCount int64 `json:"conntrack_count"`
	ConntrackMax   int64 `json:"conntrack_max"`
	// StealPercent is the share of the machine's CPU time the hypervisor took over the run.
	StealPercent float64 `json:"steal_percent"`
	// CPUSeconds is this process's CPU time over the run; CPUPercent that over Seconds × Cores.
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      int     `json:"cores"`
	CPUPercent float64 `json:"cpu_percent"`
	// Scheduled, Late and Dropped are the open model's starts (zero in the closed model).
	Scheduled int64 `json:"scheduled,omitempty"`
	Late      int64 `json:"late,omitempty"`
	Dropped   int64 `json:"dropped,omitempty"`
	// SharedStack is true when the target was on this host's own network stack (loopback or one of
	// its addresses): then the TCP counters are the server's as much as the client's and are not
	// judged.
	SharedStack bool `json:"shared_stack,omitempty"`
	// Netns is the network namespace the counters are of.
	Netns string `json:"netns,omitempty"`
	// Missing names the counters that could not be read.
	Missing []string `json:"missing,omitempty"`
	// GeneratorLimited is true when the generator saturated; Reasons says how.
	GeneratorLimited bool     `json:"generator_limited"`
	Reasons          []string `json:"generator_limited_reasons,omitempty"`
}

// Delta returns the run statistics between two readings of the same process, taken before and
// after a run on a machine with cores CPUs. Counter differences below zero (a counter reset) count
// as zero.
func Delta(before, after Kernel, cores int) *RunStats {
	d := func(a, b int64) int64 { return max(b-a, 0) }
	rs := &RunStats{
		Seconds:         after.At.Sub(before.At).Seconds(),
		ListenOverflows: d(before.ListenOverflows, after.ListenOverflows),
		ListenDrops:     d(before.ListenDrops, after.ListenDrops),
		TCPTimeouts:     d(before.TCPTimeouts, after.TCPTimeouts),
		RetransSegs:     d(before.RetransSegs, after.RetransSegs),
		DSACKRecv:       d(before.DSACKRecv, after.DSACKRecv),
		SyncookiesSent:  d(before.SyncookiesSent, after.SyncookiesSent),
		SockstatBefore:  before.Sockstat,
		SockstatAfter:   after.Sockstat,
		ConntrackCount:  after.ConntrackCount,
		ConntrackMax:    after.ConntrackMax,
		CPUSeconds:      max(after.ProcessCPU-before.ProcessCPU, 0).Seconds(),
		Cores:           cores,
		Netns:           after.Netns,
	}
	if after.TotalTicks > before.TotalTicks && after.StealTicks >= before.StealTicks {
		rs.StealPercent = 100 * float64(after.StealTicks-before.StealTicks) / float64(after.TotalTicks-before.TotalTicks)
	}
	if rs.Seconds > 0 && cores > 0 {
		rs.CPUPercent = 100 * rs.CPUSeconds / (rs.Seconds * float64(cores))
	}
	seen := map[string]bool{}
	for _, m := range slices.Concat(before.Missing, after.Missing) {
		if !seen[m] {
			seen[m] = true
			rs.Missing = append(rs.Missing, m)
		}
	}
	return rs
}

// The generator-limited rule (docs/field.md, "Is the run valid?").
const (
	// SaturatedCPUPercent is the share of its cores at or above which the generator's CPU is the limit.
	SaturatedCPUPercent = 90
	// SaturatedLatePercent is the share of late or dropped open-model starts above which the
	// generator could not keep its schedule.
	SaturatedLatePercent = 1
	// MinJudgedCPUSeconds is the shortest run whose CPU share is judged: below it, process start-up
	// work and timer granularity dominate the ratio.
	MinJudgedCPUSeconds = 1.0
)

// Judge sets rs.GeneratorLimited and rs.Reasons by the rule: this process's CPU at 90 % or more of
// its cores over a run of a second or more; late plus dropped open-model starts above 1 % of those
// scheduled; retransmitted segments (less those the server reported it already had, DSACK) or
// listen overflows/drops on the client's own network stack
// (not judged when SharedStack, since the server's are counted there too). It returns rs.
func Judge(rs *RunStats) *RunStats {
	if rs == nil {
		return nil
	}
	rs.Reasons = nil
	if rs.Seconds >= MinJudgedCPUSeconds && rs.Cores > 0 && rs.CPUPercent >= SaturatedCPUPercent {
		rs.Reasons = append(rs.Reasons, fmt.Sprintf("client CPU %.0f%% of %d cores (limit %d%%)", rs.CPUPercent, rs.Cores, SaturatedCPUPercent))
	}
	if rs.Scheduled > 0 {
		if p := 100 * float64(rs.Late+rs.Dropped) / float64(rs.Scheduled); p > SaturatedLatePercent {
			rs.Reasons = append(rs.Reasons, fmt.Sprintf("%.1f%% of starts late or dropped (%d late, %d dropped of %d; limit %d%%)",
				p, rs.Late, rs.Dropped, rs.Scheduled, SaturatedLatePercent))
		}
	}
	if !rs.SharedStack {
		if lost := rs.RetransSegs - min(rs.DSACKRecv, rs.RetransSegs); lost > 0 {
			why := fmt.Sprintf("%d TCP segments retransmitted on the client's side", lost)
			if rs.DSACKRecv > 0 {
				why += fmt.Sprintf(" (besides %d the server reported it already had: spurious)", min(rs.DSACKRecv, rs.RetransSegs))
			}
			rs.Reasons = append(rs.Reasons, why)
		}
		if rs.ListenOverflows > 0 || rs.ListenDrops > 0 {
			rs.Reasons = append(rs.Reasons, fmt.Sprintf("%d listen overflows, %d listen drops on the client's side", rs.ListenOverflows, rs.ListenDrops))
		}
	}
	rs.GeneratorLimited = len(rs.Reasons) > 0
	return rs
}

// Summary is one line of rs for text output: the counters, then the verdict.
func (rs *RunStats) Summary() string {
	if rs == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU %.0f%% of %d cores, steal %.1f%%, retrans %d, listen overflows %d, drops %d, TCP timeouts %d, syncookies %d, TCP inuse %d→%d tw %d→%d",
		rs.CPUPercent, rs.Cores, rs.StealPercent, rs.RetransSegs, rs.ListenOverflows, rs.ListenDrops, rs.TCPTimeouts, rs.SyncookiesSent,
		rs.SockstatBefore.InUse, rs.SockstatAfter.InUse, rs.SockstatBefore.TimeWait, rs.SockstatAfter.TimeWait)
	if rs.ConntrackMax >= 0 {
		fmt.Fprintf(&b, ", conntrack %d/%d", rs.ConntrackCount, rs.ConntrackMax)
	}
	if rs.SharedStack {
		b.WriteString(" (target on this host's stack: TCP counters not judged)")
	}
	if rs.GeneratorLimited {
		fmt.Fprintf(&b, "; generator-limited: %s", strings.Join(rs.Reasons, "; "))
	}
	return b.String()
}

// GeneratorLimited reports whether any record's run was generator-limited, with every reason
// prefixed by the record's host name: the verdict of a merged result is the OR of its hosts'.
func GeneratorLimited(records []Record) (bool, []string) {
	var reasons []string
	limited := false
	for _, r := range records {
		if r.Run == nil || !r.Run.GeneratorLimited {
			continue
		}
		limited = true
		host := r.Hostname
		if host == "" {
			host = "?"
		}
		for _, why := range r.Run.Reasons {
			reasons = append(reasons, host+": "+why)
		}
	}
	return limited, reasons
}

// OnThisStack reports whether target (a host, host:port or URL) is on this process's own network
// stack: a loopback address, "localhost", or an address of one of this namespace's interfaces.
// Names other than localhost are resolved with a short deadline; an unresolvable one counts as
// elsewhere.
func OnThisStack(target string) bool {
	host := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return false
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	local, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true
		}
		for _, a := range local {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}
