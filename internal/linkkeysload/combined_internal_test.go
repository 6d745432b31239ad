package linkkeysload

import (
	"testing"

	"github.com/loadproof/loadproof/internal/result"
)

// A fanned-out combined run's server samples come from the parent's run, on a clock started with
// the workers': each lands in the interval of its index, and intervals the workers' results end
// before are added after their last, keeping the timeline in order.
func TestAttachServerKeepsTheTimelineInOrder(t *testing.T) {
	res := Result{}
	res.Format, res.Harness, res.Command = result.Format, "linkkeys", CmdCombined
	res.Intervals = []result.Interval{{T: 0, Secs: 1}, {T: 1.2, Secs: 1}}
	run := []result.Interval{{T: 0, Secs: 1}, {T: 1, Secs: 1}, {T: 2, Secs: 1, Server: map[string]float64{"x": 1}}, {T: 3, Secs: 0.5, Server: map[string]float64{"x": 2}}}
	attachServer(&res.Envelope, run)
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(res.Intervals) != 4 || res.Intervals[2].Server["x"] != 1 || res.Intervals[3].Server["x"] != 2 || res.Intervals[1].Server != nil {
		t.Fatalf("%+v", res.Intervals)
	}
	for i := 1; i < len(res.Intervals); i++ {
		if res.Intervals[i].T < res.Intervals[i-1].T {
			t.Fatalf("interval %d starts at %v, before %v", i, res.Intervals[i].T, res.Intervals[i-1].T)
		}
	}
	if res.Intervals[3].Secs != 0.5 {
		t.Fatalf("added interval %+v", res.Intervals[3])
	}
}
