package linkkeysserver

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testwait"
)

// TestGCPacer: while the live heap is small the heap goal is held at HeapTarget, with GOGC between
// SmallPercent and MaxPercent; LargePercent from the threshold on, the small band again only below
// half of it; GOGC is set on the first step and on each change only.
func TestGCPacer(t *testing.T) {
	var live uint64
	var sets []int
	const mib = 1 << 20
	p := &GCPacer{Threshold: 1000 * mib, HeapTarget: 12 * mib, LiveHeap: func() uint64 { return live },
		SetPercent: func(v int) int { sets = append(sets, v); return 0 }}
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 300},            // before the first collection: the heap minimum (4 MiB x 3) at the target
		{1 * mib, 300},      // (12-1)/1 = 1100 %, but the heap minimum caps it at 300
		{1 * mib, 300},      // no change, no call
		{4 * mib, 200},      // goal 4 x 3 = 12
		{6 * mib, 100},      // goal 12
		{79 * mib / 10, 51}, // goal 7.9 x 1.51 ≈ 12
		{10 * mib, 50},      // (12-10)/10 = 20 %, at least 50
		{999 * mib, 50},     // still small
		{1000 * mib, 100},   // large
		{600 * mib, 100},    // hysteresis: above half the threshold
		{499 * mib, 50},     // small again
		{3 * mib, 300},
	} {
		live = c.live
		if got := p.Step(); got != c.want {
			t.Errorf("live %d: GOGC %d, want %d", c.live, got, c.want)
		}
	}
	want := []int{300, 200, 100, 51, 50, 100, 50, 300}
	if len(sets) != len(want) {
		t.Fatalf("SetGCPercent calls %v, want %v", sets, want)
	}
	for i := range want {
		if sets[i] != want[i] {
			t.Fatalf("SetGCPercent calls %v, want %v", sets, want)
		}
	}
	// The defaults: a 4 MiB target allows at most GOGC=100 (the runtime's heap minimum is then 4 MiB).
	d := &GCPacer{LiveHeap: func() uint64 { return 512 << 10 }, SetPercent: func(int) int { return 0 }}
	if got := d.Step(); got != 100 {
		t.Errorf("defaults, live 512 KiB: GOGC %d, want 100", got)
	}
}

// TestGCPacerBaseline: the goal is held HeapTarget above the live heap at rest, with the percent
// cap raised with it (the heap minimum may reach the whole goal); Run measures the baseline.
func TestGCPacerBaseline(t *testing.T) {
	const mib = 1 << 20
	var live uint64 = 1 * mib
	p := &GCPacer{Baseline: 1 * mib, LiveHeap: func() uint64 { return live }, SetPercent: func(int) int { return 0 }}
	// Goal 5 MiB: GOGC = (5-1)/1 = 400 %, capped at 5/4 x 100 = 125 (the minimum is then 5 MiB).
	if got := p.Step(); got != 125 {
		t.Errorf("baseline 1 MiB, live 1 MiB: GOGC %d, want 125", got)
	}
	live = 3 * mib // (5-3)/3 = 66 %
	if got := p.Step(); got != 66 {
		t.Errorf("baseline 1 MiB, live 3 MiB: GOGC %d, want 66", got)
	}
	r := &GCPacer{SetPercent: func(int) int { return 100 }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Run(ctx)
	if r.Baseline == 0 {
		t.Error("Run did not measure the live heap at rest")
	}
}

// TestSmallBandPercentLargeHeaps: no overflow or negative percent for heaps near the top of uint64.
func TestSmallBandPercentLargeHeaps(t *testing.T) {
	if got := smallBandPercent(1<<62, 1<<63, 50, 400); got != 100 {
		t.Errorf("live 2^62, target 2^63: %d, want 100", got)
	}
	if got := smallBandPercent(1, 1<<63, 50, 400); got != 400 {
		t.Errorf("live 1, target 2^63: %d, want 400", got)
	}
	if got := smallBandPercent(0, 1<<63, 50, 400); got != 400 {
		t.Errorf("live 0, target 2^63: %d, want 400", got)
	}
	if got := smallBandPercent(1<<63, 1, 50, 400); got != 50 {
		t.Errorf("live 2^63, target 1: %d, want 50", got)
	}
}

// TestGCPacerStepsAfterEachGC: Run steps after each collection (it has no timer), and stops
// when its context ends.
func TestGCPacerStepsAfterEachGC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each step reports whether the context had ended when it began: one collection's cleanup
	// can be past its check of ctx when cancel runs, so that one step may still come.
	steps := make(chan bool, 100)
	p := &GCPacer{LiveHeap: func() uint64 {
		select {
		case steps <- ctx.Err() != nil:
		default:
		}
		return 1 << 20
	}, SetPercent: func(int) int { return 100 }}
	p.Run(ctx)
	testwait.Recv(t, steps, testwait.Long, "first step") // at once
	// A collection that starts before the previous step has armed the next sentinel finds nothing
	// to clean up, so each round collects until a step comes.
	for i := range 3 {
		deadline := time.Now().Add(10 * time.Second)
		for stepped := false; !stepped; {
			if time.Now().After(deadline) {
				t.Fatalf("no step within 10 s of collecting (round %d)", i+1)
			}
			runtime.GC()
			select {
			case <-steps:
				stepped = true
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// Once ctx ends, collections step no more: a cleanup that runs after it neither steps nor arms
	// the next sentinel. Only the step already in flight when cancel ran may still come, once.
	cancel()
	for range 3 {
		runtime.GC()
	}
	late := 0
	quiet := time.After(200 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case afterCancel := <-steps:
			if afterCancel {
				late++
			}
		case <-quiet:
			waiting = false
		}
	}
	if late > 1 {
		t.Fatalf("%d steps after the context ended, want at most the one in flight when it ended", late)
	}
}
