package linkkeysserver

import (
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
)

// A real server on loopback reports its host's TCP counters on its METRICS line: present, read back
// by the client's parser, and within what the kernel counted between just before the server started
// and just after the reading (the server's deltas cannot exceed the namespace's own growth).
func TestHostTCPCountersOnLoopback(t *testing.T) {
	before := machine.ReadKernel()
	ts := startServer(t, TestServerOptions{Config: permissive()})
	for range 3 {
		c := dial(t, ts)
		c.call("DomainKeys", "get-domain-keys", []byte{0xa0})
		c.tc.Close()
	}
	line := linkkeys.FormatMetricsLine(ts.Metrics().MetricsLine)
	after := machine.ReadKernel()
	got, err := linkkeys.ParseMetricsLine(line)
	if err != nil {
		t.Fatalf("the server's own line does not parse: %v\n%s", err, line)
	}
	if !before.TCPCountersRead() || !after.TCPCountersRead() {
		// Off Linux (or /proc/net unreadable): the counters are left off the line, not written as 0.
		for _, name := range linkkeys.HostTCPFields {
			if got.Has(name) {
				t.Errorf("%s on the line although this host's TCP counters cannot be read (%v): %s", name, after.Missing, line)
			}
		}
		return
	}
	grew := machine.Delta(before, after, 0)
	bound := map[string]int64{
		"host_tcp_listen_overflows": grew.ListenOverflows,
		"host_tcp_listen_drops":     grew.ListenDrops,
		"host_tcp_retrans_segs":     grew.RetransSegs,
		"host_tcp_dsack_recv":       grew.DSACKRecv,
		"host_tcp_syncookies_sent":  grew.SyncookiesSent,
	}
	for _, name := range linkkeys.HostTCPFields {
		f, _ := linkkeys.LookupMetricsField(name)
		v, ok := f.Value(&got)
		if !ok {
			t.Errorf("%s missing from the server's line: %s", name, line)
			continue
		}
		if int64(v) < 0 || int64(v) > bound[name] {
			t.Errorf("%s = %d, outside 0..%d (what the namespace counted around the server's life)", name, v, bound[name])
		}
	}
}

// setHostTCP takes differences, counts a counter that went back as 0, and refuses readings that
// lack the TCP counters.
func TestSetHostTCP(t *testing.T) {
	before := machine.Kernel{ListenOverflows: 3, ListenDrops: 4, RetransSegs: 100, DSACKRecv: 7, SyncookiesSent: 1}
	now := machine.Kernel{ListenOverflows: 5, ListenDrops: 4, RetransSegs: 90, DSACKRecv: 9, SyncookiesSent: 2}
	var m linkkeys.MetricsLine
	if !setHostTCP(&m, before, now) {
		t.Fatal("complete readings refused")
	}
	if m.HostTCPListenOverflows != 2 || m.HostTCPListenDrops != 0 || m.HostTCPRetransSegs != 0 || m.HostTCPDSACKRecv != 2 || m.HostTCPSyncookiesSent != 1 {
		t.Errorf("deltas %+v", m)
	}
	for _, miss := range []string{"TcpExt: permission denied", "Tcp: no such file", "kernel network counters: not on plan9"} {
		var m linkkeys.MetricsLine
		if setHostTCP(&m, before, machine.Kernel{Missing: []string{miss}}) {
			t.Errorf("a reading missing %q accepted", miss)
		}
	}
	if !setHostTCP(&m, before, machine.Kernel{Missing: []string{"sockstat: gone"}}) {
		t.Error("a reading missing only sockstat refused")
	}
}
