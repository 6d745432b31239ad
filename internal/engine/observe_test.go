package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

func TestIntervalObserverSeesWhatOnIntervalSees(t *testing.T) {
	var own, observed atomic.Int64
	cfg := Config{
		Driver:     DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome { return Outcome{} }),
		Count:      2000,
		Interval:   10 * time.Millisecond,
		OnInterval: func(iv *result.Interval, _ *Totals) { own.Add(iv.Total()) },
	}
	ctx := WithIntervalObserver(context.Background(), func(iv *result.Interval) { observed.Add(iv.Total()) })
	run, err := Execute(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if own.Load() != 2000 || observed.Load() != 2000 || run.Total() != 2000 {
		t.Errorf("OnInterval counted %d, the observer %d, the run %d; want 2000 each", own.Load(), observed.Load(), run.Total())
	}
	if IntervalObserver(context.Background()) != nil || WithIntervalObserver(context.Background(), nil) != context.Background() {
		t.Error("a context without an observer has one")
	}
}

// TestIntervalObserversNest: an observer attached under another one does not hide it; both see
// every snapshot, the outer one first.
func TestIntervalObserversNest(t *testing.T) {
	var order []string
	ctx := WithIntervalObserver(context.Background(), func(*result.Interval) { order = append(order, "outer") })
	ctx = WithIntervalObserver(ctx, func(*result.Interval) { order = append(order, "inner") })
	IntervalObserver(ctx)(&result.Interval{})
	if len(order) != 2 || order[0] != "outer" || order[1] != "inner" {
		t.Errorf("observers called %v; want [outer inner]", order)
	}
}
