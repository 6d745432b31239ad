package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// synthResults is a Keycast results file of n one-second intervals shaped like a real run: about
// rate requests a second with a latency histogram each, a few failure classes and causes, a driver
// counter and /api/metrics samples (gauges and counters).
func synthResults(n int, rate int) *keycastresult.Results {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env := &result.Envelope{Format: result.Format, Harness: "keycast", Command: "run", Target: "http://127.0.0.1:1",
		Flags: map[string]string{"concurrency": "16"}, Machines: []machine.Record{{OS: "linux", Arch: "amd64", Cores: 2, GOMAXPROCS: 2, GoVersion: "go1.26"}},
		StartedAt: start, EndedAt: start.Add(time.Duration(n) * time.Second), IntervalSecs: 1,
		Classes:    []string{"success", "auth", "server", "client", "network", "rate_limited", "intentional", "other"},
		Histograms: map[string]*hist.Histogram{"latency": hist.New()}, Totals: map[string]int64{}, Causes: map[string]int64{}}
	var c keycastresult.Counts
	var served float64
	for i := range n {
		iv := result.Interval{T: float64(i), Secs: 1, Counts: map[string]int64{}, Causes: map[string]int64{},
			Counters: map[string]int64{"cache_hit_estimate": 0}, Latency: map[string]*hist.Histogram{"latency": hist.New()}}
		ops := rate/2 + r.IntN(rate)
		for range ops {
			us := int64(200 + r.ExpFloat64()*800)
			if r.IntN(1000) == 0 {
				us *= 50
			}
			iv.Latency["latency"].RecordMicros(us)
			switch k := r.IntN(100); {
			case k < 95:
				iv.Counts["success"]++
				iv.Counters["cache_hit_estimate"]++
			case k < 97:
				iv.Counts["intentional"]++
				iv.Causes["http_503_admission_rejected"]++
			case k < 99:
				iv.Counts["rate_limited"]++
				iv.Causes["http_429_rate_limited"]++
			default:
				iv.Counts["network"]++
				iv.Causes["network_econnreset"]++
			}
		}
		served += float64(ops)
		iv.Server = map[string]float64{"process_resident_memory_bytes": float64(50<<20 + r.IntN(1<<20)),
			"keycast_http_rpc_requests_total": served, "keycast_expensive_resource_rejections_total": served / 50,
			"keycast_expensive_resource_active": float64(r.IntN(4))}
		env.Histograms["latency"].Merge(iv.Latency["latency"])
		for k, v := range iv.Counts {
			env.Totals[k] += v
		}
		for k, v := range iv.Causes {
			env.Causes[k] += v
		}
		env.Intervals = append(env.Intervals, iv)
	}
	c.Success = uint64(env.Totals["success"])
	c.Intentional = uint64(env.Totals["intentional"])
	c.RateLimited = uint64(env.Totals["rate_limited"])
	c.Network = uint64(env.Totals["network"])
	c.Total = uint64(env.Total())
	c.Failed = c.Total - c.Success
	return &keycastresult.Results{
		Metadata: keycastresult.Metadata{URL: env.Target, Scenario: "WarmCache", Method: "GetPublicKey", Concurrency: 16, DurationSecs: uint64(n)},
		Summary:  keycastresult.Summarize(c, env.Histograms["latency"], env.Elapsed()),
		Envelope: env,
	}
}

// synthHour is a one-hour run (3,600 intervals) whose server exposes as many series as the
// reference Keycast server's /api/metrics does: 30 moving gauges and 10 counters beside the four of
// synthResults, so the page's size is measured with a full set of server charts.
func synthHour() *keycastresult.Results {
	r := synthResults(3600, 200)
	for i := range r.Intervals {
		iv := &r.Intervals[i]
		for k := range 30 {
			iv.Server[fmt.Sprintf("keycast_gauge_%02d", k)] = float64((i*(k+3))%97) * 1.5
		}
		for k := range 10 {
			iv.Server[fmt.Sprintf("keycast_counter_%02d_total", k)] = float64(i * (k + 1) * 37)
		}
	}
	return r
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pageData extracts the embedded model from a page.
func pageData(t *testing.T, page []byte) *Model {
	t.Helper()
	s := string(page)
	const open = `<script id="lp-data" type="application/json">`
	i := strings.Index(s, open)
	j := strings.Index(s[i:], "</script>")
	if i < 0 || j < 0 {
		t.Fatal("page has no data element")
	}
	var m Model
	if err := json.Unmarshal([]byte(s[i+len(open):i+j]), &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestHTMLSelfContained(t *testing.T) {
	page, err := HTML([]Source{{Name: "run.json", Data: encode(t, synthResults(30, 200))}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, bad := range []string{"http://", "https://", "<script src", "<link", "@import", "hdr\":", "HISTF"} {
		// The only URLs allowed are the run's own target in the data and uPlot's banner comment.
		if n := strings.Count(s, bad); bad != "http://" && bad != "https://" && n > 0 {
			t.Errorf("page contains %q %d times", bad, n)
		}
	}
	if strings.Contains(s, "<script src") || strings.Contains(s, "<link ") {
		t.Error("page loads something from outside")
	}
	for _, want := range []string{"uPlot (v" + UPlotVersion + ")", "Content-Security-Policy", `id="lp-app"`} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	m := pageData(t, page)
	rv := m.Runs[0]
	if m.Mode != "single" || len(rv.T) != 30 || len(rv.Throughput) != 30 {
		t.Fatalf("mode %s, %d times, %d throughput points", m.Mode, len(rv.T), len(rv.Throughput))
	}
	if len(rv.Latency) != 1 || len(rv.Latency[0].P999) != 30 || rv.Latency[0].P50[0] <= 0 || rv.Latency[0].Max[0] < rv.Latency[0].P99[0] {
		t.Fatalf("latency series %+v", rv.Latency)
	}
	var groups []string
	for _, g := range rv.Server {
		groups = append(groups, g.Group+"/"+g.Unit)
		for _, s := range g.Series {
			if len(s.Values) != 30 {
				t.Errorf("server series %s has %d points", s.Name, len(s.Values))
			}
		}
	}
	if strings.Join(groups, ",") != "memory/bytes,shedding/per second,other/per second,other/value" {
		t.Errorf("server groups %v", groups)
	}
	if rv.Classes[0].Name != "success" || len(rv.CauseSeries) != 3 || len(rv.Dist) != 1 || len(rv.Dist[0].Ms) < 20 {
		t.Errorf("classes %v, %d causes, distribution %+v", rv.Classes[0].Name, len(rv.CauseSeries), rv.Dist)
	}
	if rv.Headline.Operations == 0 || rv.Headline.P99Ms == 0 {
		t.Errorf("headline %+v", rv.Headline)
	}
}

// TestHTMLOneHourSize: a one-hour run's page stays under 3 MB (the time it takes is measured by
// BenchmarkHTMLOneHour, not asserted).
func TestHTMLOneHourSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 3,600-interval file")
	}
	page, err := HTML([]Source{{Name: "hour.json", Data: encode(t, synthHour())}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) >= 3<<20 {
		t.Errorf("one-hour page is %d bytes, want under 3 MiB", len(page))
	}
	t.Logf("one-hour page: %d bytes", len(page))
}

func BenchmarkHTMLOneHour(b *testing.B) {
	data := encode(b, synthHour())
	b.ResetTimer()
	var n int
	for b.Loop() {
		page, err := HTML([]Source{{Name: "hour.json", Data: data}}, HTMLOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n = len(page)
	}
	b.ReportMetric(float64(n), "page-bytes")
	b.ReportMetric(float64(len(data)), "file-bytes")
}

// segmentOf makes r segment i of n of one test run.
func segmentOf(r *keycastresult.Results, i, n int) *keycastresult.Results {
	r.Envelope.RunID = "0123456789abcdef0123456789abcdef"
	r.Envelope.Segments = []result.Segment{{Index: i, Count: n}}
	return r
}

func TestHTMLMergeAndCompare(t *testing.T) {
	a, b := encode(t, segmentOf(synthResults(20, 100), 0, 2)), encode(t, segmentOf(synthResults(25, 100), 1, 2))
	page, err := HTML([]Source{{"a.json", a}, {"b.json", b}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := pageData(t, page)
	if m.Mode != "merged" || len(m.Runs) != 1 || len(m.Runs[0].T) != 25 {
		t.Fatalf("merged: mode %s, %d runs, %d points", m.Mode, len(m.Runs), len(m.Runs[0].T))
	}
	page, err = HTML([]Source{{"a.json", a}, {"b.json", b}}, HTMLOptions{Compare: true})
	if err != nil {
		t.Fatal(err)
	}
	m = pageData(t, page)
	if m.Mode != "compare" || len(m.Runs) != 2 || len(m.Compare) == 0 || m.Compare[0].Figure != "Operations" {
		t.Fatalf("compare: mode %s, %d runs, %+v", m.Mode, len(m.Runs), m.Compare)
	}
	if _, err := HTML([]Source{{"a.json", a}}, HTMLOptions{Compare: true}); err == nil {
		t.Error("--compare of one file succeeded")
	}
	// The same file twice, or two whole runs, do not merge (--compare sets runs side by side).
	whole := encode(t, synthResults(20, 100))
	for _, srcs := range [][]Source{{{"a.json", a}, {"a.json", a}}, {{"x.json", whole}, {"y.json", whole}}} {
		if _, err := HTML(srcs, HTMLOptions{}); err == nil || !strings.Contains(err.Error(), "merges once") {
			t.Errorf("%s + %s merged: %v", srcs[0].Name, srcs[1].Name, err)
		}
	}
}

func TestHTMLRejectsFilesWithoutIntervals(t *testing.T) {
	up, err := os.ReadFile(filepath.Join("testdata", "upstream-dec2025.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"upstream": up, "users": []byte(`{"users":[]}`), "list": []byte(`[1]`)} {
		if _, err := HTML([]Source{{name, data}}, HTMLOptions{}); err == nil {
			t.Errorf("%s: drew a page", name)
		}
	}
}

func TestHTMLCapacityBands(t *testing.T) {
	p1, p2 := synthResults(10, 50), synthResults(8, 50)
	p2.StartedAt = p1.EndedAt.Add(2 * time.Second)
	p2.EndedAt = p2.StartedAt.Add(8 * time.Second)
	stopped := "spike"
	ev := map[string]any{
		"schema_version": 1, "evidence_scope": "synthetic", "generated_at": "2026-01-02T03:04:05Z",
		"plan": map[string]any{"profile_name": "demo", "target_url": "http://127.0.0.1:1"}, "passed": false,
		"certification_ready": false, "stopped_after_phase": stopped, "stop_reason": "stop-condition",
		"certification_blockers": []string{"phase \"spike\" breached stop condition"},
		"phases": []map[string]any{
			{"name": "baseline", "kind": "baseline", "passed": true, "checks": []map[string]any{{"metric": "total_requests", "comparison": "at-least", "observed": 100, "limit": 1, "outcome": "passed"}}, "stop_breached": false, "stop_checks": []any{}, "results": p1, "error": nil},
			{"name": "spike", "kind": "spike", "passed": false, "checks": []map[string]any{{"metric": "latency_p95_ms", "comparison": "at-most", "observed": nil, "limit": 5, "outcome": "failed"}}, "stop_breached": true, "stop_checks": []any{}, "results": p2, "error": nil},
		},
	}
	page, err := HTML([]Source{{"evidence.json", encode(t, ev)}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := pageData(t, page)
	cv := m.Capacity
	if m.Mode != "capacity" || cv == nil || len(cv.Phases) != 2 {
		t.Fatalf("mode %s, capacity %+v", m.Mode, cv)
	}
	if cv.Phases[0].Start != 0 || cv.Phases[0].End != 10 || cv.Phases[1].Start != 12 || cv.Phases[1].End != 20 || cv.StopAt != 20 {
		t.Errorf("bands %v-%v, %v-%v, stop at %v", cv.Phases[0].Start, cv.Phases[0].End, cv.Phases[1].Start, cv.Phases[1].End, cv.StopAt)
	}
	// 10 + 8 intervals and a gap where the spike starts, so no line crosses the pause.
	if rv := m.Runs[0]; len(rv.T) != 19 || rv.T[10] != 12 || !math.IsNaN(rv.Throughput[10]) || rv.T[11] != 13 {
		t.Errorf("%d points, the gap at %v (%v), the spike's first at %v", len(rv.T), rv.T[10], rv.Throughput[10], rv.T[11])
	}
	if !bytes.Contains(page, []byte(`"observed":null`)) {
		t.Error("a null observation is not kept as null")
	}
}

func TestHGRMFromFiles(t *testing.T) {
	a, b := synthResults(5, 100), synthResults(6, 100)
	out, err := HGRM([]Source{{"a.json", encode(t, a)}, {"b.json", encode(t, b)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := a.Latency().Count() + b.Latency().Count()
	if !strings.HasPrefix(string(out), "       Value     Percentile TotalCount 1/(1-Percentile)\n\n") ||
		!strings.Contains(string(out), fmt.Sprintf("Total count    = %12d]", want)) {
		t.Errorf("hgrm of two segments:\n%s", out)
	}
	if _, err := HGRM([]Source{{"a.json", encode(t, a)}}, "handshake"); err == nil || !strings.Contains(err.Error(), "they hold latency") {
		t.Errorf("missing kind: %v", err)
	}
}

// TestAssetsCannotCloseTheirElement: an inlined script or style that held "</script" or "</style"
// would end its element early and spill the rest into the page as text.
func TestAssetsCannotCloseTheirElement(t *testing.T) {
	for name, s := range map[string]string{"uPlot.iife.min.js": uplotJS, "report.js": reportJS, "uPlot.min.css": uplotCSS, "report.css": reportCSS} {
		l := strings.ToLower(s)
		if strings.Contains(l, "</script") || strings.Contains(l, "</style") {
			t.Errorf("%s contains a closing </script or </style", name)
		}
	}
}

func TestShortTailIsFolded(t *testing.T) {
	r := synthResults(5, 100)
	last := &r.Intervals[4]
	last.Secs = 0.05
	page, err := HTML([]Source{{"a.json", encode(t, r)}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := pageData(t, page).Runs[0]
	if len(rv.T) != 4 || math.Abs(rv.T[3]-4.05) > 1e-9 {
		t.Errorf("times %v: the 0.05 s tail should fold into the interval before", rv.T)
	}
}

// TestLiveFeedRowsMatchTheReport: the rows the dashboard sends are the ones the static report folds
// into its series.
func TestLiveFeedRowsMatchTheReport(t *testing.T) {
	r := synthResults(6, 50)
	f := NewLiveFeed("keycast", "run", r.Target)
	page, err := f.Page("live", "/events")
	if err != nil {
		t.Fatal(err)
	}
	if m := pageData(t, page); m.Mode != "live" || m.Live == nil || m.Live.Events != "/events" || len(m.Runs) != 1 {
		t.Fatalf("live page model %+v", m)
	}
	static := pageData(t, must(HTML([]Source{{"r.json", encode(t, r)}}, HTMLOptions{}))).Runs[0]
	for i := range r.Intervals {
		b, err := f.Event(&r.Intervals[i])
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Row struct {
				T   float64 `json:"t"`
				Thr float64 `json:"thr"`
			} `json:"row"`
			Headline struct {
				Operations int64 `json:"operations"`
			} `json:"headline"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Row.T != static.T[i] || ev.Row.Thr != static.Throughput[i] {
			t.Errorf("row %d: live t %v thr %v, static t %v thr %v", i, ev.Row.T, ev.Row.Thr, static.T[i], static.Throughput[i])
		}
		if i == len(r.Intervals)-1 && ev.Headline.Operations != r.Total() {
			t.Errorf("live headline counts %d operations, the run %d", ev.Headline.Operations, r.Total())
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestCombinedKeepsEachPageWhole(t *testing.T) {
	a := must(HTML([]Source{{"a.json", encode(t, synthResults(3, 10))}}, HTMLOptions{Title: "run <a>"}))
	page, err := Combined("demo", []Part{{"Run", a}, {"Again", a}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if strings.Count(s, "<iframe ") != 2 || !strings.Contains(s, html.EscapeString(string(a))) || strings.Contains(s, "<script src") {
		t.Error("the combined page does not carry both pages whole, escaped, and nothing from outside")
	}
	if _, err := Combined("x", nil); err == nil {
		t.Error("an empty combination succeeded")
	}
}

// TestLinkKeysAttemptRunsDrawConnections: a LinkKeys attempt run (its envelope as linkkeysresult
// writes it: the attempt stages as classes, reasons as causes) gets running totals of attempted,
// established and failed connections.
func TestLinkKeysAttemptRunsDrawConnections(t *testing.T) {
	env := &result.Envelope{Format: result.Format, Harness: "linkkeys", Command: "connections", Target: "127.0.0.1:1", IntervalSecs: 1,
		Classes: []string{"success", "tcp_connect_error", "tls_handshake_error_or_server_reject", "attempt_timeout"},
		Totals:  map[string]int64{"success": 15, "tcp_connect_error": 3}, Causes: map[string]int64{"tcp:ECONNREFUSED": 3},
		Histograms: map[string]*hist.Histogram{"connect_handshake": hist.New()}}
	env.Histograms["connect_handshake"].RecordMicros(900)
	for i := range 3 {
		env.Intervals = append(env.Intervals, result.Interval{T: float64(i), Secs: 1,
			Counts: map[string]int64{"success": 5, "tcp_connect_error": 1}, Causes: map[string]int64{"tcp:ECONNREFUSED": 1},
			Server: map[string]float64{"open_connections": float64(5 * (i + 1)), "frame_buffer_bytes": 4096, "shed_total": float64(i)}})
	}
	b, _ := json.Marshal(struct {
		*result.Envelope
		TargetInfo map[string]string `json:"target_info"`
	}{env, map[string]string{"addr": "127.0.0.1:1"}})
	rv := pageData(t, must(HTML([]Source{{"lk.json", b}}, HTMLOptions{}))).Runs[0]
	got := map[string][]float64{}
	for _, s := range rv.Connections {
		got[s.Name] = s.Values
	}
	if fmt.Sprint(got["attempted"]) != "[6 12 18]" || fmt.Sprint(got["established"]) != "[5 10 15]" || fmt.Sprint(got["failed"]) != "[1 2 3]" {
		t.Errorf("connections %v", got)
	}
	var groups []string
	for _, g := range rv.Server {
		groups = append(groups, g.Group)
	}
	if fmt.Sprint(groups) != "[connections buffers shedding]" {
		t.Errorf("server groups %v", groups)
	}
	if rv.Headline.Kind != "connect_handshake" || rv.Headline.Failures != 3 {
		t.Errorf("headline %+v", rv.Headline)
	}
}

func TestServerGroupsByWord(t *testing.T) {
	for name, want := range map[string]string{
		"established":                                 "connections/count",
		"established_connections":                     "connections/count",
		"open_connections":                            "connections/count",
		"shed_connection_limit":                       "shedding/count",
		"handshake_rejections":                        "shedding/count",
		"rate_limited_responses":                      "shedding/count",
		"frame_buffer_bytes":                          "buffers/bytes",
		"process_rss_bytes":                           "memory/bytes",
		"snapshot_cache_bytes":                        "memory/bytes",
		"frames_processed":                            "other/value",
		"keycast_http_rpc_requests_total":             "other/per second",
		"keycast_expensive_resource_rejections_total": "shedding/per second",
	} {
		if g, u := serverGroup(name); g+"/"+u != want {
			t.Errorf("%s: %s/%s, want %s", name, g, u, want)
		}
	}
}
