package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/hist"
)

// SummaryRow is one report's line on a combined page's summary tab: its verdict, the figure the
// run exists to produce and what a reader should not miss. It is computed from the report's own
// data (the page's embedded model), so a summary says nothing the report does not.
type SummaryRow struct {
	Name string
	// Tab is the part's tab name, as #tab=NAME links it.
	Tab string
	// Verdict is a word or two ("ok", "failures", "passed", "nothing succeeded"); OK says whether
	// it is good news.
	Verdict string
	OK      bool
	// Key is the run's key figure, with its unit.
	Key      string
	Warnings []string
}

// Summarize computes a report's summary row from its model.
func Summarize(name string, m *Model) SummaryRow {
	row := SummaryRow{Name: name}
	if m == nil || len(m.Runs) == 0 || m.Runs[0] == nil {
		row.Verdict = "no data"
		return row
	}
	h := m.Runs[0].Headline
	row.Key = keyFigure(m.Runs[0])
	if h.Refused > 0 {
		w := "refused by design: " + hist.CountText(h.Refused)
		if len(h.RefusedBy) > 0 {
			var by []string
			for _, k := range slices.Sorted(maps.Keys(h.RefusedBy)) {
				by = append(by, k+" "+hist.CountText(h.RefusedBy[k]))
			}
			w += " (" + strings.Join(by, ", ") + ")"
		}
		row.Warnings = append(row.Warnings, w+"; not failures")
	}
	if h.Failures > 0 {
		w := "failures: " + hist.CountText(h.Failures)
		if n := h.Operations - h.Refused; n > 0 {
			w += " (" + strconv.FormatFloat(100*float64(h.Failures)/float64(n), 'f', 2, 64) + " % of those not refused)"
		}
		row.Warnings = append(row.Warnings, w)
	}
	if h.Stop != nil {
		row.Warnings = append(row.Warnings, "stopped early: "+h.Stop.Reason)
	}
	if c := m.Capacity; c != nil {
		row.OK = c.Passed
		row.Verdict = "failed"
		if c.Passed {
			row.Verdict = "passed"
		}
		if c.Rehearsal {
			row.Verdict += " (rehearsal: not certifiable)"
		}
		for _, p := range c.Phases {
			if p == nil {
				continue
			}
			if !p.Passed {
				row.Warnings = append(row.Warnings, "phase "+p.Name+" failed")
			}
			if p.Overran {
				row.Warnings = append(row.Warnings, fmt.Sprintf("phase %s OVERRAN: ran %s s of %s planned", p.Name, figText(float64(p.ElapsedSecs)), figText(float64(p.PlannedSecs))))
			}
		}
		if c.StoppedAfterPhase != "" {
			row.Warnings = append(row.Warnings, "stopped after phase "+c.StoppedAfterPhase)
		}
		return row
	}
	switch {
	case h.Operations == 0:
		row.Verdict = "no operations"
	case h.Succeeded == 0:
		row.Verdict = "nothing succeeded"
	case h.Stop != nil:
		row.Verdict = "stopped early"
	case h.Failures > 0:
		row.Verdict = "failures"
	default:
		row.Verdict, row.OK = "ok", true
	}
	return row
}

// keyFigure is what the run exists to produce: served operations per second (established
// connections for a connections run) and the latency of the successes.
func keyFigure(r *RunView) string {
	h := r.Headline
	var s string
	switch r.Command {
	case "connections":
		s = hist.CountText(h.Succeeded) + " connections established"
	case "handshake-bench":
		s = figText(float64(h.Throughput)) + " handshakes/s"
	case "ddos":
		s = hist.CountText(h.Succeeded) + " admitted"
	default:
		s = figText(float64(h.Throughput)) + " served/s"
	}
	if h.Kind != "" && !math.IsNaN(float64(h.P50Ms)) && h.Succeeded > 0 {
		s += ", p50 " + latencyMs(float64(h.P50Ms)) + ", p99 " + latencyMs(float64(h.P99Ms)) + " (" + h.Kind + ")"
	}
	return s
}

// figText writes a figure with three significant digits at most below 1000, whole above.
func figText(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a >= 1000:
		return hist.CountText(int64(math.Round(v)))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// latencyMs writes a latency given in milliseconds in the unit that suits it (µs, ms, s).
func latencyMs(ms float64) string {
	if math.IsNaN(ms) {
		return "—"
	}
	return hist.MsText(ms)
}

// PageModel reads back the model a page (Page, HTML) embeds.
func PageModel(page []byte) (*Model, error) {
	const open = `<script id="lp-data" type="application/json">`
	i := bytes.Index(page, []byte(open))
	if i < 0 {
		return nil, errors.New("report: the page has no data element (is it a loadproof report page?)")
	}
	rest := page[i+len(open):]
	j := bytes.Index(rest, []byte("</script>"))
	if j < 0 {
		return nil, errors.New("report: the page's data element is not closed (a truncated page?)")
	}
	var m Model
	if err := json.Unmarshal(rest[:j], &m); err != nil {
		return nil, fmt.Errorf("report: the page's data does not decode: %w", err)
	}
	return &m, nil
}

// tabName makes a part's name into its #tab= name: lower case letters, digits and dashes, unique
// among taken.
func tabName(name string, taken map[string]bool) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if s == "" {
		s = "part"
	}
	t := s
	for i := 2; taken[t]; i++ {
		t = s + "-" + strconv.Itoa(i)
	}
	taken[t] = true
	return t
}
