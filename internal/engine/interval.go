package engine

import (
	"time"

	"github.com/loadproof/loadproof/internal/result"
)

// Interval lengths. A run's timeline is drawn from its interval snapshots, so a run of a few seconds
// at one snapshot a second is a handful of dots; 100 ms snapshots give it a shape. Past FineFor the
// fine snapshots are joined into 1 s ones (Config.Interval = AutoInterval), which keeps a long run's
// result and its live observers' load what they were. The length is recorded in the result
// (Envelope.IntervalSecs, and each interval's Secs), and every reader divides by it.
const (
	// AutoInterval, as Config.Interval, selects FineInterval snapshots for the first FineFor of the
	// run and 1 s ones after.
	AutoInterval time.Duration = -1
	// FineInterval is the snapshot length of a run younger than FineFor.
	FineInterval = 100 * time.Millisecond
	// FineFor is how long a run keeps FineInterval snapshots.
	FineFor = 30 * time.Second
)

// IntervalFor returns the snapshot length for a run planned to last planned: FineInterval under
// FineFor, 1 s from it, AutoInterval when the length is not known in advance (0). An explicit
// interval a user asked for wins over it; a command passes that instead.
func IntervalFor(planned time.Duration) time.Duration {
	switch {
	case planned <= 0:
		return AutoInterval
	case planned < FineFor:
		return FineInterval
	default:
		return time.Second
	}
}

// coarsen joins fine snapshots into 1 s ones: the intervals that start in the same whole second of
// the run become one (result.Rebinned: a tick the runtime dropped makes one fine interval longer,
// never moves it into another second).
func coarsen(ivs []result.Interval) []result.Interval {
	return result.Rebinned(ivs, time.Second.Seconds())
}
