package report

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func read(t *testing.T, name string) *keycastresult.Results {
	t.Helper()
	r, err := keycastresult.Read(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ours builds a loadproof results file with every addition, from fixed samples, so its report is
// deterministic.
func ours() *keycastresult.Results {
	h, u := hist.New(), hist.New()
	var c keycastresult.Counts
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * 37 * time.Microsecond)
		u.Record(time.Duration(i) * 29 * time.Microsecond)
		c.Total++
		switch {
		case i%100 == 0:
			c.Failed++
			c.Intentional++
		case i%250 == 1:
			c.Failed++
			c.RateLimited++
		case i == 502:
			c.Failed++
			c.Other++
		default:
			c.Success++
			if i*37 < 15000 {
				c.CacheHitEstimate++
			}
		}
	}
	m := machine.Record{OS: "linux", Arch: "amd64", Kernel: "6.1.0", CPUModel: "Test CPU", Cores: 2, GOMAXPROCS: 2,
		GoVersion: "go1.26.8", LoadproofVersion: "devel", Target: "http://127.0.0.1:3000",
		CollectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	before := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 10, HTTPRPCCacheHits: 5, HTTPRPCCacheMisses: 5, HTTPRPCCacheSize: 5, HTTPRPCSuccess: 10}
	after := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 1010, HTTPRPCCacheHits: 1000, HTTPRPCCacheMisses: 10, HTTPRPCCacheSize: 10, HTTPRPCSuccess: 995}
	d := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 1000, HTTPRPCCacheHits: 995, HTTPRPCCacheMisses: 5, HTTPRPCCacheSize: 10, HTTPRPCSuccess: 985}
	r := &keycastresult.Results{
		Metadata: keycastresult.Metadata{URL: "http://127.0.0.1:3000", Scenario: "Mixed", Method: "SignEvent", Concurrency: 8,
			DurationSecs: 10, UserCount: 50, Timestamp: "2026-01-02T03:04:05.000000000Z", Seed: 7, TargetRate: 100, RampUpSecs: 2},
		Summary: keycastresult.Summarize(c, h, 10*time.Second+250*time.Millisecond),
		Timeline: []keycastresult.TimelinePoint{
			{ElapsedSecs: 0, RequestsTotal: 0},
			{ElapsedSecs: 5, RequestsTotal: 480, RequestsSuccess: 475, RequestsError: 5, LatencyP50Ms: 9.1, LatencyP99Ms: 17.8},
		},
		ServerMetrics: &keycastresult.ServerMetricsSnapshots{Scope: keycastresult.ServerMetricsScope, Before: before, After: after, Deltas: &d},
		Envelope:      keycastresult.NewEnvelope("http://x", h, u, map[string]int64{"http_503_admission_rejected": 10, "http_429": 4, "rpc_error": 1}),
		OpenModel: &keycastresult.OpenModel{TargetRate: 100, RampFrom: 10, RampSecs: 2, Scheduled: 1003, LateSends: 12,
			LateThresholdMs: 1, Dropped: 3, UncorrectedP50Ms: 14.5, UncorrectedP95Ms: 27.6, UncorrectedP99Ms: 28.7, UncorrectedP999Ms: 29.0, UncorrectedMaxMs: 29.0},
		Stop: &keycastresult.StopEvent{Reason: "stop-condition", Metric: "latency_p95_ms", Observed: 35.2, Limit: 30, WindowSecs: 5, ElapsedSecs: 10.25, At: "2026-01-02T03:04:15.250000000Z"},
	}
	r.Machines = []machine.Record{m}
	return r
}

// TestUpstreamFilesReportExactlyAsUpstream reads results files in upstream's Dec-2025 and a8d40c9
// shapes and checks the documented text and CSV layouts (docs/protocol-keycast.md, report). The
// files were written by hand to the documented schema; no file produced by the upstream tool was
// available.
func TestUpstreamFilesReportExactlyAsUpstream(t *testing.T) {
	for _, name := range []string{"upstream-a8d40c9", "upstream-dec2025"} {
		t.Run(name, func(t *testing.T) {
			r := read(t, name+".json")
			golden(t, name+".text.golden", Text(r)+"\n")
			golden(t, name+".csv.golden", CSV(r))
			if name == "upstream-dec2025" && HasAdditions(r) {
				t.Fatal("a Dec-2025 upstream file has no loadproof additions")
			}
		})
	}
}

func TestUpstreamLayoutIsAPrefixOfOurs(t *testing.T) {
	r := ours()
	full := Text(r)
	extra := Additions(r)
	if extra == "" || !strings.HasSuffix(full, "\n\n"+extra) {
		t.Fatal("the additions block must follow the upstream layout after one blank line")
	}
	upstream := strings.TrimSuffix(full, "\n\n"+extra)
	if !strings.HasPrefix(upstream, "Keycast Load Test Results\n") || !strings.HasSuffix(upstream, "  Network: 0") {
		t.Fatalf("upstream part:\n%s", upstream)
	}
	golden(t, "ours.text.golden", full+"\n")
	golden(t, "ours.csv.golden", CSV(r))
}

func TestResultsJSONGolden(t *testing.T) {
	b, err := JSON(ours())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ours.json.golden", string(b)+"\n")
	// The file reads back to the same report.
	back, err := keycastresult.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if Text(back) != Text(ours()) {
		t.Fatal("results JSON does not round-trip to the same report")
	}
}

func TestUpstreamJSONFillsDefaults(t *testing.T) {
	b, err := JSON(read(t, "upstream-dec2025.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"seed": 0`, `"unintentional_error_rate": 0`, `"intentional_rejection_rate": 0`, `"server_metrics": null`, `"rate_limited_requests": 0`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("json lacks %s:\n%s", want, b)
		}
	}
}

func TestCompareGolden(t *testing.T) {
	cur := read(t, "upstream-a8d40c9.json")
	base := read(t, "upstream-dec2025.json")
	golden(t, "compare.golden", Compare(cur, base)+"\n")
	// A zero baseline gives Rust's inf and NaN.
	zero := &keycastresult.Results{}
	got := Compare(cur, zero)
	if !strings.Contains(got, "+inf%") {
		t.Fatalf("zero baseline:\n%s", got)
	}
	got = Compare(zero, zero)
	if !strings.Contains(got, "NaN%") {
		t.Fatalf("zero over zero:\n%s", got)
	}
}

func TestRustFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		plus bool
		want string
	}{
		{0, false, "0.0"},
		{1.25, false, "1.2"},   // exact tie: half to even
		{1.35, false, "1.4"},   // 1.350000000000000088…
		{6.35, false, "6.3"},   // 6.349999999999999644…
		{-0.04, false, "-0.0"}, // as Rust
		{12.5, true, "+12.5"},
		{-3, true, "-3.0"},
		{math.Inf(1), true, "+inf"},
		{math.Inf(1), false, "inf"},
		{math.Inf(-1), true, "-inf"},
		{math.NaN(), true, "NaN"},
	} {
		if got := rustFloat(tc.v, 1, tc.plus); got != tc.want {
			t.Errorf("rustFloat(%v, plus=%v) = %q, want %q", tc.v, tc.plus, got, tc.want)
		}
	}
}

func TestRenderRejectsUnknownFormat(t *testing.T) {
	if _, err := Render(ours(), "xml"); err == nil || !strings.Contains(err.Error(), "text, json or csv") {
		t.Fatalf("err %v", err)
	}
}
