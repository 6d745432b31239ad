package report

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// manyNames is a LinkKeys-shaped envelope of n one-second intervals in which every interval names
// a new server metric, a new driver counter and a new outcome class: the shape that made the HTML
// model quadratic (every series padded to every row).
func manyNames(n int) []byte {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env := &result.Envelope{Format: result.Format, Harness: "linkkeys", Command: "connections", Target: "127.0.0.1:1",
		StartedAt: start, EndedAt: start.Add(time.Duration(n) * time.Second), IntervalSecs: 1, Totals: map[string]int64{}}
	for i := range n {
		cls := fmt.Sprintf("class_%05d", i)
		var lat map[string]*hist.Histogram
		if i%100 == 0 { // a new latency kind every hundredth interval
			h := hist.New()
			h.RecordMicros(int64(i + 1))
			lat = map[string]*hist.Histogram{fmt.Sprintf("kind_%05d", i): h}
		}
		env.Intervals = append(env.Intervals, result.Interval{T: float64(i), Secs: 1, Latency: lat,
			Counts:   map[string]int64{cls: 1},
			Counters: map[string]int64{fmt.Sprintf("counter_%05d", i): int64(i)},
			Server:   map[string]float64{fmt.Sprintf("lp_metric_%05d_bytes", i): float64(i)}})
		env.Totals[cls] = 1
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

// TestHTMLLinearInSeriesNames (issue 27, finding 4): a result naming 10,000 metrics drew 2.5 GiB;
// it now draws with at most MaxSeriesPerChart series a chart, allocating under 500 MiB in all.
// The bound is on bytes allocated (a measure of the work), not on time.
func TestHTMLLinearInSeriesNames(t *testing.T) {
	data := manyNames(10_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := BuildModel([]Source{{Name: "many.json", Data: data}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := Page(m)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte file: %d-byte page, %d MiB allocated", len(data), len(page), alloc>>20)
	if alloc > 500<<20 {
		t.Fatalf("drawing %d series names allocated %d MiB (bound 500 MiB)", 10_000, alloc>>20)
	}
	rv := m.Runs[0]
	charts := map[string][]*Series{"classes": rv.Classes, "counters": rv.Counters}
	for _, g := range rv.Server {
		charts["server "+g.Group] = g.Series
	}
	if len(rv.Latency) > MaxSeriesPerChart {
		t.Errorf("latency chart draws %d kinds (cap %d)", len(rv.Latency), MaxSeriesPerChart)
	}
	for name, list := range charts {
		if len(list) > MaxSeriesPerChart {
			t.Errorf("chart %s draws %d series (cap %d)", name, len(list), MaxSeriesPerChart)
		}
		if len(list) == MaxSeriesPerChart && list[len(list)-1].Name != "other" {
			t.Errorf("chart %s: the folded series is %q, want other", name, list[len(list)-1].Name)
		}
	}
	// The sum keeps what was folded: every counter is in a kept series or in "other".
	var sum float64
	for _, s := range rv.Counters {
		for _, v := range s.Values {
			if v == v {
				sum += v
			}
		}
	}
	if want := float64(10_000*9_999) / 2; sum != want {
		t.Errorf("counters sum to %g drawn, want %g", sum, want)
	}
}
