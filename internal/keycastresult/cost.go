package keycastresult

import "github.com/loadproof/loadproof/internal/cost"

// CostCapacity is the capacity a run proved, as its cost divides it (docs/cost.md): the requests
// it served successfully (refusals, failures and requests cut off excluded), read from its summary,
// never from its cost, so a recorded cost can be recomputed (Parse).
func (r *Results) CostCapacity() cost.Capacity {
	return cost.Capacity{Requests: int64(r.Summary.SuccessfulRequests)}
}
