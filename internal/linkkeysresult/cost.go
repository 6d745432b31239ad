package linkkeysresult

import (
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/result"
)

// CostCapacity is the capacity a result proved, as its cost divides it (docs/cost.md): the
// connections held at once (connections, a combined run's held stream), the handshake rate
// sustained (handshake-bench), the requests served with status 0 (request-bench). It is read from
// the result's own figures, never from its cost, so a recorded cost can be recomputed (Read).
func (r *Result) CostCapacity() cost.Capacity {
	var c cost.Capacity
	add := func(x *Result) {
		if x == nil {
			return
		}
		if h := x.Hold; h != nil {
			c.HeldConnections += h.Held
		}
		if h := x.Handshakes; h != nil {
			c.HandshakesPerSec += RustRate(h.Completed, h.DurationSecs)
		}
		if x.Command == CmdRequestBench || x.Requests != nil {
			c.Requests += x.Totals[result.ClassSuccess]
		}
	}
	if r.Combined != nil {
		for i := range r.Combined.Streams {
			add(r.Combined.Streams[i].Result)
		}
		return c
	}
	add(r)
	return c
}
