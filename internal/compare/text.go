package compare

import (
	"fmt"
	"io"
	"math"
)

// WriteText prints the comparison as a table: one row per metric with A, B, the change and its
// interval, and the verdict; then the notes and the gate.
func (c *Comparison) WriteText(w io.Writer) {
	fmt.Fprintf(w, "compare: %d run(s) A vs %d run(s) B, %.0f%% confidence, %d bootstrap resamples over runs and their seconds\n",
		c.RunsA, c.RunsB, c.Confidence*100, c.Iterations)
	fmt.Fprintf(w, "%-26s %12s %12s %10s %24s  %s\n", "metric", "A", "B", "change", "interval", "verdict")
	for _, m := range c.Metrics {
		unit := "%"
		if m.Absolute {
			unit = " pts"
		}
		iv := "-"
		if !math.IsNaN(m.Low) {
			iv = fmt.Sprintf("[%+.2f%s, %+.2f%s]", m.Low, unit, m.High, unit)
		}
		fmt.Fprintf(w, "%-26s %12s %12s %10s %24s  %s\n", m.Name, value(m.A, m.Unit), value(m.B, m.Unit), fmt.Sprintf("%+.2f%s", m.Change, unit), iv, m.Verdict)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if g := c.Gate; g != nil {
		if g.Passed {
			fmt.Fprintf(w, "gate: passed (%d allowance(s))\n", len(g.Gates))
		} else {
			for _, f := range g.Failed {
				fmt.Fprintf(w, "gate: FAILED: %s\n", f)
			}
		}
	}
}

func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch unit {
	case "share":
		return fmt.Sprintf("%.3f%%", v*100)
	case "ms":
		return fmt.Sprintf("%.3fms", v)
	}
	return fmt.Sprintf("%.1f%s", v, unit)
}
