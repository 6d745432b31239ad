package report

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/loadproof/loadproof/internal/compare"
	"github.com/loadproof/loadproof/internal/textclip"
)

// The comparison and search pages' scripts and styles (assets/compare.js, assets/search.js, the
// DOM helpers both draw with in assets/statpages.js, and assets/statpages.css), inlined beside the
// report's own styles so each page is one file.
var (
	//go:embed assets/statpages.js
	statPagesJS string
	//go:embed assets/compare.js
	compareJS string
	//go:embed assets/search.js
	searchJS string
	//go:embed assets/statpages.css
	statPagesCSS string
)

// Bounds on what a comparison or search page carries: the files come from outside, so a crafted
// one (ten thousand latency kinds, a megabyte-long name) costs a bounded page.
const (
	// MaxCompareRows caps the metrics drawn; the rest are counted in a note.
	MaxCompareRows = 400
	// maxPageText caps every string the pages show (names, notes, terms, command arguments).
	maxPageText = 300
	// maxPageList caps every list of strings (files, notes, failed gates, reasons).
	maxPageList = 64
)

// CompareInfo is what the command line knows of a comparison beyond the comparison itself.
type CompareInfo struct {
	// Title heads the page; empty derives one from the command.
	Title string
	// FilesA and FilesB are the result files of each side, in the order given.
	FilesA, FilesB []string
	// Command is the runs' "harness command" (e.g. "keycast run").
	Command string
	// Seed is the bootstrap's seed, shown so the intervals can be reproduced; 0 is unstated.
	Seed uint64
}

// CompareModel is the comparison page's data: everything the page shows, computed here.
type CompareModel struct {
	Title      string       `json:"title"`
	Command    string       `json:"command"`
	FilesA     []string     `json:"files_a"`
	FilesB     []string     `json:"files_b"`
	RunsA      int          `json:"runs_a"`
	RunsB      int          `json:"runs_b"`
	Confidence num          `json:"confidence"`
	Iterations int          `json:"iterations"`
	Seed       string       `json:"seed,omitempty"` // a string: JavaScript numbers lose a uint64's digits
	Metrics    []CompareRow `json:"metrics"`
	Notes      []string     `json:"notes,omitempty"`
	Gate       *GateView    `json:"gate,omitempty"`
	// Counts of each verdict, for the summary line.
	Better       int `json:"better"`
	Worse        int `json:"worse"`
	NoChange     int `json:"no_change"`
	Inconclusive int `json:"inconclusive"`
	// Refused says why no comparison was made (the files could not be compared); nothing else is
	// drawn then.
	Refused string `json:"refused,omitempty"`
}

// CompareRow is one metric: its values on each side, the change of B against A with its interval,
// the verdict, and the allowance of a gate that judges it.
type CompareRow struct {
	Name     string `json:"name"`
	Label    string `json:"label"`
	Unit     string `json:"unit"`
	Higher   bool   `json:"higher_is_better"`
	A        num    `json:"a"`
	B        num    `json:"b"`
	Change   num    `json:"change"`
	Low      num    `json:"low"`
	High     num    `json:"high"`
	Absolute bool   `json:"absolute,omitempty"`
	// Verdict is better, worse, no change, or inconclusive (no interval could be drawn).
	Verdict string `json:"verdict"`
	// Why says what the verdict rests on, in words.
	Why string `json:"why"`
	// Allowance is the gate's limit on this metric's change (absent when no gate names it).
	Allowance *Allowance `json:"allowance,omitempty"`
}

// Allowance is one gate item on a row: the change must stay above (">") or below ("<") Limit.
type Allowance struct {
	Op     string `json:"op"`
	Limit  num    `json:"limit"`
	Text   string `json:"text"`
	Failed bool   `json:"failed"`
}

// GateView is the gate's outcome.
type GateView struct {
	Passed bool     `json:"passed"`
	Gates  []string `json:"gates"`
	Failed []string `json:"failed,omitempty"`
}

// pageText makes one outside string fit to show: control and direction-changing characters
// escaped (Sanitize), then clipped. The page sets it as text, never as markup.
func pageText(s string) string { return textclip.String(Sanitize(s), maxPageText) }

// pageList is pageText over a list, capped at maxPageList items (the last says how many more).
func pageList(in []string) []string {
	var out []string
	for i, s := range in {
		if i == maxPageList-1 && len(in) > maxPageList {
			out = append(out, fmt.Sprintf("… and %d more", len(in)-i))
			break
		}
		out = append(out, pageText(s))
	}
	return out
}

// BuildCompareModel turns a comparison into the page's data.
func BuildCompareModel(c *compare.Comparison, info CompareInfo) (*CompareModel, error) {
	if c == nil {
		return nil, errors.New("report: no comparison to draw")
	}
	m := &CompareModel{Title: pageText(info.Title), Command: pageText(info.Command),
		FilesA: pageList(info.FilesA), FilesB: pageList(info.FilesB), RunsA: c.RunsA, RunsB: c.RunsB,
		Confidence: num(c.Confidence), Iterations: c.Iterations, Notes: pageList(c.Notes)}
	if info.Seed != 0 {
		m.Seed = fmt.Sprint(info.Seed)
	}
	if m.Title == "" {
		m.Title = "loadproof compare"
		if m.Command != "" {
			m.Title += ": " + m.Command
		}
	}
	// Each gate item is drawn on the row it judges, failed when the whole interval lies past it
	// (the rule compare.ApplyGate applies).
	allow := map[string][]compare.Gate{}
	if c.Gate != nil {
		for _, g := range c.Gate.Gates {
			if mt := c.Find(g.Metric); mt != nil {
				allow[mt.Name] = append(allow[mt.Name], g)
			}
		}
	}
	for i, mt := range c.Metrics {
		if i == MaxCompareRows {
			m.Notes = append(m.Notes, fmt.Sprintf("%d more metrics are not drawn (the page shows %d); loadproof compare --format json lists them all", len(c.Metrics)-i, MaxCompareRows))
			break
		}
		r := CompareRow{Name: pageText(mt.Name), Label: pageText(metricLabel(mt.Name)), Unit: pageText(mt.Unit), Higher: mt.Higher,
			A: num(mt.A), B: num(mt.B), Change: num(mt.Change), Low: num(mt.Low), High: num(mt.High),
			Absolute: mt.Absolute, Verdict: verdictOf(mt.Verdict)}
		if math.IsNaN(mt.Low) || math.IsNaN(mt.High) {
			r.Verdict = Inconclusive
		}
		r.Why = why(mt, r.Verdict, c.Confidence)
		if gs := allow[mt.Name]; len(gs) > 0 {
			// One allowance a row is drawn; a second gate item on one metric is listed in the gate.
			g := gs[0]
			r.Allowance = &Allowance{Op: g.Op, Limit: num(g.Limit), Text: pageText(fmt.Sprintf("%s%s%+g%%", g.Metric, g.Op, g.Limit)),
				Failed: !math.IsNaN(mt.Low) && !math.IsNaN(mt.High) && (g.Op == ">" && mt.High < g.Limit || g.Op == "<" && mt.Low > g.Limit)}
		}
		switch r.Verdict {
		case compare.Better:
			m.Better++
		case compare.Worse:
			m.Worse++
		case Inconclusive:
			m.Inconclusive++
		default:
			m.NoChange++
		}
		m.Metrics = append(m.Metrics, r)
	}
	if g := c.Gate; g != nil {
		gv := &GateView{Passed: g.Passed, Failed: pageList(g.Failed)}
		var gates []string
		for _, x := range g.Gates {
			gates = append(gates, fmt.Sprintf("%s%s%+g%%", x.Metric, x.Op, x.Limit))
		}
		gv.Gates = pageList(gates)
		m.Gate = gv
	}
	return m, nil
}

// Inconclusive is the page's verdict on a metric with no interval: too few resamples had a value
// (a latency kind with no successes on a side, say), so nothing can be said either way.
const Inconclusive = "inconclusive"

// why says in words what a metric's verdict rests on.
func why(mt compare.Metric, verdict string, confidence float64) string {
	pct := fmt.Sprintf("%g%%", math.Round(confidence*1000)/10)
	unit := "%"
	if mt.Absolute {
		unit = " points"
	}
	dir := "lower is better"
	if mt.Higher {
		dir = "higher is better"
	}
	// The figures as the page carries them (three decimals), so the words match the table.
	r3 := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	iv := fmt.Sprintf("[%+.2f%s, %+.2f%s]", r3(mt.Low), unit, r3(mt.High), unit)
	switch {
	case verdict == Inconclusive:
		return "no interval: fewer than half the resamples had a value on both sides (nothing measured, or a zero to compare against), so nothing can be said at " + pct
	case mt.A == 0 && mt.B == 0:
		return "zero on both sides: nothing of it was measured in either, so nothing changed"
	case verdict == compare.Better, verdict == compare.Worse:
		side := "above"
		if mt.High < 0 {
			side = "below"
		}
		return fmt.Sprintf("the whole %s interval %s lies %s zero (%s)", pct, iv, side, dir)
	}
	return fmt.Sprintf("the %s interval %s holds zero: the change is within the noise of the runs", pct, iv)
}

// verdictOf keeps the three verdicts and names anything else "no change" (a crafted comparison).
func verdictOf(v string) string {
	switch v {
	case compare.Better, compare.Worse:
		return v
	}
	return compare.NoChange
}

// metricLabel spells a metric's name for a reader: "p99:latency" is "p99 latency".
func metricLabel(name string) string {
	switch name {
	case "throughput":
		return "throughput (successes/s)"
	case "error_rate":
		return "error rate"
	case "refusal_rate":
		return "refusal rate (shed by design)"
	}
	if p, kind, ok := strings.Cut(name, ":"); ok {
		return p + " " + kind
	}
	return name
}

// RefusedComparePage is the page of a comparison that could not be made: it says why (runs of
// different commands, a run without interval snapshots, a gate naming a metric the runs lack).
func RefusedComparePage(reason string, info CompareInfo) ([]byte, error) {
	m := &CompareModel{Title: pageText(info.Title), Command: pageText(info.Command), FilesA: pageList(info.FilesA),
		FilesB: pageList(info.FilesB), RunsA: len(info.FilesA), RunsB: len(info.FilesB),
		Refused: textclip.String(Sanitize(reason), 4*maxPageText)}
	if m.Title == "" {
		m.Title = "loadproof compare: refused"
	}
	return statPage(m.Title, m, compareJS)
}

// ComparePage draws a comparison as one self-contained page: per metric the change of B against A
// with its confidence interval as a bar against zero, the gate's allowance, the verdict coloured,
// the notes (one run a side) and the gate's verdict.
func ComparePage(c *compare.Comparison, info CompareInfo) ([]byte, error) {
	m, err := BuildCompareModel(c, info)
	if err != nil {
		return nil, err
	}
	return statPage(m.Title, m, compareJS)
}

// statPage writes a comparison or search page: the report's styles, the pages' own, the data as
// JSON in a script element, the shared DOM helpers and the script that draws it. It carries the static report's policy:
// nothing loads, connects or submits.
func statPage(title string, model any, script string) ([]byte, error) {
	data, err := json.Marshal(model) // escapes <, > and &: safe inside <script>
	if err != nil {
		return nil, fmt.Errorf("report: encoding the page's data: %w", err)
	}
	var b strings.Builder
	b.Grow(len(reportCSS) + len(statPagesCSS) + len(statPagesJS) + len(script) + len(data) + 2048)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"" + StaticCSP + "\">\n")
	b.WriteString("<meta name=\"generator\" content=\"loadproof report\">\n")
	b.WriteString("<title>" + html.EscapeString(title) + "</title>\n")
	b.WriteString("<style id=\"lp-css\">\n" + reportCSS + "\n</style>\n")
	b.WriteString("<style id=\"lp-stat-css\">\n" + statPagesCSS + "\n</style>\n")
	b.WriteString("</head>\n<body>\n<div id=\"app\"><noscript>This page draws with JavaScript; the data is in the script element \"lp-data\".</noscript></div>\n")
	b.WriteString("<script id=\"lp-data\" type=\"application/json\">")
	b.Write(data)
	b.WriteString("</script>\n")
	// The shared helpers first: the page's script finds them (lpDOM) when it runs.
	b.WriteString("<script id=\"lp-stat-dom\">\n" + statPagesJS + "\n</script>\n")
	b.WriteString("<script id=\"lp-app\">\n" + script + "\n</script>\n")
	b.WriteString("</body>\n</html>\n")
	return []byte(b.String()), nil
}
