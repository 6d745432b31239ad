package admit

import (
	"sync/atomic"
	"time"
)

// Clock is a monotonic time source. Now returns the time elapsed since an
// arbitrary fixed origin; only differences between two readings matter.
type Clock interface {
	Now() time.Duration
}

type systemClock struct{ origin time.Time }

// Now reads the monotonic clock reading carried by origin.
func (c systemClock) Now() time.Duration { return time.Since(c.origin) }

// SystemClock returns a Clock backed by the runtime's monotonic clock, with its
// origin at the moment of the call.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

// ManualClock is a Clock that moves only when told to, for tests. Its zero
// value reads 0 and it is safe for concurrent use.
type ManualClock struct{ now atomic.Int64 }

// Now returns the current manual reading.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d. A negative d moves it back, which a
// real monotonic clock never does; the limiter treats time that runs
// backwards as no time passing.
func (c *ManualClock) Advance(d time.Duration) { c.now.Add(int64(d)) }

// Set moves the clock to the absolute reading d.
func (c *ManualClock) Set(d time.Duration) { c.now.Store(int64(d)) }
