package result

import (
	"github.com/loadproof/loadproof/internal/cost"
)

// CostSeconds is the wall time a run's cost is priced over: from its start to its end, 0 when
// either is missing.
func (e *Envelope) CostSeconds() float64 {
	if e.StartedAt.IsZero() || !e.EndedAt.After(e.StartedAt) {
		return 0
	}
	// Without the monotonic readings, so the figure is the one the file's times give back.
	return e.EndedAt.Round(0).Sub(e.StartedAt.Round(0)).Seconds()
}

// SetCost prices the run: load holds one price per load machine, server the server machine's
// price, capa what the run proved (read from the harness's own figures). With no price given it
// leaves Cost nil.
func (e *Envelope) SetCost(load []cost.Price, server cost.Price, capa cost.Capacity) error {
	c, err := cost.Compute(cost.Inputs{Seconds: e.CostSeconds(), Load: load, Server: server, Capacity: capa})
	if err != nil {
		return err
	}
	e.Cost = c
	return nil
}

// CheckCost recomputes a recorded cost from its own prices, the run's wall time and capa (the
// capacity read from the harness's figures, never from the cost), and says what disagrees. A
// result without a cost passes.
func (e *Envelope) CheckCost(capa cost.Capacity) error {
	return cost.Check(e.Cost, e.CostSeconds(), capa)
}
