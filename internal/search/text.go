package search

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the search as a summary: every step with its trials, then the knee, the bracket,
// the confidence and what broke first.
func (r *Result) WriteText(w io.Writer) {
	c := &r.Config
	fmt.Fprintf(w, "search: --vary %s from %s to %s, growth ×%g, resolution %.3g%%, %d trial(s) a step, SLO %s\n",
		c.Vary, FormatValue(c.From), FormatValue(c.To), c.Growth, c.Resolution*100, c.Trials, c.SLO.Text)
	if t := r.WarmUp; t != nil {
		fmt.Fprintf(w, "  warm-up %s %s (unscored): %d ops (%d ok, %d refused) in %.1fs, p50 %.3g ms, p99 %.3g ms\n",
			c.Vary, FormatValue(c.From), t.Total, t.Success, t.Refused, t.Secs, t.P50Ms, t.P99Ms)
	}
	for _, st := range r.Steps {
		verdict := "PASS"
		if !st.Passed {
			verdict = fmt.Sprintf("FAIL (%.0f%% of trials held)", st.Held*100)
		}
		fmt.Fprintf(w, "  step %2d %-6s %s %-10s %s\n", st.Index, st.Phase, c.Vary, FormatValue(st.Value), verdict)
		for _, t := range st.Trials {
			var broke []string
			for _, tr := range t.Terms {
				if !tr.Held {
					broke = append(broke, fmt.Sprintf("%s (observed %.4g)", tr.Term, tr.Observed))
				}
			}
			note := ""
			if len(broke) > 0 {
				note = "; broke " + strings.Join(broke, ", ")
			}
			if t.RunFailed {
				note += "; the run succeeded at nothing"
			}
			if len(t.GeneratorLimited) > 0 {
				note += "; GENERATOR-LIMITED: " + strings.Join(t.GeneratorLimited, "; ")
			}
			fmt.Fprintf(w, "      trial %d: %d ops (%d ok, %d refused) in %.1fs, p50 %.3g ms, p99 %.3g ms%s\n",
				t.Trial, t.Total, t.Success, t.Refused, t.Secs, t.P50Ms, t.P99Ms, note)
		}
	}
	switch {
	case r.Knee == nil:
		fmt.Fprintf(w, "knee: none: the SLO failed at the first value (%s %s)\n", c.Vary, FormatValue(c.From))
	case r.FirstFail == nil || r.LastPass == nil:
		fmt.Fprintf(w, "knee: at least %s %s (the ceiling passed; raise --to to find the knee)\n", c.Vary, FormatValue(*r.Knee))
	default:
		fmt.Fprintf(w, "knee: %s %s (bracket: last pass %s, first fail %s)\n", c.Vary, FormatValue(*r.Knee), FormatValue(*r.LastPass), FormatValue(*r.FirstFail))
	}
	if len(r.BrokeFirst) > 0 && r.FirstFail != nil {
		fmt.Fprintf(w, "broke first at %s %s: %s\n", c.Vary, FormatValue(*r.FirstFail), strings.Join(r.BrokeFirst, ", "))
	}
	fmt.Fprintf(w, "confidence: %s\n", r.Confidence.Statement)
	fmt.Fprintf(w, "%d trials in %d steps, %s; stopped: %s\n", r.TrialCount, len(r.Steps), r.EndedAt.Sub(r.StartedAt).Round(100_000_000), r.Stopped)
	if r.Aborted != "" {
		fmt.Fprintf(w, "ABORTED: %s\n", r.Aborted)
	}
}
