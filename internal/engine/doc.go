// Package engine runs load: the closed model (N workers, each one operation after another) and the
// open model (a constant or ramping arrival rate, latency measured from the intended send time so
// coordinated omission is corrected), ramp-up, bounds by duration and by count, segments, live stop
// conditions over a sliding window, progress, interval snapshots, and process fan-out; several
// workloads in one run are scenarios (ExecuteScenarios), each with its own start offset, on one
// interval clock with one server sampler and one stop.
//
// A driver supplies one operation and classifies its outcome (see Driver); everything else is the
// engine's. The model is fortio's Runnable and vegeta's Attacker: the engine never knows the protocol,
// and what it measures is a result.Envelope that merges exactly across workers, processes and
// machines.
package engine

import "github.com/loadproof/loadproof/internal/result"

// Segment identifies one share of a run split into Count parts (see result.Segment).
type Segment = result.Segment

// Whole is the single segment that covers a whole run.
var Whole = result.Whole

// Split returns all n segments of a run.
func Split(n int) []Segment { return result.Split(n) }

// CeilDiv returns a/b rounded up, or MaxInt64 when b <= 0; callers size worker pools with it.
func CeilDiv(a, b int64) int64 {
	if b <= 0 {
		return 1<<63 - 1
	}
	return (a + b - 1) / b
}
