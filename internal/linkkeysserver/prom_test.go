package linkkeysserver

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

func TestPrometheusEndpoint(t *testing.T) {
	s := sampleSnapshot()
	s.HandshakeLimiter.RejectedGlobal = 21
	s.PublicReadLimiter.Accepted = 22
	s.SnapshotCache.Hits = 23
	calls := 0
	srv := httptest.NewServer(NewPrometheusExporter(func() Snapshot { calls++; return s }, true))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"linkkeys_server_accepted_connections_total 1\n",
		"linkkeys_server_open_connections 2\n",
		"linkkeys_server_established_connections 3\n",
		"linkkeys_server_handshakes_in_progress 4\n",
		"linkkeys_server_handshake_timeouts_total 5\n",
		"linkkeys_server_handshake_rejections_total 6\n",
		`linkkeys_server_shed_connections_total{reason="connection_limit"} 7` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_per_source"} 8` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_overflow"} 9` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_global"} 10` + "\n",
		"linkkeys_server_frames_processed_total 11\n",
		"linkkeys_server_frame_buffer_bytes 12\n",
		"linkkeys_server_process_rss_bytes 13\n",
		"linkkeys_server_established_total 14\n",
		"linkkeys_server_parked_connections 15\n",
		"linkkeys_server_rate_limited_responses_total 16\n",
		`linkkeys_server_closed_connections_total{reason="peer"} 17` + "\n",
		`linkkeys_server_closed_connections_total{reason="oversized_frame"} 18` + "\n",
		`linkkeys_server_closed_connections_total{reason="malformed_request"} 19` + "\n",
		`linkkeys_server_closed_connections_total{reason="idle_timeout"} 20` + "\n",
		`linkkeys_server_closed_connections_total{reason="io_timeout"} 21` + "\n",
		`linkkeys_server_closed_connections_total{reason="slow_frame_body"} 22` + "\n",
		`linkkeys_server_closed_connections_total{reason="frame_budget"} 23` + "\n",
		`linkkeys_server_closed_connections_total{reason="oversized_response"} 24` + "\n",
		`linkkeys_server_closed_connections_total{reason="shutdown"} 25` + "\n",
		"# TYPE linkkeys_server_closed_connections_total counter\n",
		"# TYPE linkkeys_server_frame_buffer_bytes gauge\n",
		`linkkeys_server_limiter_checks_total{limiter="handshake",result="global"} 21` + "\n",
		`linkkeys_server_limiter_checks_total{limiter="public_read",result="allow"} 22` + "\n",
		"linkkeys_server_snapshot_cache_hits_total 23\n",
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", strings.TrimSpace(want))
		}
	}
	if calls != 1 {
		t.Errorf("one scrape took %d snapshots, want 1", calls)
	}
	if ct := resp.Header.Get("Content-Type"); ct != PrometheusContentType {
		t.Errorf("Content-Type %q", ct)
	}
	// Without process metrics (the --processes parent), no Go or process
	// metrics of the parent itself.
	for name := range parseExposition(t, NewPrometheusExporter(func() Snapshot { return s }, false)) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("parent exposition has %s", name)
		}
	}
}

// TestPrometheusScrapesReadAfresh: a scrape right after another must show what changed between
// them (a client brackets a run of a few milliseconds with two scrapes).
func TestPrometheusScrapesReadAfresh(t *testing.T) {
	var mu sync.Mutex
	s := sampleSnapshot()
	srv := httptest.NewServer(NewPrometheusExporter(func() Snapshot { mu.Lock(); defer mu.Unlock(); return s }, false))
	defer srv.Close()
	scrape := func() string {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if !strings.Contains(scrape(), "linkkeys_server_accepted_connections_total 1\n") {
		t.Fatal("first scrape")
	}
	mu.Lock()
	s.AcceptedConnections = 99
	mu.Unlock()
	if text := scrape(); !strings.Contains(text, "linkkeys_server_accepted_connections_total 99\n") {
		t.Fatalf("second scrape does not show the change:\n%s", text)
	}
}

// parseExposition scrapes e once and parses the text with prometheus/common/expfmt.
func parseExposition(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	return fams
}

// comparableFamilies renders families as sorted lines "name type help {labels} value", so two
// expositions compare independently of order.
func comparableFamilies(fams map[string]*dto.MetricFamily, keep func(string) bool) []string {
	var out []string
	for name, f := range fams {
		if !keep(name) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(labels)
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			default:
				v = m.GetUntyped().GetValue()
			}
			out = append(out, fmt.Sprintf("%s %s %q {%s} %v", name, f.GetType(), f.GetHelp(), strings.Join(labels, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func ours(name string) bool { return strings.HasPrefix(name, PrometheusNamespace+"_") }

// checkSameAsClientGolang compares the exporter's families with client_golang's for one snapshot,
// and that the exporter's text is byte for byte what client_golang writes for them.
func checkSameAsClientGolang(t testing.TB, s Snapshot) {
	t.Helper()
	src := func() Snapshot { return s }
	got := comparableFamilies(parseExposition(t, NewPrometheusExporter(src, false)), ours)
	want := comparableFamilies(parseExposition(t, referenceHandler(referenceRegistry(src, false))), ours)
	if !slices.Equal(got, want) {
		t.Fatalf("exposition differs from client_golang's:\n got %d series: %q\nwant %d series: %q", len(got), got, len(want), want)
	}
	var b bytes.Buffer
	if err := NewPrometheusExporter(src, false).Write(&b); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	referenceHandler(referenceRegistry(src, false)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	// promhttp adds its own promhttp_* family; the rest must be the same text.
	var wantText strings.Builder
	for _, line := range strings.SplitAfter(rec.Body.String(), "\n") {
		if !strings.Contains(line, "promhttp_") {
			wantText.WriteString(line)
		}
	}
	if b.String() != wantText.String() {
		t.Fatalf("text differs from client_golang's:\n got:\n%s\nwant:\n%s", b.String(), wantText.String())
	}
}

// TestPrometheusMatchesClientGolang: the hand-written exposition says what client_golang's did,
// for a snapshot with every field distinct, large values, and source prefixes.
func TestPrometheusMatchesClientGolang(t *testing.T) {
	s := sampleSnapshot()
	s.HandshakeLimiter = admit.LimiterStats{Accepted: 1, RejectedPerSource: 2, RejectedOverflow: 3, RejectedGlobal: 1 << 53, ProtectionModeEntries: 5, TrackedSources: 6, BucketEntries: 7, MaxBucketEntries: 8}
	s.PublicReadLimiter = admit.LimiterStats{Accepted: 12_000_000, RejectedGlobal: math.MaxUint64}
	s.SnapshotCache.Hits, s.SnapshotCache.Bytes = 123456789, 1
	s.Sources = []linkkeys.SourceCounters{{Name: "held", Accepted: 5, Admitted: 4, ShedHandshakePerSource: 1, Established: 4, ClosedByPeer: 2},
		{Name: "ddos-1", Accepted: 7, ShedHandshakeOverflow: 7}, {Name: "Bad Name"}}
	checkSameAsClientGolang(t, s)
	s.Sources = nil
	checkSameAsClientGolang(t, s)
	checkSameAsClientGolang(t, Snapshot{})

	// With process metrics, the Go and process series a dashboard or bench/soak.sh reads are there.
	fams := parseExposition(t, NewPrometheusExporter(func() Snapshot { return s }, true))
	for _, name := range []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "process_max_fds",
		"process_start_time_seconds", "go_goroutines", "go_threads", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds"} {
		if fams[name] == nil {
			t.Errorf("no %s with process metrics", name)
		}
	}
	if f := fams["process_resident_memory_bytes"]; f != nil && f.GetMetric()[0].GetGauge().GetValue() <= 0 {
		t.Errorf("process_resident_memory_bytes %v", f.GetMetric()[0])
	}
}

// FuzzPrometheusExposition: for any counter values and source prefix names, the hand-written
// exposition parses to exactly client_golang's families and is the same text.
func FuzzPrometheusExposition(f *testing.F) {
	f.Add(uint64(0), uint64(1), uint64(1<<53+1), "held", "ddos-1")
	f.Add(uint64(math.MaxUint64), uint64(12_000_000), uint64(999), "a", "b\"\\\n")
	f.Fuzz(func(t *testing.T, a, b, c uint64, p1, p2 string) {
		s := Snapshot{}
		for i, fld := range linkkeys.MetricsFields() {
			s.SetCounter(fld.Name, []uint64{a, b, c}[i%3]+uint64(i))
		}
		s.HandshakeLimiter = admit.LimiterStats{Accepted: a, RejectedGlobal: b, TrackedSources: int(c % 1e6)}
		s.SnapshotCache.Misses = c
		s.Sources = []linkkeys.SourceCounters{{Name: p1, Accepted: a, ClosedShutdown: b}, {Name: p2, RateLimitedResponses: c}}
		if p1 == p2 {
			s.Sources = s.Sources[:1]
		}
		checkSameAsClientGolang(t, s)
	})
}

// BenchmarkPrometheusScrape: one scrape of the server's own series (no process metrics), the
// hand-written exposition against client_golang's (the A/B of docs/benchmarks.md).
func BenchmarkPrometheusScrape(b *testing.B) {
	s := sampleSnapshot()
	s.Sources = []linkkeys.SourceCounters{{Name: "held", Accepted: 5}, {Name: "ddos-1", Accepted: 7}}
	src := func() Snapshot { return s }
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"hand-written", NewPrometheusExporter(src, false)}, {"client_golang", referenceHandler(referenceRegistry(src, false))}} {
		b.Run(h.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/metrics", nil)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.h.ServeHTTP(rec, req)
			}
		})
	}
}
