package engine

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

// boundary returns the instant an interval ends, on a run that started at start.
func boundary(start time.Time, iv result.Interval) time.Time {
	return start.Add(time.Duration(math.Round((iv.T + iv.Secs) * float64(time.Second))))
}

// A later scenario's first operation is not before its offset, and every interval of either
// scenario ends where one of the run's ends.
func TestScenariosStartAtTheirOffsetsOnOneClock(t *testing.T) {
	var mu sync.Mutex
	var firstLate time.Time
	late := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		mu.Lock()
		if firstLate.IsZero() {
			firstLate = time.Now()
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return Outcome{}
	})
	early := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome { time.Sleep(time.Millisecond); return Outcome{} })
	const offset = 90 * time.Millisecond
	runs, err := ExecuteScenarios(context.Background(), Plan{Interval: 20 * time.Millisecond, Scenarios: []Scenario{
		{Name: "early", Config: Config{Driver: early, Workers: 2, Duration: 200 * time.Millisecond}},
		{Name: "late", Offset: offset, Config: Config{Driver: late, Workers: 2, Duration: 60 * time.Millisecond, Classes: []string{"ok", "bad"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e, l := runs.Scenarios[0], runs.Scenarios[1]
	if !e.Started || !l.Started || e.Run.Total() == 0 || l.Run.Total() == 0 || runs.Stop != nil {
		t.Fatalf("early %+v late %+v stop %v", e, l, runs.Stop)
	}
	if firstLate.Sub(runs.StartedAt) < offset || l.Run.StartedAt.Sub(runs.StartedAt) < offset {
		t.Fatalf("late scenario's first operation %v after the run's start, its start %v; offset %v",
			firstLate.Sub(runs.StartedAt), l.Run.StartedAt.Sub(runs.StartedAt), offset)
	}
	if l.Run.Envelope.Totals["ok"] != l.Run.Total() || l.Run.Classes[0] != "ok" {
		t.Fatalf("late scenario's own classes: %v %v", l.Run.Classes, l.Run.Envelope.Totals)
	}
	for _, sr := range runs.Scenarios {
		if sr.FirstInterval+len(sr.Run.Intervals) > len(runs.Intervals) {
			t.Fatalf("%s: %d intervals from %d past the run's %d", sr.Name, len(sr.Run.Intervals), sr.FirstInterval, len(runs.Intervals))
		}
		for i, iv := range sr.Run.Intervals {
			got, want := boundary(sr.Run.StartedAt, iv), boundary(runs.StartedAt, runs.Intervals[sr.FirstInterval+i])
			if i == len(sr.Run.Intervals)-1 && got.Before(want) {
				continue // the scenario ended inside the run's interval: its last one ends with it
			}
			if d := got.Sub(want).Abs(); d > time.Microsecond {
				t.Fatalf("%s: interval %d ends at %v, the run's %d at %v", sr.Name, i, got, sr.FirstInterval+i, want)
			}
		}
	}
	if l.FirstInterval == 0 {
		t.Fatalf("late scenario's first interval is the run's first")
	}
	var ops int64
	for _, iv := range l.Run.Intervals {
		ops += iv.Counts["ok"]
	}
	if ops != l.Run.Total() {
		t.Fatalf("late scenario's intervals add up to %d of %d", ops, l.Run.Total())
	}
}

// The target is sampled once per interval for the whole run, not once per scenario, and the
// samples sit in the run's intervals only.
func TestScenariosShareOneSampler(t *testing.T) {
	var calls atomic.Int64
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome { time.Sleep(time.Millisecond); return Outcome{} })
	var sc []Scenario
	for _, name := range []string{"a", "b", "c"} {
		sc = append(sc, Scenario{Name: name, Config: Config{Driver: d, Duration: 120 * time.Millisecond}})
	}
	runs, err := ExecuteScenarios(context.Background(), Plan{Interval: 20 * time.Millisecond, Scenarios: sc,
		Sample: func(context.Context) (map[string]float64, error) {
			return map[string]float64{"n": float64(calls.Add(1))}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// One sample as the run starts, one per interval boundary, one after the load.
	if n := calls.Load(); n > int64(len(runs.Intervals))+1 {
		t.Fatalf("%d samples for %d intervals of the run", n, len(runs.Intervals))
	}
	sampled := 0
	for _, iv := range runs.Intervals {
		if iv.Server != nil {
			sampled++
		}
	}
	if sampled < 2 || runs.Intervals[len(runs.Intervals)-1].Server == nil {
		t.Fatalf("%d of %d run intervals sampled (the last %v)", sampled, len(runs.Intervals), runs.Intervals[len(runs.Intervals)-1].Server)
	}
	for _, sr := range runs.Scenarios {
		for _, iv := range sr.Run.Intervals {
			if iv.Server != nil {
				t.Fatalf("%s carries a server sample of its own", sr.Name)
			}
		}
	}
}

// A stop condition on the run's samples ends every scenario, and one still waiting for its
// offset never starts.
func TestStopOnSampleEndsEveryScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the deadline: a stop that never comes
	defer cancel()
	d := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		select {
		case <-ctx.Done():
			return Outcome{Skip: true}
		case <-time.After(time.Millisecond):
			return Outcome{}
		}
	})
	var calls atomic.Int64
	runs, err := ExecuteScenarios(ctx, Plan{Interval: 10 * time.Millisecond,
		Scenarios: []Scenario{{Name: "a", Config: Config{Driver: d}}, {Name: "b", Config: Config{Driver: d, Rate: 500}},
			{Name: "never", Offset: time.Hour, Config: Config{Driver: d}}},
		Sample: func(context.Context) (map[string]float64, error) {
			return map[string]float64{"n": float64(calls.Add(1))}, nil
		},
		StopOnSample: func(_ time.Duration, m map[string]float64) *result.StopEvent {
			if m["n"] >= 3 {
				return &result.StopEvent{Reason: "stop-condition", Metric: "n"}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if runs.Stop == nil || runs.Stop.Reason != "stop-condition" || runs.Stop.ElapsedSecs <= 0 {
		t.Fatalf("run stop %+v", runs.Stop)
	}
	for _, sr := range runs.Scenarios[:2] {
		if sr.Run.Stop != runs.Stop || sr.Run.Total() == 0 {
			t.Fatalf("%s: stop %+v, %d operations", sr.Name, sr.Run.Stop, sr.Run.Total())
		}
	}
	if nv := runs.Scenarios[2]; nv.Started || nv.Run.Total() != 0 || nv.Run.Stop != runs.Stop || len(nv.Run.Classes) == 0 {
		t.Fatalf("the scenario after the stop: %+v %+v", nv, nv.Run)
	}
	if b := runs.Scenarios[1].Run.Open; b == nil || b.Scheduled < b.Sent {
		t.Fatalf("open figures %+v", b)
	}
}

// Cancelling ctx cuts off every scenario.
func TestSignalEndsEveryScenario(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var a, b sync.Once
	aRan, bRan := make(chan struct{}), make(chan struct{})
	driver := func(once *sync.Once, ran chan struct{}) Driver {
		return DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
			once.Do(func() { close(ran) })
			<-ctx.Done() // cut off only
			return Outcome{Skip: true}
		})
	}
	go func() { <-aRan; <-bRan; cancel() }()
	done := make(chan *Runs, 1)
	go func() {
		runs, err := ExecuteScenarios(ctx, Plan{Interval: 10 * time.Millisecond, Scenarios: []Scenario{
			{Name: "a", Config: Config{Driver: driver(&a, aRan), Workers: 2}},
			{Name: "b", Offset: 20 * time.Millisecond, Config: Config{Driver: driver(&b, bRan)}},
		}})
		if err != nil {
			t.Error(err)
		}
		done <- runs
	}()
	select {
	case runs := <-done:
		if runs == nil {
			return
		}
		for _, sr := range runs.Scenarios {
			if sr.Run.Stop == nil || sr.Run.Stop.Reason != StopSignal {
				t.Fatalf("%s: stop %+v", sr.Name, sr.Run.Stop)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end with its context")
	}
}

// A scenario that reaches its bound ends alone: the other, which can make its operations only
// once the first has ended (OthersDone), still makes them, and the run is not stopped.
func TestScenarioEndingEarlyLeavesTheOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the deadline
	defer cancel()
	quick := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	var afterOthers atomic.Int64
	waiting := DriverFunc(func(ctx context.Context, w *Worker, n int64) Outcome {
		select {
		case <-w.OthersDone():
			afterOthers.Add(1)
			return Outcome{}
		case <-ctx.Done():
			return Outcome{Skip: true}
		}
	})
	var setupRan atomic.Bool
	runs, err := ExecuteScenarios(ctx, Plan{Interval: 10 * time.Millisecond, Scenarios: []Scenario{
		{Name: "quick", Config: Config{Driver: quick, Count: 5}},
		{Name: "broken", Setup: func(context.Context) (Config, error) {
			setupRan.Store(true)
			return Config{}, errors.New("no connections")
		}},
		{Name: "waiting", Config: Config{Driver: waiting, Count: 3, Workers: 3}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if runs.Stop != nil {
		t.Fatalf("stop %+v", runs.Stop)
	}
	q, br, w := runs.Scenarios[0], runs.Scenarios[1], runs.Scenarios[2]
	if q.Run.Total() != 5 || w.Run.Total() != 3 || afterOthers.Load() != 3 || w.Run.EndedAt.Before(q.Run.EndedAt) {
		t.Fatalf("quick %d, waiting %d (%d after the others); quick ended %v, waiting %v", q.Run.Total(), w.Run.Total(), afterOthers.Load(),
			q.Run.EndedAt, w.Run.EndedAt)
	}
	if !setupRan.Load() || br.Started || br.Err == nil || br.Err.Error() != "no connections" {
		t.Fatalf("broken scenario %+v", br)
	}
}

// Setup runs at the scenario's offset and its Config is what runs; an After of a scenario with
// no driver still runs.
func TestScenarioSetupAndAfterOnly(t *testing.T) {
	var setupAt time.Time
	var afterRan atomic.Bool
	d := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	runs, err := ExecuteScenarios(context.Background(), Plan{Interval: 10 * time.Millisecond, Scenarios: []Scenario{
		{Name: "set-up", Offset: 30 * time.Millisecond, Setup: func(context.Context) (Config, error) {
			setupAt = time.Now()
			return Config{Driver: d, Count: 7}, nil
		}},
		{Name: "after-only", Config: Config{After: func(context.Context, *Worker) { afterRan.Store(true) }}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := runs.Scenarios[0]
	if s.Err != nil || s.Run.Total() != 7 || setupAt.Sub(runs.StartedAt) < 30*time.Millisecond || s.Run.StartedAt.Before(setupAt) {
		t.Fatalf("set-up scenario %+v, setup %v after the start", s, setupAt.Sub(runs.StartedAt))
	}
	if !afterRan.Load() || runs.Scenarios[1].Run.Total() != 0 {
		t.Fatalf("after-only scenario: after ran %v", afterRan.Load())
	}
}

func TestBadPlanIsRefused(t *testing.T) {
	d := DriverFunc(func(context.Context, *Worker, int64) Outcome { return Outcome{} })
	for name, p := range map[string]Plan{
		"empty":          {},
		"auto, several":  {Interval: AutoInterval, Scenarios: []Scenario{{Config: Config{Driver: d}}, {Config: Config{Driver: d}}}},
		"own sampler":    {Scenarios: []Scenario{{Name: "x", Config: Config{Driver: d, Sample: func(context.Context) (map[string]float64, error) { return nil, nil }}}}},
		"negative start": {Scenarios: []Scenario{{Name: "x", Offset: -time.Second, Config: Config{Driver: d}}}},
		"bad rate":       {Scenarios: []Scenario{{Name: "x", Config: Config{Driver: d, Rate: -1}}}},
	} {
		if _, err := ExecuteScenarios(context.Background(), p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
