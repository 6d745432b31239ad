package keycastload

import (
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
)

// TestJudgeWindowCountsConnectFailures: the rule a coordinator applies to a merged window is the one
// a run applies to its own: connect failures are failed attempts, cut-off requests are not
// attempts, intentional shedding is not an unintentional error, and MinRequests 0 is the default.
func TestJudgeWindowCountsConnectFailures(t *testing.T) {
	sc := &StopConditions{MaxUnintentionalErrorRate: 0.1}
	cf, co := engineClasses[classConnectFailure], engineClasses[classCutOff]
	cases := []struct {
		name   string
		counts map[string]int64
		breach bool
	}{
		{"healthy", map[string]int64{"success": 95, "server": 5}, false},
		{"connect failures breach", map[string]int64{"success": 80, cf: 20}, true},
		{"cut-off requests are not attempts", map[string]int64{"success": 95, "server": 5, co: 1000}, false},
		{"shedding is intentional", map[string]int64{"success": 50, "intentional": 50}, false},
		{"below the default minimum", map[string]int64{"server": DefaultStopMinimum - 1}, false},
		{"at the default minimum", map[string]int64{"server": DefaultStopMinimum}, true},
	}
	for _, c := range cases {
		if ev := JudgeWindow(sc, c.counts, nil); (ev != nil) != c.breach {
			t.Errorf("%s: breach %v; want %v", c.name, ev != nil, c.breach)
		} else if ev != nil && ev.Metric != MetricUnintErrors {
			t.Errorf("%s: metric %q", c.name, ev.Metric)
		}
	}
	if JudgeWindow(nil, map[string]int64{"server": 1000}, nil) != nil {
		t.Error("no stop conditions breached")
	}
	lat := hist.New()
	for range 100 {
		lat.Record(50 * time.Millisecond)
	}
	slow := &StopConditions{MaxUnintentionalErrorRate: 1, MaxLatencyP95Ms: 10}
	if ev := JudgeWindow(slow, map[string]int64{"success": 100}, lat); ev == nil || ev.Metric != MetricLatencyP95 {
		t.Errorf("p95 50 ms over a 10 ms limit: %+v", ev)
	}
}
