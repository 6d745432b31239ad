package keycastload

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

// TestOnIntervalSeesEveryInterval: the live hook gets each interval the results file keeps, in
// order, with the same counts.
func TestOnIntervalSeesEveryInterval(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := baseConfig(f.URL, 4)
	cfg.Duration = 2500 * time.Millisecond
	var mu sync.Mutex
	var seen []result.Interval
	cfg.OnInterval = func(iv *result.Interval) {
		mu.Lock()
		seen = append(seen, result.Interval{T: iv.T, Secs: iv.Secs, Counts: iv.Counts})
		mu.Unlock()
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(res.Intervals) || len(seen) < 3 {
		t.Fatalf("hook saw %d intervals, the results hold %d", len(seen), len(res.Intervals))
	}
	var total int64
	for i, iv := range seen {
		if iv.T != res.Intervals[i].T || iv.Total() != res.Intervals[i].Total() {
			t.Errorf("interval %d: hook %v/%d, results %v/%d", i, iv.T, iv.Total(), res.Intervals[i].T, res.Intervals[i].Total())
		}
		total += iv.Total()
	}
	if total != int64(res.Summary.TotalRequests) {
		t.Errorf("hook counted %d requests, the summary %d", total, res.Summary.TotalRequests)
	}
}
