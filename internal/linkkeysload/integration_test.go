package linkkeysload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/testwait"
)

// These tests drive the clients against the real reference server on 127.0.0.1:0.

// scaleProfile is the seed's scale profile (limits raised so nothing is shed).
var scaleProfile = map[string]string{
	"TCP_MAX_CONNECTIONS": "220000", "TCP_HANDSHAKE_CONCURRENCY": "1024",
	"TCP_HANDSHAKE_RATE_PER_MINUTE": "6000000", "TCP_HANDSHAKE_BURST": "1000000",
	"TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "100000", "TCP_HANDSHAKE_GLOBAL_BURST": "200000",
	"PUBLIC_READ_RATE_PER_MINUTE": "6000000", "PUBLIC_READ_BURST": "1000000",
	"PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "100000", "PUBLIC_READ_GLOBAL_BURST": "200000",
}

// unlimitedReads raises the public-read limits far past anything a 1-second test sends (a pipelined
// run passes the scale profile's 200,000 global burst within a second).
var unlimitedReads = map[string]string{
	"PUBLIC_READ_RATE_PER_MINUTE": "6000000000", "PUBLIC_READ_BURST": "1000000000",
	"PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "1000000000", "PUBLIC_READ_GLOBAL_BURST": "1000000000",
}

func config(t testing.TB, env map[string]string) linkkeysserver.Config {
	t.Helper()
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// realServer starts the reference server and a METRICS log writer (a line every 50 ms, as the
// server command's loop prints them every --metrics-interval-secs).
type realServer struct {
	*linkkeysserver.TestServer
	target linkkeysload.Target
	log    string
}

// workerLauncher starts this test binary as a client worker process (TestMain runs the worker when
// LKLOAD_TEST_WORKER is set).
func workerLauncher(t testing.TB) linkkeysload.Launcher {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return linkkeysload.Launcher{Executable: exe, Env: append(os.Environ(), "LKLOAD_TEST_WORKER=1")}
}

func startReal(t testing.TB, cfg linkkeysserver.Config) *realServer {
	t.Helper()
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	rs := &realServer{TestServer: ts, target: linkkeysload.TargetFromInfo(ts.Info()), log: filepath.Join(t.TempDir(), "server.log")}
	f, err := os.Create(rs.log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = linkkeysserver.MetricsLoop(ctx, f, time.Second, 0, ts.Metrics)
	}()
	// MetricsLoop's interval is at least a second; add lines more often so the tests stay short.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				s := ts.Metrics()
				s.Label = "running"
				_ = linkkeys.WriteMetricsLine(f, s.MetricsLine)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		testwait.WaitGroup(t, &wg, testwait.Long, "end of the METRICS writer")
		f.Close()
		if err := ts.Close(); err != nil {
			t.Errorf("closing server: %v", err)
		}
	})
	return rs
}

func ip(t testing.TB, s string) linkkeysload.IPv4 {
	a, err := linkkeysload.ParseIPv4("--client-ip-base", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConnectionsAgainstServer(t *testing.T) {
	rs := startReal(t, config(t, scaleProfile))
	cfg := linkkeysload.ConnectionsConfig{Target: rs.target, Count: 300, Concurrency: 64, HoldSecs: 0, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.21.0"), Count: 8}, ProgressEvery: 100}
	var out bytes.Buffer
	res, err := linkkeysload.Connections(context.Background(), cfg, linkkeysload.Run{Stdout: &out,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts.Succeeded != 300 || res.Hold.Held != 300 || res.Hold.StillOpen != 300 {
		t.Fatalf("%+v\n%s", res.Attempts, out.String())
	}
	if res.Server == nil || res.Server.Mismatch() || !res.Server.Delta.HasCompleted || res.Server.Delta.HandshakesCompleted != 300 {
		t.Fatalf("server accounting %+v\n%s", res.Server, out.String())
	}
}

func TestDDoSProtectionIsAccountedExactly(t *testing.T) {
	// The default profile's shape with smaller numbers and refills too slow to matter, so the
	// outcome does not depend on how fast this machine is: the first 1,000 sources are tracked and
	// the global bucket admits 200 of them; the 500 sources past the distinct-source threshold go
	// to the overflow bucket, whose 10 tokens pass them on to the (empty) global bucket.
	rs := startReal(t, config(t, map[string]string{
		"TCP_HANDSHAKE_GLOBAL_BURST": "200", "TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "0.001",
		"TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD": "1000",
		"TCP_HANDSHAKE_OVERFLOW_BURST":            "10", "TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND": "0.001",
	}))
	cfg := linkkeysload.DDoSConfig{Target: rs.target, Sources: 1500, Concurrency: 100, AttemptTimeout: 5 * time.Second,
		Base: ip(t, "127.22.0.0"), ProgressEvery: 500}
	var out bytes.Buffer
	res, err := linkkeysload.DDoS(context.Background(), cfg, linkkeysload.Run{Stdout: &out,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Attempts
	if a.Attempted != 1500 || a.Succeeded != 200 || a.Failed != 1300 {
		t.Fatalf("%+v\n%s", a, out.String())
	}
	// Shed attempts look like EOF or a reset from here.
	for reason := range a.Reasons {
		if !strings.HasPrefix(reason, "tls_handshake_error_or_server_reject:E") {
			t.Errorf("unexpected reason %s", reason)
		}
	}
	s := res.Server
	if s == nil || s.Mismatch() || s.Delta.ShedOverflow != 490 || s.Delta.ShedGlobal != 810 || s.Delta.ShedPerSource != 0 {
		t.Fatalf("server accounting %+v\n%s", s, out.String())
	}
	if !strings.Contains(out.String(), "  progress: attempted=1500 allowed=") {
		t.Fatal(out.String())
	}
}

func TestRequestBenchAgainstServer(t *testing.T) {
	rs := startReal(t, config(t, unlimitedReads))
	for _, c := range []struct {
		name     string
		pipeline uint32
		rate     float64
		op       string
	}{
		{"closed", 1, 0, linkkeysload.OpDomainKeys},
		{"pipelined", 16, 0, linkkeysload.OpDomainKeys},
		{"open", 1, 3000, linkkeysload.OpDomainKeys},
		{"open pipelined hello", 4, 3000, linkkeysload.OpHello},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := linkkeysload.RequestConfig{Target: rs.target, Connections: 8, DurationSecs: 1, Op: c.op,
				Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.23.0"), Count: 8}, AttemptTimeout: 10 * time.Second,
				Pipeline: c.pipeline, Rate: c.rate}
			var out, errOut bytes.Buffer
			res, err := linkkeysload.RequestBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			q := res.Requests
			if q.Completed == 0 || q.Errors != 0 || q.Sent != q.Completed || errOut.Len() != 0 {
				t.Fatalf("%+v\n%s%s", q, out.String(), errOut.String())
			}
			if c.rate > 0 && q.Sent+q.Unsent != int64(c.rate) {
				t.Fatalf("open model: sent %d unsent %d, want %v due", q.Sent, q.Unsent, c.rate)
			}
		})
	}
}

func TestRequestBenchDefaultProfileReportsRateLimiting(t *testing.T) {
	rs := startReal(t, config(t, nil)) // public reads: 100 burst per source
	cfg := linkkeysload.RequestConfig{Target: rs.target, Connections: 2, DurationSecs: 2, Op: linkkeysload.OpDomainKeys,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.24.0"), Count: 2}, AttemptTimeout: 10 * time.Second, Pipeline: 4, DebugSample: true}
	var out, errOut bytes.Buffer
	res, err := linkkeysload.RequestBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	q := res.Requests
	if q.Completed < 200 || q.Statuses[linkkeys.StatusUnavailable.String()] == 0 {
		t.Fatalf("%+v", q)
	}
	if !strings.HasPrefix(errOut.String(), "  DEBUG sample non-ok response: status=Unavailable error=Some(\"Rate limited. Try again in ") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestHandshakeBenchResumesAgainstServer(t *testing.T) {
	rs := startReal(t, config(t, scaleProfile))
	cfg := linkkeysload.HandshakeConfig{Target: rs.target, DurationSecs: 1, Concurrency: 4, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.25.0"), Count: 4}, Resume: true}
	var out bytes.Buffer
	res, err := linkkeysload.HandshakeBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Handshakes
	if h.Failed != 0 || h.Resumed == 0 || h.Full == 0 || h.Full+h.Resumed != h.Completed {
		t.Fatalf("%+v\n%s", h, out.String())
	}
}

func TestConnectionsTwoWorkersAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rs := startReal(t, config(t, scaleProfile))
	cfg := linkkeysload.ConnectionsConfig{Target: rs.target, Count: 400, Concurrency: 64, HoldSecs: 1, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.26.0"), Count: 16}, ProgressEvery: 100}
	var out bytes.Buffer
	run := linkkeysload.Run{Stdout: &out, Workers: 2, Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second,
		Launcher: workerLauncher(t)}
	res, err := linkkeysload.Connections(context.Background(), cfg, run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts.Succeeded != 400 || res.Hold.Held != 400 || len(res.Segments) != 2 {
		t.Fatalf("%+v %+v\n%s", res.Attempts, res.Hold, out.String())
	}
	if res.Server.Mismatch() || res.Server.Delta.HandshakesCompleted != 400 {
		t.Fatalf("%+v\n%s", res.Server, out.String())
	}
	// The workers' intervals merge by index; only the first worker samples the server, so the
	// samples are the server's own figures, not a sum over workers.
	if got := intervalTotals(res); got["success"] != 400 || len(res.Machines) != 2 {
		t.Fatalf("intervals add up to %v; %d machine records", got, len(res.Machines))
	}
	accepted := float64(rs.Metrics().AcceptedConnections)
	for _, iv := range res.Intervals {
		if iv.Server["accepted_connections"] > accepted {
			t.Fatalf("sample %v exceeds the server's %v accepted: summed over workers?", iv.Server["accepted_connections"], accepted)
		}
	}
	// Both workers hold at once and their gauges sum: the parent's hold shows the 400.
	checkHoldTimeline(t, res, 400, 0)
	for _, n := range []string{"100", "200", "300", "400"} {
		if !strings.Contains(out.String(), "  progress: attempted="+n+" success="+n+" failed=0\n") {
			t.Fatalf("missing progress line at %s:\n%s", n, out.String())
		}
	}
}

// intervalTotals adds up a run's interval snapshots by outcome class.
func intervalTotals(res linkkeysload.Result) map[string]int64 {
	got := map[string]int64{}
	for _, iv := range res.Intervals {
		for k, v := range iv.Counts {
			got[k] += v
		}
	}
	return got
}

func TestRequestBenchSamplesThePrometheusEndpoint(t *testing.T) {
	rs := startReal(t, config(t, unlimitedReads))
	prom := httptest.NewServer(linkkeysserver.NewPrometheusExporter(rs.Metrics, true))
	defer prom.Close()
	cfg := linkkeysload.RequestConfig{Target: rs.target, Connections: 8, DurationSecs: 2, Op: linkkeysload.OpDomainKeys,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.27.0"), Count: 8}, AttemptTimeout: 10 * time.Second, Pipeline: 4}
	var out bytes.Buffer
	res, err := linkkeysload.RequestBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out,
		Metrics: linkkeysload.ResolveMetrics("", linkkeysload.ServerHints{MetricsAddr: prom.Listener.Addr().String()})})
	if err != nil {
		t.Fatal(err)
	}
	// A run under 30 s takes 100 ms snapshots.
	if len(res.Intervals) < 2 || res.IntervalSecs != engine.FineInterval.Seconds() {
		t.Fatalf("%d intervals of %gs, want 100 ms ones", len(res.Intervals), res.IntervalSecs)
	}
	if got := intervalTotals(res); got["success"] != res.Requests.Completed || res.Envelope.Totals["success"] != res.Requests.Completed {
		t.Fatalf("intervals add up to %v, totals %v, completed %d", got, res.Envelope.Totals, res.Requests.Completed)
	}
	var sampled int
	for _, iv := range res.Intervals {
		if iv.Server == nil {
			continue
		}
		sampled++
		if iv.Server["process_rss_bytes"] <= 0 || iv.Server["established_connections"] < 0 {
			t.Fatalf("sample %v", iv.Server)
		}
	}
	// The last interval's sample is read while that interval runs, so the server has answered at
	// least every request completed before the interval began (a fixed share of the whole run
	// depends on when the read lands on a loaded machine).
	last := res.Intervals[len(res.Intervals)-1].Server
	var before int64
	for _, iv := range res.Intervals[:len(res.Intervals)-1] {
		before += iv.Counts["success"]
	}
	if sampled < 2 || before == 0 || last["frames_processed"] < float64(before) || last["snapshot_cache_hits"] <= 0 {
		t.Fatalf("%d samples; last %v; completed %d, %d before the last interval", sampled, last, res.Requests.Completed, before)
	}
	// The server host's TCP counters (deltas since the server started) come through the scrape
	// under their METRICS names, where this host's /proc/net can be read.
	if machine.ReadKernel().TCPCountersRead() {
		for _, name := range linkkeys.HostTCPFields {
			if v, ok := last[name]; !ok || v < 0 {
				t.Errorf("server sample %s = %v (present %v); sample %v", name, v, ok, last)
			}
		}
	}
	if res.Histograms["request"].Count() != res.Requests.Latency.Count() || len(res.Machines) != 1 || res.Target != rs.target.Addr.String() {
		t.Fatalf("envelope: %v %d machines target %q", res.Histograms, len(res.Machines), res.Target)
	}
}

// TestPrometheusRoundTrip: every METRICS field the server exports on /metrics comes back from
// ParsePrometheus under its own name, through the one field table (no field lost or misnamed).
func TestPrometheusRoundTrip(t *testing.T) {
	var want linkkeys.MetricsLine
	for i, f := range linkkeys.MetricsFields() {
		want.SetCounter(f.Name, uint64(100+i))
	}
	want.Label = "scrape"
	// The per-prefix counters come back into the same names (the scrape lists prefixes by name).
	for i, f := range linkkeys.SourceFields() {
		want.SetSourceCounter("ddos-1", f.Name, uint64(1000+i))
		want.SetSourceCounter("held", f.Name, uint64(2000+i))
	}
	exp := linkkeysserver.NewPrometheusExporter(func() linkkeysserver.Snapshot {
		return linkkeysserver.Snapshot{MetricsLine: want}
	}, false)
	var b bytes.Buffer
	rec := httptestRecorder(&b)
	exp.ServeHTTP(rec, httptestRequest())
	got, err := linkkeysload.ParsePrometheus(&b)
	if err != nil {
		t.Fatal(err)
	}
	for k := range got.Extra { // the cache statistics, which are not METRICS fields
		if !strings.HasPrefix(k, "snapshot_cache_") {
			t.Errorf("sample %q not matched to a METRICS field", k)
		}
	}
	got.Extra = nil
	if g, w := linkkeys.FormatMetricsLine(got), linkkeys.FormatMetricsLine(want); g != w || got.Absent != nil {
		t.Errorf("scrape (absent %v)\n got %s\nwant %s", got.Absent, g, w)
	}
}

func httptestRecorder(w *bytes.Buffer) *httptest.ResponseRecorder {
	r := httptest.NewRecorder()
	r.Body = w
	return r
}

func httptestRequest() *http.Request { return httptest.NewRequest(http.MethodGet, "/metrics", nil) }

// logWatch is a slog handler that closes a channel when a message is logged.
type logWatch struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (h *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *logWatch) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logWatch) WithGroup(string) slog.Handler      { return h }

// TestConnectionsReportsAServerThatDiesMidHold: the real server is shut down while the client holds
// its connections. The client says how many held connections it lost, when and why, stops the hold
// (nothing is left to hold) and returns ErrHoldBroken, where it used to report failed=0 and succeed.
func TestConnectionsReportsAServerThatDiesMidHold(t *testing.T) {
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: config(t, scaleProfile)})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	cfg := linkkeysload.ConnectionsConfig{Target: linkkeysload.TargetFromInfo(ts.Info()), Count: 20, Concurrency: 8,
		HoldSecs: 600, AttemptTimeout: 10 * time.Second, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.23.0"), Count: 4},
		ProgressEvery: 100}
	holding := &logWatch{msg: "holding", seen: make(chan struct{})}
	var out bytes.Buffer
	type result struct {
		res linkkeysload.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := linkkeysload.Connections(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Log: slog.New(holding)})
		done <- result{res, err}
	}()
	select {
	case <-holding.seen:
	case r := <-done:
		t.Fatalf("returned before the hold: %v\n%s", r.err, out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done // the hold ends early: every held connection is gone
	if !errors.Is(r.err, linkkeysload.ErrHoldBroken) {
		t.Fatalf("error %v, want ErrHoldBroken\n%s", r.err, out.String())
	}
	h := r.res.Hold
	if h == nil || h.Held != 20 || h.StillOpen != 0 || h.Loss == nil || h.Loss.Lost != 20 {
		t.Fatalf("hold %+v\n%s", h, out.String())
	}
	if seen := h.Loss.Reasons["closed_by_server"] + h.Loss.Reasons["reset"]; seen != 20 || h.Loss.First.Before(h.Start) || h.Loss.Last.Before(h.Loss.First) {
		t.Errorf("loss %+v (hold start %v): want all 20 seen ending after the hold began", h.Loss, h.Start)
	}
	if h.Loss.ServerGone {
		t.Error("the server process (this test) is reported gone")
	}
	text := out.String()
	if !strings.Contains(text, "  LOST: 20 of 20 held connections ended during the hold (") ||
		!strings.Contains(text, "; the hold was not held (it lasted ") || !strings.Contains(text, "established=20 failed=0") {
		t.Errorf("output:\n%s", text)
	}
}

// TestHandshakeBenchRefusalsApartFromFailures: against the default limits with two source
// addresses, the server's per-source limiter sheds most handshakes. With its accounting read, the
// result counts exactly the server's sheds as refused by design (by reason, in the JSON too), the
// failures leave them out, the successes are the server's completed handshakes, and the summary
// names the limiter and its remedy. A paced run with enough sources for the per-source burst shows
// none refused.
func TestHandshakeBenchRefusalsApartFromFailures(t *testing.T) {
	srv := config(t, nil)
	limits := srv.Handshake.WithDefaults(admit.HandshakeDefaults())
	rs := startReal(t, srv)
	cfg := linkkeysload.HandshakeConfig{Target: rs.target, DurationSecs: 1, Concurrency: 8, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.28.0"), Count: 2}}
	var out bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "hs.json")
	res, err := linkkeysload.HandshakeBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out, JSONPath: jsonPath,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, a := res.Server, res.Attempts
	if s == nil || s.Mismatch() || !s.Delta.HasCompleted {
		t.Fatalf("server accounting %+v\n%s", s, out.String())
	}
	// The two sources' bursts (and their refill) pass; the per-source limiter sheds most of the rest.
	if s.Delta.ShedPerSource <= a.Succeeded || a.Succeeded == 0 {
		t.Fatalf("the per-source limiter should shed most attempts: %+v, shed %+v\n%s", a, s.Delta, out.String())
	}
	var refused int64
	for _, v := range res.Refused {
		refused += v
	}
	if refused != s.Delta.Shed() || res.Refused[linkkeysresult.RefusedHandshakeSource] != s.Delta.ShedPerSource {
		t.Fatalf("refused %v, server shed %+v", res.Refused, s.Delta)
	}
	if a.Succeeded != s.Delta.HandshakesCompleted || res.Handshakes.Completed != a.Succeeded {
		t.Fatalf("successes %d (handshakes %d), server completed %d", a.Succeeded, res.Handshakes.Completed, s.Delta.HandshakesCompleted)
	}
	if failures := a.Failed - refused; failures != s.Delta.HandshakeRejections+s.Delta.HandshakeTimeouts || failures < 0 {
		t.Fatalf("failures besides the refusals: %d; server rejections %d timeouts %d", failures, s.Delta.HandshakeRejections, s.Delta.HandshakeTimeouts)
	}
	for _, want := range []string{fmt.Sprintf("refused by design: %d (handshake_per_source=%d)", refused, refused),
		"to admit more (handshake_per_source): each source address gets TCP_HANDSHAKE_BURST"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("missing %q in\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Refused map[string]int64 `json:"refused"`
	}
	if err := json.Unmarshal(b, &file); err != nil || file.Refused[linkkeysresult.RefusedHandshakeSource] != refused || len(file.Refused) != 1 {
		t.Fatalf("the file's refused %v (%v)", file.Refused, err)
	}
	// The report page's headline tiles, drawn from the file alone: refused apart, failures without them.
	m, err := report.BuildModel([]report.Source{{Name: jsonPath, Data: b}}, report.HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := m.Runs[0].Headline; h.Refused != refused || h.RefusedBy[linkkeysresult.RefusedHandshakeSource] != refused ||
		h.Succeeded != a.Succeeded || h.Failures != a.Failed-refused || h.Operations != a.Attempted {
		t.Fatalf("page headline %+v; client %+v, refused %d", h, a, refused)
	}

	// Paced, with enough sources that each gets at most half its burst: nothing is refused. One
	// loop, so attempt n uses source n mod count exactly (with several loops the seed's choice,
	// attempt number plus loop index, can crowd some sources and leave others unused).
	rs2 := startReal(t, srv)
	const rate = 200
	perSource := limits.Burst / 2
	enough := linkkeysload.SourceAddrs{Base: ip(t, "127.0.29.0"), Count: uint32(math.Ceil(rate * float64(cfg.DurationSecs) / perSource))}
	paced := linkkeysload.HandshakeConfig{Target: rs2.target, DurationSecs: cfg.DurationSecs, Concurrency: 1, AttemptTimeout: 10 * time.Second,
		Sources: enough, Rate: rate}
	out.Reset()
	res, err = linkkeysload.HandshakeBench(context.Background(), paced, linkkeysload.Run{Stdout: &out,
		Metrics: &linkkeysload.MetricsSource{Location: rs2.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Server; s == nil || s.Mismatch() || s.Delta.Shed() != 0 || res.Refused != nil || res.Attempts.Failed != 0 || res.Attempts.Succeeded == 0 {
		t.Fatalf("enough sources: refused %v, attempts %+v, server %+v\n%s", res.Refused, res.Attempts, s, out.String())
	}
	if strings.Contains(out.String(), "refused by design") {
		t.Fatalf("a run with nothing refused says it was:\n%s", out.String())
	}
}

// TestRequestBenchRefusalsMatchServerAccounting: with the default public-read limits and two
// sources, most requests are answered Unavailable; with the server's accounting read, those are
// refused by design and the server's own count of rate-limited answers agrees with the client's.
// With the limits raised, none are.
func TestRequestBenchRefusalsMatchServerAccounting(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		refused bool
	}{{"default limits", nil, true}, {"limits raised", unlimitedReads, false}} {
		t.Run(c.name, func(t *testing.T) {
			rs := startReal(t, config(t, c.env))
			cfg := linkkeysload.RequestConfig{Target: rs.target, Connections: 2, DurationSecs: 1, Op: linkkeysload.OpDomainKeys,
				Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.30.0"), Count: 2}, AttemptTimeout: 10 * time.Second, Pipeline: 4}
			var out bytes.Buffer
			res, err := linkkeysload.RequestBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Stderr: io.Discard,
				Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			s, q := res.Server, res.Requests
			if s == nil || s.Mismatch() || len(s.Checks) == 0 {
				t.Fatalf("server accounting %+v\n%s", s, out.String())
			}
			check := s.Checks[len(s.Checks)-1]
			unavailable := q.Statuses[linkkeys.StatusUnavailable.String()]
			if check.Name != "refused answers = server rate_limited_responses" || check.Client != unavailable || check.Server != unavailable {
				t.Fatalf("rate-limited check %+v, client saw %d Unavailable\n%s", check, unavailable, out.String())
			}
			if got := res.Refused[linkkeysresult.RefusedPublicRead]; got != unavailable || (unavailable > 0) != c.refused || q.Completed == 0 {
				t.Fatalf("refused %v, %d answered Unavailable, %d served\n%s", res.Refused, unavailable, q.Completed, out.String())
			}
			if c.refused != strings.Contains(out.String(), fmt.Sprintf("refused by design: %d (public_read_limiter=%d)", unavailable, unavailable)) {
				t.Fatalf("summary:\n%s", out.String())
			}
		})
	}
}
