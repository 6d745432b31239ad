package engine

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

// sumIntervals adds the interval counts of a run by class.
func sumIntervals(r *Run) map[string]int64 {
	got := map[string]int64{}
	for _, iv := range r.Intervals {
		for k, v := range iv.Counts {
			got[k] += v
		}
	}
	return got
}

func TestClosedModelCountIsExactAndIntervalsAddUp(t *testing.T) {
	var calls atomic.Int64
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		calls.Add(1)
		if n%10 == 0 {
			return Outcome{Class: 1, Cause: "every_tenth"}
		}
		return Outcome{}
	})
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 8, Count: 10_000, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 10_000 || r.Total() != 10_000 {
		t.Fatalf("calls %d, total %d; want 10000", calls.Load(), r.Total())
	}
	if r.Envelope.Totals["success"] != 9_000 || r.Envelope.Totals["failure"] != 1_000 || r.Causes["every_tenth"] != 1_000 {
		t.Fatalf("totals %v causes %v", r.Envelope.Totals, r.Causes)
	}
	if got := sumIntervals(r); got["success"] != 9_000 || got["failure"] != 1_000 {
		t.Fatalf("intervals add up to %v", got)
	}
	if n := r.Histograms["latency"].Count(); n != 10_000 {
		t.Fatalf("latency histogram holds %d samples", n)
	}
	if r.Stop != nil || r.Open != nil {
		t.Fatalf("stop %v open %v", r.Stop, r.Open)
	}
}

func TestSegmentsOfOneRunMergeToTheWhole(t *testing.T) {
	const total = 1001
	seen := make([]atomic.Int32, total)
	var merged result.Envelope
	for _, seg := range Split(3) {
		d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
			seen[Global(seg, n)].Add(1)
			return Outcome{}
		})
		r, err := Execute(context.Background(), Config{Driver: d, Workers: 2, Count: seg.Share(total)})
		if err != nil {
			t.Fatal(err)
		}
		r.Format, r.Harness, r.Command = result.Format, "test", "run"
		r.Segments = []Segment{seg}
		if err := merged.Merge(&r.Envelope); err != nil {
			t.Fatal(err)
		}
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("operation %d ran %d times", i, seen[i].Load())
		}
	}
	if merged.Total() != total || merged.Histograms["latency"].Count() != total || len(merged.Segments) != 3 {
		t.Fatalf("merged total %d, histogram %d, segments %v", merged.Total(), merged.Histograms["latency"].Count(), merged.Segments)
	}
	if err := merged.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenModelCountsSentLateAndDropped(t *testing.T) {
	// One worker and an operation slower than the schedule: sends fall behind, latency is measured
	// from the intended time, and what could not be sent by the end counts as dropped.
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		if w.Intended.IsZero() {
			t.Error("open model operation without an intended time")
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return Outcome{Skip: true}
		}
		return Outcome{}
	})
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 1, Rate: 2000, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Open
	if o == nil || o.Sent != r.Total() || o.Scheduled < 399 || o.Dropped != o.Scheduled-o.Sent || o.Dropped == 0 || o.Late == 0 {
		t.Fatalf("open figures %+v, total %d", o, r.Total())
	}
	unc, lat := r.Histograms["uncorrected"], r.Histograms["latency"]
	if unc.Count() != o.Sent || lat.Max() <= unc.Max() {
		t.Fatalf("corrected max %v must exceed uncorrected max %v (%d samples)", lat.Max(), unc.Max(), unc.Count())
	}
}

func TestStopConditionCutsOffTheRun(t *testing.T) {
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		select {
		case <-time.After(time.Millisecond):
			return Outcome{Class: 1}
		case <-ctx.Done():
			return Outcome{Skip: true}
		}
	})
	var cutOff atomic.Bool
	cfg := Config{Driver: d, Workers: 4, Duration: time.Minute, Interval: 10 * time.Millisecond, StopWindow: 3,
		OnCutOff: func() { cutOff.Store(true) },
		Stop: func(el time.Duration, w *Window) *result.StopEvent {
			c := w.Counts()
			if c[1] > 0 && w.Latency().Count() > 0 {
				return &result.StopEvent{Reason: "stop-condition", Metric: "failures", Observed: float64(c[1]), Limit: 0}
			}
			return nil
		}}
	r, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop == nil || r.Stop.Metric != "failures" || !cutOff.Load() || r.Stop.ElapsedSecs >= 60 {
		t.Fatalf("stop %+v, cut off %v", r.Stop, cutOff.Load())
	}
}

func TestSignalEndsTheRunWithPartialFigures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	d := DriverFunc(func(c context.Context, w *Worker, _ int64) Outcome {
		if n.Add(1) == 100 {
			cancel()
		}
		return Outcome{}
	})
	r, err := Execute(ctx, Config{Driver: d, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop == nil || r.Stop.Reason != StopSignal || r.Total() < 100 {
		t.Fatalf("stop %+v, total %d", r.Stop, r.Total())
	}
}

func TestServerSamplesLandInIntervals(t *testing.T) {
	var k atomic.Int64
	d := DriverFunc(func(ctx context.Context, w *Worker, _ int64) Outcome {
		time.Sleep(100 * time.Microsecond)
		return Outcome{}
	})
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 1, Duration: 60 * time.Millisecond, Interval: 10 * time.Millisecond,
		Sample: func(ctx context.Context) (map[string]float64, error) {
			return map[string]float64{"rss_bytes": float64(k.Add(1))}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, iv := range r.Intervals {
		if iv.Server["rss_bytes"] > 0 {
			got++
		}
	}
	if got == 0 || r.Intervals[len(r.Intervals)-1].Server == nil {
		t.Fatalf("%d of %d intervals carry a server sample; the last must", got, len(r.Intervals))
	}
	// The last interval carries the sample taken after the load (the last one taken), not one
	// taken when that interval began.
	if last := r.Intervals[len(r.Intervals)-1].Server["rss_bytes"]; last != float64(k.Load()) {
		t.Errorf("the last interval's sample is call %v of %d: want the sample after the load", last, k.Load())
	}
}

func TestBadConfigIsRefused(t *testing.T) {
	if _, err := Execute(context.Background(), Config{}); err != ErrNoDriver {
		t.Fatalf("no driver: %v", err)
	}
	d := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	if _, err := Execute(context.Background(), Config{Driver: d, Count: -1}); err == nil {
		t.Fatal("negative count accepted")
	}
}

func TestRetiredWorkerStopsAndTheOthersGoOn(t *testing.T) {
	// Worker 0 fails on its third operation and retires; in the closed model the count is still met
	// by the others, in the open model they take its tickets.
	for _, rate := range []float64{0, 5000} {
		var mine atomic.Int64
		d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
			if w.ID == 0 {
				if mine.Add(1) == 3 {
					return Outcome{Class: 1, Cause: "connection_lost", Retire: true}
				}
				if mine.Load() > 3 {
					t.Error("a retired worker was called again")
				}
			}
			time.Sleep(50 * time.Microsecond) // so every worker gets its turn
			return Outcome{}
		})
		cfg := Config{Driver: d, Workers: 4, Count: 1000, Rate: rate}
		r, err := Execute(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Total() != 1000 || r.Causes["connection_lost"] != 1 || mine.Load() != 3 {
			t.Fatalf("rate %v: total %d causes %v, worker 0 ran %d", rate, r.Total(), r.Causes, mine.Load())
		}
	}
}

func TestPendingOperationsAreDrainedAtTheEnd(t *testing.T) {
	// A pipelining driver: each worker keeps a window of 4 operations in flight, starting up to 4
	// in one call and finishing one per call. Everything started before the end is counted.
	const window = 4
	var started atomic.Int64
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		if !w.Ending() {
			if n < 0 {
				t.Error("a ticketed call before the end got n = -1")
			}
			for w.Pending < window {
				w.Pending++
				started.Add(1)
			}
		} else if w.Pending == 0 {
			t.Error("a drain call with nothing pending")
		}
		time.Sleep(20 * time.Microsecond)
		w.Pending--
		return Outcome{}
	})
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 3, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Total() != started.Load() || r.Total() < 3*window {
		t.Fatalf("counted %d of %d started", r.Total(), started.Load())
	}
}

func TestProgressSeesEveryCountInOrder(t *testing.T) {
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		return Outcome{Class: uint8(n % 3 / 2)} // two successes, then a failure
	})
	var calls, last int64
	var lines []int64
	cfg := Config{Driver: d, Workers: 8, Count: 3000, Progress: func(c []int64) {
		calls++
		total := c[0] + c[1]
		if total != last+1 {
			t.Errorf("progress went from %d to %d", last, total)
		}
		last = total
		if total%1000 == 0 {
			lines = append(lines, total)
		}
	}}
	r, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3000 || len(lines) != 3 || r.Envelope.Totals["failure"] != 1000 {
		t.Fatalf("%d calls, lines at %v, totals %v", calls, lines, r.Envelope.Totals)
	}
}

func TestDrainCutsOffOperationsThatOutliveTheDuration(t *testing.T) {
	// Operations that never finish on their own: the run must end at Duration + Drain, with the
	// cut-off operations reported by the driver in their own class and no latency.
	var cut atomic.Bool
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		<-ctx.Done()
		return Outcome{Class: 1, NoLatency: true}
	})
	// Without the drain this run never ends: it is given 30 s.
	var r *Run
	var err error
	testwait.Call(t, testwait.Long, "end of a run whose operations never finish (Duration 50 ms + Drain 50 ms)", func() {
		r, err = Execute(context.Background(), Config{Driver: d, Workers: 3, Duration: 50 * time.Millisecond, Drain: 50 * time.Millisecond,
			OnCutOff: func() { cut.Store(true) }})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cut.Load() || r.Envelope.Totals["failure"] != 3 || r.Histograms["latency"].Count() != 0 || r.Stop != nil {
		t.Fatalf("cut off %v, totals %v, latency samples %d, stop %+v", cut.Load(), r.Envelope.Totals, r.Histograms["latency"].Count(), r.Stop)
	}
}

func TestWorkerDoneClosesAtTheEnd(t *testing.T) {
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		select {
		case <-w.Done(): // a backoff that the end of the run interrupts
		case <-time.After(time.Minute):
			t.Error("Worker.Done did not close at the end of the run")
		}
		return Outcome{}
	})
	r, err := Execute(context.Background(), Config{Driver: d, Workers: 2, Duration: 20 * time.Millisecond})
	if err != nil || r.Total() != 2 {
		t.Fatalf("total %d, err %v", r.Total(), err)
	}
}

func TestBarDrawsTotalsAndEnds(t *testing.T) {
	var buf safeBuffer
	b := NewBar(&buf, "ddos", 10, "allowed", "denied")
	b.Update(10, 7, 3)
	b.Close()
	b.Close() // a second Close is harmless
	if out := buf.String(); !strings.Contains(out, "ddos") || !strings.Contains(out, "allowed=7 denied=3") {
		t.Fatalf("bar output %q", out)
	}
}

// safeBuffer is a bytes.Buffer the bar's render goroutine and the test may use at once.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *safeBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestSeriesCapKeepsTheFirstNames: the cap admits names in sorted order until full, always keeps
// admitted names, and counts the rest.
func TestSeriesCapKeepsTheFirstNames(t *testing.T) {
	c := newSeriesCap(3)
	m, dropped := c.limit(map[string]float64{"d": 4, "b": 2, "a": 1, "c": 3})
	if len(m) != 3 || dropped != 1 || m["d"] != 0 {
		t.Fatalf("first sample kept %v, dropped %d; want a, b, c and 1", m, dropped)
	}
	m, dropped = c.limit(map[string]float64{"a": 1, "z": 26})
	if len(m) != 1 || m["a"] != 1 || dropped != 1 {
		t.Fatalf("second sample kept %v, dropped %d; want a and 1", m, dropped)
	}
	if m, dropped = c.limit(map[string]float64{"b": 2}); len(m) != 1 || dropped != 0 {
		t.Fatalf("an admitted name alone: kept %v, dropped %d", m, dropped)
	}
}
