package capacity

import (
	"context"
	"testing"

	"github.com/loadproof/loadproof/internal/result"
)

// TestOnIntervalNamesThePhase: Options.OnInterval reaches every phase's runner, and each interval
// arrives with the phase it belongs to.
func TestOnIntervalNamesThePhase(t *testing.T) {
	p, out := setup(t)
	r := &fakeRunner{hook: func(ctx context.Context, run PhaseRun) {
		if run.OnInterval == nil {
			t.Errorf("phase %d: the runner got no interval hook", run.Index)
			return
		}
		run.OnInterval(&result.Interval{T: float64(run.Index)})
	}}
	o := opts(out, r)
	var got []int
	o.OnInterval = func(run PhaseRun, iv *result.Interval) {
		if int(iv.T) != run.Index {
			t.Errorf("interval of phase %v arrived as phase %d", iv.T, run.Index)
		}
		got = append(got, run.Index)
	}
	if _, err := Execute(context.Background(), p, o); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(p.Phases) {
		t.Errorf("intervals from phases %v, want one from each of %d", got, len(p.Phases))
	}
}
