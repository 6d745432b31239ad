package keycastload

import "time"

// monoClock reads the time with one clock reading instead of time.Now's two (the wall clock and
// the monotonic clock, each a vDSO call: about 1.7 % of the generator's CPU at two readings per
// request, docs/benchmarks.md): it reads the monotonic clock only and adds the elapsed time to a
// wall-clock reading taken once. The times it returns carry the monotonic reading, so every
// difference (latency, idle time, deadline) is as exact as time.Now's; their wall-clock part
// ignores adjustments of the system clock made after the epoch, which no figure here uses.
type monoClock struct{ epoch time.Time }

func newMonoClock() monoClock { return monoClock{epoch: time.Now()} }

// now returns the current time.
func (c monoClock) now() time.Time { return c.epoch.Add(time.Since(c.epoch)) }
