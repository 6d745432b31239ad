package compare

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// synth makes a run of n one-second intervals whose throughput is about rate (noise sd as a
// share) and whose latencies are about lat.
func synth(rng *rand.Rand, n int, rate, sd float64, lat time.Duration) *result.Envelope {
	e := &result.Envelope{Format: result.Format, Harness: "keycast", Command: "run", IntervalSecs: 1}
	for i := range n {
		ok := int64(rate * (1 + sd*rng.NormFloat64()))
		h := hist.New()
		for range 200 {
			h.Record(time.Duration(float64(lat) * (0.5 + rng.ExpFloat64()*0.5)))
		}
		e.Intervals = append(e.Intervals, result.Interval{T: float64(i), Secs: 1,
			Counts: map[string]int64{"success": ok, "server": ok / 100, "intentional": ok / 50}, Latency: map[string]*hist.Histogram{"latency": h}})
	}
	return e
}

func runs(seed uint64, k int, rate float64, lat time.Duration) []*result.Envelope {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []*result.Envelope
	for range k {
		// Each run has its own level (run-to-run noise) and its seconds' noise.
		out = append(out, synth(rng, 10, rate*(1+0.03*rng.NormFloat64()), 0.05, lat))
	}
	return out
}

func metric(t *testing.T, c *Comparison, name string) Metric {
	t.Helper()
	m := c.find(name)
	if m == nil {
		t.Fatalf("no metric %s in %v", name, c.names())
	}
	return *m
}

// TestIdenticalConfigurationsSayNoChange: 20 comparisons of two samples of one configuration say
// "no change" for throughput in at least 17 (at 0.95 about 19 are expected).
func TestIdenticalConfigurationsSayNoChange(t *testing.T) {
	same := 0
	for i := range 20 {
		a, b := runs(uint64(100+2*i), 3, 1000, 5*time.Millisecond), runs(uint64(101+2*i), 3, 1000, 5*time.Millisecond)
		c, err := Compare(a, b, Options{Seed: uint64(i + 1), Iterations: 500})
		if err != nil {
			t.Fatal(err)
		}
		if metric(t, c, "throughput").Verdict == NoChange {
			same++
		}
	}
	t.Logf("identical configurations: no change in %d of 20 at 0.95", same)
	if same < 17 {
		t.Fatalf("identical configurations: no change in %d of 20", same)
	}
}

// TestSlowerBuildSaysWorse: 20 % less throughput and twice the latency are "worse", and a gate on
// them fails; the report's text and JSON say so.
func TestSlowerBuildSaysWorse(t *testing.T) {
	a, b := runs(1, 3, 1000, 5*time.Millisecond), runs(2, 3, 800, 10*time.Millisecond)
	c, err := Compare(a, b, Options{Seed: 9, Iterations: 500})
	if err != nil {
		t.Fatal(err)
	}
	if m := metric(t, c, "throughput"); m.Verdict != Worse || m.High >= 0 {
		t.Errorf("throughput %+v", m)
	}
	if m := metric(t, c, "p99"); m.Verdict != Worse || m.Low <= 0 {
		t.Errorf("p99 %+v", m)
	}
	gates, err := ParseGate("throughput>-3%,p99<+5%")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyGate(gates); err != nil || c.Gate.Passed || len(c.Gate.Failed) != 2 {
		t.Fatalf("gate %v %+v", err, c.Gate)
	}
	var txt bytes.Buffer
	c.WriteText(&txt)
	if !strings.Contains(txt.String(), "gate: FAILED: throughput changed") {
		t.Errorf("text:\n%s", txt.String())
	}
	if _, err := json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	// The same gate passes two samples of one configuration.
	same, err := Compare(runs(3, 3, 1000, 5*time.Millisecond), runs(4, 3, 1000, 5*time.Millisecond), Options{Seed: 9, Iterations: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := same.ApplyGate(gates); err != nil || !same.Gate.Passed {
		t.Fatalf("gate on identical configurations: %v %+v", err, same.Gate)
	}
}

func TestOneRunASideSaysNoNoiseModel(t *testing.T) {
	c, err := Compare(runs(1, 1, 1000, time.Millisecond), runs(2, 1, 1000, time.Millisecond), Options{Seed: 1, Iterations: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Notes) == 0 || !strings.Contains(c.Notes[0], "run-to-run noise") {
		t.Fatalf("notes %v", c.Notes)
	}
}

func TestCompareRefusesWhatItCannotCompare(t *testing.T) {
	a := runs(1, 1, 1000, time.Millisecond)
	other := runs(2, 1, 1000, time.Millisecond)
	other[0].Command = "capacity"
	empty := &result.Envelope{Harness: "keycast", Command: "run"}
	for _, c := range []struct {
		a, b []*result.Envelope
		opt  Options
		want string
	}{
		{a, nil, Options{}, "at least one run on each side"},
		{a, other, Options{}, "compare runs of one command"},
		{a, []*result.Envelope{empty}, Options{}, "no interval snapshots"},
		{a, a, Options{Confidence: 1.5}, "confidence"},
		{a, a, Options{Iterations: 5}, "iterations"},
	} {
		if _, err := Compare(c.a, c.b, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

func TestParseGate(t *testing.T) {
	g, err := ParseGate(" throughput>-3% , p99.9:request<+5%,error_rate<+0.5%")
	if err != nil || len(g) != 3 || g[0].Limit != -3 || g[1].Metric != "p99.9:request" || g[2].Op != "<" {
		t.Fatalf("%+v %v", g, err)
	}
	for in, want := range map[string]string{"": "empty item", "throughput>-3": "needs a % sign", "latency<5%": "unknown metric",
		"p99<x%": "not a percentage", "throughput": "want METRIC<LIMIT%", "throughput>1%,,p99<1%": "empty item", "p99<NaN%": "not a percentage"} {
		if _, err := ParseGate(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGate(%q) = %v; want %q", in, err, want)
		}
	}
}

func FuzzParseGate(f *testing.F) {
	for _, s := range []string{"throughput>-3%,p99<+5%", "p99.9:request<1e3%", ",", "error_rate<", "p50:<%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGate(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		for _, x := range g {
			if x.Op != "<" && x.Op != ">" || checkMetricName(x.Metric) != nil {
				t.Fatalf("accepted %+v from %q", x, s)
			}
		}
	})
}

// TestRareRefusalsOnOneSideSayNoChange: side A refused a few requests in one second of one run,
// side B none (what identical Keycast configurations under a noisy neighbour produce). A resample
// with no refusal on either side is no change, not a draw to drop, so the interval reaches zero
// and the verdict is "no change" rather than a certain -100 %.
func TestRareRefusalsOnOneSideSayNoChange(t *testing.T) {
	a, b := runs(11, 3, 1000, 5*time.Millisecond), runs(12, 3, 1000, 5*time.Millisecond)
	for _, side := range [][]*result.Envelope{a, b} {
		for _, e := range side {
			for i := range e.Intervals {
				delete(e.Intervals[i].Counts, "intentional")
			}
		}
	}
	a[1].Intervals[4].Counts["intentional"] = 3
	c, err := Compare(a, b, Options{Seed: 5, Iterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m := metric(t, c, "refusal_rate")
	if m.Verdict != NoChange || !(m.High >= 0) {
		t.Fatalf("refusal_rate %s, change %.1f%% [%.1f, %.1f]: want no change with an interval reaching 0",
			m.Verdict, m.Change, m.Low, m.High)
	}
	if m.B != 0 || m.A == 0 {
		t.Fatalf("refusal rates A %v B %v: the test's setup is wrong", m.A, m.B)
	}
}
