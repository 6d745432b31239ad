package linkkeysload

import (
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

// Under load an engine's one-second ticks fall behind the wall clock, so an interval's start may
// be past its index: figures placed by wall-clock second must keep the timeline in order.
func TestCombinedTimelineStaysInOrder(t *testing.T) {
	start := time.Now()
	res := Result{}
	res.Format, res.Harness, res.Command = result.Format, "linkkeys", CmdCombined
	res.Intervals = []result.Interval{{T: 0, Secs: 1}, {T: 3.5, Secs: 1}}
	attachSamples(&res, start, []timedSample{{at: start.Add(2500 * time.Millisecond), m: map[string]float64{"x": 1}}, {at: start.Add(4 * time.Second), m: map[string]float64{"x": 2}}})
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(res.Intervals) != 5 || res.Intervals[2].Server["x"] != 1 || res.Intervals[4].Server["x"] != 2 {
		t.Fatalf("%+v", res.Intervals)
	}
	ivs := []result.Interval{{T: 0}, {T: 24}, {T: 22}, {T: 23}}
	monotone(ivs)
	if ivs[2].T != 24 || ivs[3].T != 24 {
		t.Fatalf("%+v", ivs)
	}
}
