package report

import (
	"io"
	"strconv"

	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/result"
)

// What a report says about a run's cost (docs/cost.md): the text summary's "cost:" line and the
// HTML page's cost tile with its rows. Both are drawn from the cost the result file records, which
// its reader has already recomputed from the file's own figures (linkkeysresult.Read,
// keycastresult.Parse). A run priced at nothing shows nothing about cost.

// costText is the run's "cost:" line, "" when it records no cost.
func costText(e *result.Envelope) string {
	if e == nil || e.Cost == nil {
		return ""
	}
	return SanitizeText(e.Cost.Line())
}

// writeCost writes the run's "cost:" line, nothing when it records no cost.
func writeCost(w io.Writer, e *result.Envelope) {
	if s := costText(e); s != "" {
		_, _ = io.WriteString(w, s+"\n")
	}
}

// CostView is the HTML page's cost tile: the run's cost (Total, with its label) and the rows that
// break it down (each side, each unit of proven capacity), every figure already written out.
type CostView struct {
	Total string      `json:"total"`
	Label string      `json:"label"`
	Rows  [][2]string `json:"rows"`
}

// costView is the tile of a run's cost, nil when it records none.
func costView(e *result.Envelope) *CostView {
	if e == nil || e.Cost == nil {
		return nil
	}
	c := e.Cost
	secs := strconv.FormatFloat(c.Seconds, 'g', 6, 64)
	v := &CostView{Total: cost.Money(c.Total, c.Currency), Label: "cost of the run (" + secs + " s)"}
	hours := func(h float64) string { return strconv.FormatFloat(h, 'g', 4, 64) + " machine-hours" }
	if s := c.Load; s != nil {
		v.Rows = append(v.Rows, [2]string{"Load machines (" + strconv.Itoa(len(s.PerHour)) + ")",
			cost.Money(s.Cost, c.Currency) + " over " + hours(s.MachineHours) + " at " + cost.Money(costSum(s.PerHour), c.Currency) + " per hour"})
	}
	if s := c.Server; s != nil {
		v.Rows = append(v.Rows, [2]string{"Server machine",
			cost.Money(s.Cost, c.Currency) + " over " + hours(s.MachineHours) + " at " + cost.Money(costSum(s.PerHour), c.Currency) + " per hour"})
	}
	for _, u := range c.Units {
		text := cost.Money(u.Total, c.Currency)
		if c.Load != nil && c.Server != nil {
			text += " (load " + cost.Money(u.Load, c.Currency) + ", server " + cost.Money(u.Server, c.Currency) + ")"
		}
		text += " — " + provenText(u)
		v.Rows = append(v.Rows, [2]string{"Cost " + cost.UnitLabel(u.Name), text})
	}
	return v
}

func costSum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// provenText says what a unit's capacity figure is.
func provenText(u cost.Unit) string {
	n := strconv.FormatFloat(u.Capacity, 'f', -1, 64)
	switch u.Name {
	case cost.UnitHeld10k:
		return n + " connections held"
	case cost.UnitMillionRequests:
		return n + " requests served"
	case cost.Unit1kHandshakesPerSec:
		return strconv.FormatFloat(u.Capacity, 'g', 6, 64) + " handshakes/s sustained"
	}
	return n
}
