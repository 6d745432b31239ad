package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

func TestIntervalFor(t *testing.T) {
	for _, tc := range []struct {
		planned, want time.Duration
	}{{0, AutoInterval}, {time.Second, FineInterval}, {FineFor - time.Millisecond, FineInterval}, {FineFor, time.Second}, {time.Hour, time.Second}} {
		if got := IntervalFor(tc.planned); got != tc.want {
			t.Errorf("IntervalFor(%v) = %v, want %v", tc.planned, got, tc.want)
		}
	}
}

// A driver's After runs once the operations are done, and the timeline goes on through it: the
// gauge is read at every interval close, the counters After adds land in the intervals current
// when it adds them, and server samples keep coming.
func TestAfterExtendsTheTimeline(t *testing.T) {
	const ops, held = 40, 7
	var gauge atomic.Int64
	closedWithHeld := make(chan struct{}, 1024)
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		gauge.Add(1)
		return Outcome{}
	})
	var samples atomic.Int64
	cfg := Config{Driver: d, Workers: 2, Count: ops, Interval: 10 * time.Millisecond, Counters: []string{"ended"},
		Gauges: func() map[string]int64 { return map[string]int64{"held": gauge.Load()} },
		Sample: func(context.Context) (map[string]float64, error) {
			return map[string]float64{"n": float64(samples.Add(1))}, nil
		},
		OnInterval: func(iv *result.Interval, _ *Totals) {
			if iv.Gauges["held"] == held && iv.Total() == 0 {
				closedWithHeld <- struct{}{}
			}
		},
		After: func(ctx context.Context, w *Worker) {
			if w == nil {
				t.Error("After got no worker")
				return
			}
			w.Add(0, ops-held) // some end at once
			gauge.Store(held)
			for range 3 { // the rest are held for three intervals
				select {
				case <-closedWithHeld:
				case <-time.After(10 * time.Second):
					t.Error("no interval closed with the held gauge within 10 s")
					return
				}
			}
			w.Add(0, held)
			gauge.Store(0)
		}}
	r, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Total() != ops || sumIntervals(r)["success"] != ops {
		t.Fatalf("total %d, intervals %v", r.Total(), sumIntervals(r))
	}
	var ended int64
	heldIntervals := 0
	for _, iv := range r.Intervals {
		ended += iv.Counters["ended"]
		if iv.Gauges["held"] == held && iv.Total() == 0 {
			heldIntervals++
		}
		if iv.Gauges == nil {
			t.Fatalf("interval at %.3fs has no gauges", iv.T)
		}
	}
	if ended != ops || heldIntervals < 3 {
		t.Fatalf("counter ended %d (want %d), %d intervals held %d after the operations (want 3 or more)", ended, ops, heldIntervals, held)
	}
	last := r.Intervals[len(r.Intervals)-1]
	if last.Gauges["held"] != 0 {
		t.Fatalf("the last interval reads held %d, want 0", last.Gauges["held"])
	}
	// The run ends when After returns, and its samples go on meanwhile.
	if r.Elapsed() < 30*time.Millisecond || last.Server == nil {
		t.Fatalf("elapsed %v, last sample %v", r.Elapsed(), last.Server)
	}
}

// A signal during After ends it through its context; the operations were all counted, so it is
// not a cut-off.
func TestAfterEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	r, err := Execute(ctx, Config{Driver: d, Count: 5, Interval: 10 * time.Millisecond,
		After: func(ctx context.Context, _ *Worker) {
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Error("After's context did not end with the run's")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total() != 5 {
		t.Fatalf("total %d", r.Total())
	}
}

func TestAutoIntervalTakesFineSnapshots(t *testing.T) {
	d := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	r, err := Execute(context.Background(), Config{Driver: d, Duration: 350 * time.Millisecond, Interval: AutoInterval})
	if err != nil {
		t.Fatal(err)
	}
	if r.IntervalSecs != FineInterval.Seconds() || len(r.Intervals) < 3 {
		t.Fatalf("interval %g s, %d intervals", r.IntervalSecs, len(r.Intervals))
	}
	if _, err := Execute(context.Background(), Config{Driver: d, Count: 1, Interval: -2 * time.Second}); err == nil {
		t.Fatal("a negative interval other than AutoInterval was accepted")
	}
}
