package linkkeysserver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

func u64p(v uint64) *uint64 { return &v }

func sampleSnapshot() Snapshot {
	return Snapshot{MetricsLine: linkkeys.MetricsLine{
		Label: "running", ElapsedSecs: 5.001234567, AcceptedConnections: 1, OpenConnections: 2, EstablishedConnections: 3,
		HandshakesInProgress: 4, HandshakeTimeouts: 5, HandshakeRejections: 6, ShedConnectionLimit: 7,
		ShedHandshakePerSource: 8, ShedHandshakeOverflow: 9, ShedHandshakeGlobal: 10, FramesProcessed: 11,
		FrameBufferBytes: 12, ProcessRSSBytes: u64p(13), EstablishedTotal: 14, ParkedConnections: 15, RateLimitedResponses: 16,
		ClosedByPeer: 17, ClosedOversizedFrame: 18, ClosedMalformedRequest: 19, ClosedIdleTimeout: 20, ClosedIOTimeout: 21,
		ClosedSlowFrameBody: 22, ClosedFrameBudget: 23, ClosedOversizedResponse: 24, ClosedShutdown: 25,
		ProcessRSSAnonBytes: 26, ProcessRSSFileBytes: 27, ProcessRSSShmemBytes: 28,
		HostTCPListenOverflows: 29, HostTCPListenDrops: 30, HostTCPRetransSegs: 31, HostTCPDSACKRecv: 32, HostTCPSyncookiesSent: 33,
	}}
}

// formatLine is the METRICS line of a snapshot.
func formatLine(s Snapshot) string { return linkkeys.FormatMetricsLine(s.MetricsLine) }

// TestMetricsLineShape pins the field order (the upstream fields first, new
// fields only after process_rss_bytes) with golden lines. The lines of the
// server before the closed_* counters (metrics_lines_v1.golden, never
// updated) must be the current lines with those counters and the RSS split
// cut off, the lines from before the RSS split (metrics_lines_v2.golden,
// never updated) the current lines without the split and the host TCP
// counters, and the lines from before the host TCP counters
// (metrics_lines_v3.golden, never updated) the current lines without them,
// byte for byte, so parsers of the older lines read every field they knew.
func TestMetricsLineShape(t *testing.T) {
	s := sampleSnapshot()
	nullRSS := s
	nullRSS.ProcessRSSBytes = nil
	nullRSS.Label = "final"
	nullRSS.ElapsedSecs = 0
	got := formatLine(s) + "\n" + formatLine(nullRSS) + "\n"
	golden(t, "metrics_lines.golden", got)
	v1, err := os.ReadFile(filepath.Join("testdata", "metrics_lines_v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile(filepath.Join("testdata", "metrics_lines_v2.golden"))
	if err != nil {
		t.Fatal(err)
	}
	v3, err := os.ReadFile(filepath.Join("testdata", "metrics_lines_v3.golden"))
	if err != nil {
		t.Fatal(err)
	}
	noHost := regexp.MustCompile(`,"host_tcp_[a-z_]+":\d+`).ReplaceAllString(got, "")
	if noHost != string(v3) {
		t.Errorf("without the host TCP counters\n got %q\nwant %q", noHost, v3)
	}
	noSplit := regexp.MustCompile(`,"process_rss_(anon|file|shmem)_bytes":\d+`).ReplaceAllString(noHost, "")
	if noSplit != string(v2) {
		t.Errorf("without the RSS split\n got %q\nwant %q", noSplit, v2)
	}
	cut := regexp.MustCompile(`,"closed_[a-z_]+":\d+`).ReplaceAllString(noSplit, "")
	if cut != string(v1) {
		t.Errorf("without the closed_* counters\n got %q\nwant %q", cut, v1)
	}
	// The upstream fields, in order, are a prefix of every line.
	upstream := []string{"label", "elapsed_secs", "accepted_connections", "open_connections", "established_connections",
		"handshakes_in_progress", "handshake_timeouts", "handshake_rejections", "shed_connection_limit",
		"shed_handshake_per_source", "shed_handshake_overflow", "shed_handshake_global", "frames_processed",
		"frame_buffer_bytes", "process_rss_bytes"}
	line := formatLine(s)
	at := 0
	for _, f := range upstream {
		i := strings.Index(line[at:], `"`+f+`":`)
		if i < 0 {
			t.Fatalf("field %s missing or out of order in %s", f, line)
		}
		at += i + 1
	}
	if !strings.HasPrefix(line, `METRICS {"label":"running","elapsed_secs":5.001234567,"accepted_connections":1,`) {
		t.Errorf("line starts %q", line[:60])
	}
}

func TestSumSnapshots(t *testing.T) {
	a, b := sampleSnapshot(), sampleSnapshot()
	b.ProcessRSSBytes = nil
	b.HandshakeLimiter.RejectedGlobal = 3
	b.SnapshotCache.Hits = 4
	s := SumSnapshots(a, b)
	if s.AcceptedConnections != 2 || s.RateLimitedResponses != 32 || *s.ProcessRSSBytes != 13 ||
		s.HandshakeLimiter.RejectedGlobal != 3 || s.SnapshotCache.Hits != 4 {
		t.Errorf("sum %+v", s)
	}
	if SumSnapshots().ProcessRSSBytes != nil {
		t.Error("empty sum has an RSS")
	}
}

// limits.rs unit tests: metrics_default_to_zero,
// metrics_track_accept_and_close, metrics_track_handshake_shed_reasons and
// frame_buffer_accounting_returns_to_zero, through a real server.
func TestMetricsDefaultToZero(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	m := ts.Metrics()
	m.ProcessRSSBytes, m.ElapsedSecs = nil, 0
	m.ProcessRSSAnonBytes, m.ProcessRSSFileBytes, m.ProcessRSSShmemBytes, m.Absent = 0, 0, 0, nil
	m.HandshakeLimiter.MaxBucketEntries, m.PublicReadLimiter.MaxBucketEntries = 0, 0
	if got := formatLine(m); got != formatLine(Snapshot{MetricsLine: linkkeys.MetricsLine{Label: "running"}}) {
		t.Errorf("fresh server: %s", got)
	}
}

func TestMetricsTrackAcceptAndClose(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	a, b := dial(t, ts), dial(t, ts)
	eventually(t, "2 open", func() bool { m := ts.Metrics(); return m.OpenConnections == 2 && m.EstablishedConnections == 2 })
	a.tc.NetConn().Close()
	b.tc.NetConn().Close()
	eventually(t, "0 open", func() bool { m := ts.Metrics(); return m.OpenConnections == 0 && m.EstablishedConnections == 0 })
	if m := ts.Metrics(); m.AcceptedConnections != 2 || m.EstablishedTotal != 2 {
		t.Errorf("accepted %d established_total %d after closing, want 2 and 2 (cumulative)", m.AcceptedConnections, m.EstablishedTotal)
	}
}

func TestMetricsTrackHandshakeShedReasons(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   func() Config
		check func(Snapshot) bool
	}{
		{"per source", func() Config {
			c := permissive()
			c.Handshake.Burst, c.Handshake.RatePerMinute = 1, 1e-3
			return c
		}, func(m Snapshot) bool { return m.ShedHandshakePerSource == 1 }},
		{"global", func() Config {
			c := permissive()
			c.Handshake.GlobalBurst, c.Handshake.GlobalRatePerSecond = 1, 1e-3
			return c
		}, func(m Snapshot) bool { return m.ShedHandshakeGlobal == 1 }},
		{"overflow", func() Config {
			c := permissive()
			c.Handshake.DistinctSourceThreshold, c.Handshake.OverflowBurst, c.Handshake.OverflowRatePerSecond = 1, 1e-3, 1e-3
			return c
		}, func(m Snapshot) bool { return m.ShedHandshakeOverflow == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, TestServerOptions{Config: tc.lim(), Clock: &admit.ManualClock{}})
			_ = dialFrom(t, ts, "127.0.0.10")
			src := "127.0.0.10"
			if tc.name == "overflow" {
				src = "127.0.0.11"
			}
			readUntilClosed(t, dialRawFrom(t, ts.Addr, src))
			eventually(t, tc.name+" shed", func() bool { return tc.check(ts.Metrics()) })
			// The client finishes its handshake before the server does, so
			// the identity holds once the server is quiet.
			eventually(t, "accounting identity", func() bool {
				m := ts.Metrics()
				return m.HandshakesInProgress == 0 && m.Pending() == 0 && m.EstablishedTotal == 1
			})
		})
	}
}

func TestFrameBufferAccountingReturnsToZero(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	// Announce 3000 bytes and send half: the gauge holds 3000 while the
	// body is incomplete, then returns to 0 once it is dispatched.
	if _, err := c.tc.Write([]byte{0, 0, 0x0b, 0xb8}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.tc.Write(make([]byte, 1500)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "frame_buffer_bytes == 3000", func() bool { return ts.Metrics().FrameBufferBytes == 3000 })
	if _, err := c.tc.Write(make([]byte, 1500)); err != nil {
		t.Fatal(err)
	}
	if r := c.recv(); r.Status != 1 {
		t.Errorf("status %v for a zero-filled body, want MalformedEnvelope", r.Status)
	}
	eventually(t, "frame_buffer_bytes == 0", func() bool { return ts.Metrics().FrameBufferBytes == 0 })
}

func TestMemoryReleaser(t *testing.T) {
	released := 0
	m := &MemoryReleaser{MinGap: 10 * time.Second, Release: func() { released++ }}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		accepted, frames uint64
		at               time.Duration
		want             bool
	}{
		{0, 0, 0, false},              // first look counts as activity
		{0, 0, 2 * time.Second, true}, // quiet after it: release
		{0, 0, 4 * time.Second, false},
		{5, 0, 6 * time.Second, false}, // connections arrive
		{5, 0, 8 * time.Second, false}, // quiet, but within MinGap of the last release
		{5, 0, 13 * time.Second, true}, // now
		{5, 9, 15 * time.Second, false},
		{5, 20, 27 * time.Second, false}, // busy: never
		{5, 20, 29 * time.Second, true},
	}
	for i, s := range steps {
		got := m.Check(Snapshot{MetricsLine: linkkeys.MetricsLine{AcceptedConnections: s.accepted, FramesProcessed: s.frames}}, t0.Add(s.at))
		if got != s.want {
			t.Errorf("step %d: released %v, want %v", i, got, s.want)
		}
	}
	if released != 3 {
		t.Errorf("released %d times, want 3", released)
	}
}

// TestMemoryReleaserHold: a due release waits while Hold says so and runs at the first check after
// it lets go, with no new activity needed.
func TestMemoryReleaserHold(t *testing.T) {
	released, hold := 0, true
	m := &MemoryReleaser{MinGap: 10 * time.Second, Release: func() { released++ }, Hold: func() bool { return hold }}
	t0 := time.Unix(1000, 0)
	snap := func(accepted uint64) Snapshot {
		return Snapshot{MetricsLine: linkkeys.MetricsLine{AcceptedConnections: accepted}}
	}
	m.Check(snap(5), t0) // activity
	for i := 1; i <= 3; i++ {
		if m.Check(snap(5), t0.Add(time.Duration(2*i)*time.Second)) {
			t.Fatalf("released at check %d while held", i)
		}
	}
	hold = false
	if !m.Check(snap(5), t0.Add(8*time.Second)) || released != 1 {
		t.Fatalf("the held release did not run once let go (released %d)", released)
	}
	if m.Check(snap(5), t0.Add(30*time.Second)) {
		t.Fatal("released again with no activity since")
	}
}

// TestQuietTurn: the parent tells the children on every change between a quiet and a busy
// interval, and only then.
func TestQuietTurn(t *testing.T) {
	at := func(accepted, frames uint64) Snapshot {
		return Snapshot{MetricsLine: linkkeys.MetricsLine{AcceptedConnections: accepted, FramesProcessed: frames}}
	}
	for _, c := range []struct {
		prev, cur   Snapshot
		told        bool
		quiet, turn bool
	}{
		{at(10, 0), at(10, 0), false, true, true},   // turned quiet
		{at(10, 0), at(10, 0), true, true, false},   // still quiet
		{at(10, 0), at(11, 0), true, false, true},   // a connection: busy
		{at(10, 5), at(10, 6), true, false, true},   // a frame: busy
		{at(10, 5), at(12, 9), false, false, false}, // still busy
	} {
		quiet, turn := quietTurn(c.prev, c.cur, c.told)
		if quiet != c.quiet || turn != c.turn {
			t.Errorf("quietTurn(%d/%d → %d/%d, told quiet %v) = %v, %v; want %v, %v", c.prev.AcceptedConnections, c.prev.FramesProcessed,
				c.cur.AcceptedConnections, c.cur.FramesProcessed, c.told, quiet, turn, c.quiet, c.turn)
		}
	}
}
