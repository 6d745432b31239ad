package evidence

import (
	"encoding/json"
	"fmt"

	"github.com/loadproof/loadproof/internal/cost"
)

// A result file (or an evidence bundle's phase results) may record what the run cost
// (result.Envelope.Cost, docs/cost.md). Its reader recomputes that cost from the file's own prices,
// wall time and figures and refuses a file whose cost disagrees (linkkeysresult.Read,
// keycastresult.Parse), so the ReadResult and Recompute that Verify is given check it; these say
// so in the findings.

// recordedCost returns the cost a result file's JSON records, nil when none.
func recordedCost(data []byte) *cost.Cost {
	var v struct {
		Cost *cost.Cost `json:"cost"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v.Cost
}

// costHeld is the finding for a result file whose cost was recomputed, "" when it records none.
func costHeld(data []byte) string {
	c := recordedCost(data)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("cost recomputes from the run's own prices, wall time and figures (%s)", costSummary(c))
}

// bundleCostHeld is the finding for a bundle whose phases record costs, "" when none does.
func bundleCostHeld(b *Bundle) string {
	var parts []*cost.Cost
	for _, ph := range b.Evidence.Phases {
		if c := recordedCost(ph.Results); c != nil {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	total, err := cost.Sum(parts...)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("the cost of each of %d priced phases recomputes from its results (all together %s)", len(parts), costSummary(total))
}

func costSummary(c *cost.Cost) string {
	return cost.Money(c.Total, c.Currency) + " for " + fmt.Sprintf("%.4g", c.Seconds) + " s"
}
