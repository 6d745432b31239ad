package linkkeysload_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/result"
)

// TestFanOutHandsLiveIntervalsToTheObserver: a handshake-bench fanned out to two worker processes,
// under a context with an interval observer, hands the observer every interval of the run as it
// goes, merged over the workers, in order: they add up to the result's own intervals exactly. The
// workers' interval lines never reach stdout, and without an observer nothing is asked of them.
func TestFanOutHandsLiveIntervalsToTheObserver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rs := startReal(t, config(t, scaleProfile))
	cfg := linkkeysload.HandshakeConfig{Target: rs.target, DurationSecs: 2, Concurrency: 4, AttemptTimeout: 10 * time.Second,
		Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.27.0"), Count: 8}}
	launcher := workerLauncher(t)

	var mu sync.Mutex
	var seen []result.Interval
	ctx := engine.WithIntervalObserver(context.Background(), func(iv *result.Interval) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, *iv)
	})
	var out bytes.Buffer
	res, err := linkkeysload.HandshakeBench(ctx, cfg, linkkeysload.Run{Stdout: &out, Workers: 2, Launcher: launcher})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "@lkload") {
		t.Errorf("worker protocol lines on stdout:\n%s", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || len(seen) != len(res.Intervals) {
		t.Fatalf("observer saw %d intervals, the result has %d", len(seen), len(res.Intervals))
	}
	for i := range seen {
		want, got := res.Intervals[i], seen[i]
		// T is the first worker's to report; the result file's is the first segment's.
		if got.T < want.T-0.1 || got.T > want.T+0.1 || got.Counts[result.ClassSuccess] != want.Counts[result.ClassSuccess] || got.Total() != want.Total() {
			t.Errorf("interval %d: observed t=%v %v, result t=%v %v", i, got.T, got.Counts, want.T, want.Counts)
		}
	}
	if res.Totals[result.ClassSuccess] == 0 {
		t.Fatalf("no handshake succeeded: %v", res.Totals)
	}

	// Without an observer the workers are asked nothing and the output has no trace of it.
	out.Reset()
	if _, err := linkkeysload.HandshakeBench(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Workers: 2, Launcher: launcher}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "@lkload") {
		t.Errorf("worker protocol lines on stdout:\n%s", out.String())
	}
}
