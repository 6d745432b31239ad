package machine

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

const netstatSample = `TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPTimeouts
TcpExt: 3 7 9 11
IpExt: InOctets OutOctets
IpExt: 18446744073709551615 5
`

const snmpSample = `Tcp: RtoAlgorithm MaxConn RetransSegs
Tcp: 1 -1 42
`

func TestParseNetstat(t *testing.T) {
	ns, err := ParseNetstat([]byte(netstatSample))
	if err != nil {
		t.Fatal(err)
	}
	if got := ns["TcpExt"]; got["SyncookiesSent"] != 3 || got["ListenOverflows"] != 7 || got["ListenDrops"] != 9 || got["TCPTimeouts"] != 11 {
		t.Errorf("TcpExt = %v", got)
	}
	if ns["IpExt"]["InOctets"] <= 0 {
		t.Errorf("an unsigned 64-bit counter should read as a non-negative count, got %d", ns["IpExt"]["InOctets"])
	}
	snmp, err := ParseNetstat([]byte(snmpSample))
	if err != nil {
		t.Fatal(err)
	}
	if snmp["Tcp"]["RetransSegs"] != 42 || snmp["Tcp"]["MaxConn"] != -1 {
		t.Errorf("Tcp = %v", snmp["Tcp"])
	}
}

func TestParseNetstatErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "empty"},
		{"header only", "TcpExt: A B\n", "no values line"},
		{"other section", "TcpExt: A\nIpExt: 1\n", "expected the values"},
		{"count", "TcpExt: A B\nTcpExt: 1\n", "2 names but 1 values"},
		{"not a number", "TcpExt: A\nTcpExt: x\n", "not an integer"},
		{"no colon", "garbage\n", "header"},
		{"too big", strings.Repeat("a", MaxKernelFileBytes+1), "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNetstat([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "machine: ") {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestParseSockstat(t *testing.T) {
	s, err := ParseSockstat([]byte("sockets: used 9\nTCP: inuse 3 orphan 1 tw 4 alloc 5 mem 2\nUDP: inuse 0 mem 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s != (Sockstat{InUse: 3, Orphan: 1, TimeWait: 4, Alloc: 5, MemPages: 2}) {
		t.Errorf("sockstat = %+v", s)
	}
	for _, bad := range []string{"sockets: used 1\n", "TCP: inuse\n", "TCP: inuse x\n"} {
		if _, err := ParseSockstat([]byte(bad)); err == nil {
			t.Errorf("ParseSockstat(%q) accepted", bad)
		}
	}
}

func TestParseProcStatCPU(t *testing.T) {
	steal, total, err := ParseProcStatCPU([]byte("cpu  10 0 20 60 5 0 1 4 7 0\ncpu0 1 2 3 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if steal != 4 || total != 100 {
		t.Errorf("steal %d total %d, want 4 and 100 (guest columns are inside user)", steal, total)
	}
	if s, tot, err := ParseProcStatCPU([]byte("cpu 1 2 3 4\n")); err != nil || s != 0 || tot != 10 {
		t.Errorf("old kernel line: %d %d %v", s, tot, err)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4\n", "cpu 1\n"} {
		if _, _, err := ParseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("ParseProcStatCPU(%q) accepted", bad)
		}
	}
}

// FuzzParseKernelFiles: no input panics or runs away, and every error carries the package prefix.
func FuzzParseKernelFiles(f *testing.F) {
	for _, s := range []string{netstatSample, snmpSample, "TCP: inuse 3 orphan 1 tw 4 alloc 5 mem 2\n", "cpu  1 2 3 4 5 6 7 8 9 10\n", "", ":\n:"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ns, err := ParseNetstat(b); err != nil {
			if !strings.HasPrefix(err.Error(), "machine: ") {
				t.Fatalf("error without prefix: %v", err)
			}
		} else if len(ns) == 0 {
			t.Fatal("ParseNetstat accepted input with no section")
		}
		if _, err := ParseSockstat(b); err != nil && !strings.HasPrefix(err.Error(), "machine: ") {
			t.Fatalf("error without prefix: %v", err)
		}
		if steal, total, err := ParseProcStatCPU(b); err != nil && !strings.HasPrefix(err.Error(), "machine: ") {
			t.Fatalf("error without prefix: %v", err)
		} else if err == nil && steal > total {
			t.Fatalf("steal %d above total %d", steal, total)
		}
	})
}

// reading builds a synthetic Kernel reading at second sec.
func reading(sec int, cpu time.Duration) Kernel {
	return Kernel{At: time.Unix(1000+int64(sec), 0), ProcessCPU: cpu, ConntrackCount: -1, ConntrackMax: -1}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rs     func() *RunStats
		limit  bool
		reason string
	}{
		{"idle", func() *RunStats { return Delta(reading(0, 0), reading(10, time.Second), 4) }, false, ""},
		{"cpu saturated", func() *RunStats { return Delta(reading(0, 0), reading(10, 37*time.Second), 4) }, true, "client CPU 92% of 4 cores"},
		{"cpu just under", func() *RunStats { return Delta(reading(0, 0), reading(10, 35*time.Second), 4) }, false, ""},
		{"short run not judged on CPU", func() *RunStats {
			b, a := reading(0, 0), reading(0, 0)
			a.At = b.At.Add(500 * time.Millisecond)
			a.ProcessCPU = 2 * time.Second
			return Delta(b, a, 4)
		}, false, ""},
		{"late starts", func() *RunStats {
			rs := Delta(reading(0, 0), reading(10, 0), 4)
			rs.Scheduled, rs.Late, rs.Dropped = 1000, 8, 3
			return rs
		}, true, "1.1% of starts late or dropped"},
		{"late at 1% is fine", func() *RunStats {
			rs := Delta(reading(0, 0), reading(10, 0), 4)
			rs.Scheduled, rs.Late = 1000, 10
			return rs
		}, false, ""},
		{"retransmits on the client", func() *RunStats {
			b, a := reading(0, 0), reading(10, 0)
			b.RetransSegs, a.RetransSegs = 5, 9
			return Delta(b, a, 4)
		}, true, "4 TCP segments retransmitted"},
		{"spurious retransmits (DSACK) are not the client's", func() *RunStats {
			b, a := reading(0, 0), reading(10, 0)
			a.RetransSegs, a.DSACKRecv = 40, 40
			return Delta(b, a, 4)
		}, false, ""},
		{"retransmits beyond the spurious ones", func() *RunStats {
			b, a := reading(0, 0), reading(10, 0)
			a.RetransSegs, a.DSACKRecv = 40, 30
			return Delta(b, a, 4)
		}, true, "10 TCP segments retransmitted on the client's side (besides 30 the server reported it already had"},
		{"overflows on a shared stack are not the client's", func() *RunStats {
			b, a := reading(0, 0), reading(10, 0)
			a.ListenOverflows = 3
			rs := Delta(b, a, 4)
			rs.SharedStack = true
			return rs
		}, false, ""},
		{"overflows on the client's own stack", func() *RunStats {
			b, a := reading(0, 0), reading(10, 0)
			a.ListenOverflows, a.ListenDrops = 3, 3
			return Delta(b, a, 4)
		}, true, "3 listen overflows, 3 listen drops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := Judge(tc.rs())
			if rs.GeneratorLimited != tc.limit {
				t.Fatalf("generator-limited %v, want %v (reasons %q, %s)", rs.GeneratorLimited, tc.limit, rs.Reasons, rs.Summary())
			}
			if tc.reason != "" && !strings.Contains(strings.Join(rs.Reasons, "\n"), tc.reason) {
				t.Errorf("reasons %q lack %q", rs.Reasons, tc.reason)
			}
		})
	}
}

// TestGeneratorLimitedOR: the verdict over appended records (a merged result) is their OR.
func TestGeneratorLimitedOR(t *testing.T) {
	busy := Judge(Delta(reading(0, 0), reading(10, 20*time.Second), 2))
	calm := Judge(Delta(reading(0, 0), reading(10, time.Second), 2))
	recs := []Record{{Hostname: "a", Run: calm}, {Hostname: "b"}, {Hostname: "c", Run: busy}}
	limited, why := GeneratorLimited(recs)
	if !limited || len(why) != 1 || !strings.HasPrefix(why[0], "c: client CPU 100%") {
		t.Errorf("GeneratorLimited = %v %q", limited, why)
	}
	if limited, _ := GeneratorLimited(recs[:2]); limited {
		t.Error("calm hosts judged generator-limited")
	}
}

func TestDeltaSteal(t *testing.T) {
	b, a := reading(0, 0), reading(10, 0)
	b.StealTicks, b.TotalTicks = 10, 1000
	a.StealTicks, a.TotalTicks = 60, 2000
	if rs := Delta(b, a, 1); rs.StealPercent != 5 {
		t.Errorf("steal %.2f%%, want 5%%", rs.StealPercent)
	}
}

func TestReadKernel(t *testing.T) {
	k := ReadKernel()
	if k.At.IsZero() {
		t.Fatal("no time")
	}
	t.Logf("reading: %+v", k)
}

func TestOnThisStack(t *testing.T) {
	for target, want := range map[string]bool{
		"127.0.0.1:443": true, "http://localhost:8080/x": true, "[::1]:1": true,
		"198.18.255.254:443": false, "https://192.0.2.1": false,
	} {
		if got := OnThisStack(target); got != want {
			t.Errorf("OnThisStack(%q) = %v, want %v", target, got, want)
		}
	}
}

// TCPCountersRead is false exactly when a reading lacks the netstat or snmp TCP sections.
func TestTCPCountersRead(t *testing.T) {
	for _, tc := range []struct {
		missing []string
		want    bool
	}{
		{nil, true},
		{[]string{"sockstat: no such file"}, true},
		{[]string{missTcpExt + ": open /proc/net/netstat: permission denied"}, false},
		{[]string{missTcp + ": parse error"}, false},
		{[]string{missNetwork + ": read from /proc on Linux only"}, false},
	} {
		if got := (Kernel{Missing: tc.missing}).TCPCountersRead(); got != tc.want {
			t.Errorf("missing %q: TCPCountersRead %v, want %v", tc.missing, got, tc.want)
		}
	}
	if k := ReadKernel(); runtime.GOOS != "linux" && k.TCPCountersRead() {
		t.Errorf("off Linux a reading claims the TCP counters: %+v", k)
	}
}
