package report

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Formats of the report command beyond the upstream ones.
const (
	FormatHTML = "html"
	FormatHGRM = "hgrm"
)

// The page's scripts and styles, inlined so that the report is one file that works offline.
var (
	//go:embed assets/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uPlot.min.css
	uplotCSS string
	//go:embed assets/report.js
	reportJS string
	//go:embed assets/report.css
	reportCSS string
)

// UPlotVersion is the version of the embedded chart library (assets/uPlot.iife.min.js).
const UPlotVersion = "1.6.32"

// Source is one file a report is drawn from: a result file of either harness (one carrying the
// loadproof.result/v2 envelope) or a capacity evidence.json.
type Source struct {
	Name string
	Data []byte
}

// HTMLOptions selects how several sources are drawn.
type HTMLOptions struct {
	// Title heads the page; empty derives one from the sources.
	Title string
	// Compare draws two runs overlaid with the differences of their headline figures, instead of
	// merging the sources as segments of one run.
	Compare bool
}

// ErrNotEnvelope reports a file the HTML report cannot draw: it carries no interval snapshots.
var ErrNotEnvelope = errors.New("report: not a loadproof result (no loadproof.result/v2 envelope) nor a capacity evidence.json")

// loaded is one decoded source.
type loaded struct {
	name     string
	env      *result.Envelope
	keycast  *keycastresult.Results
	stop     *result.StopEvent
	evidence *evidence.Evidence
	// refused is a LinkKeys result's refusals by design by reason (its refused field).
	refused map[string]int64
}

// ParseSources parses sources handed over in memory as Open parses a file (Parse), each refusal
// prefixed "report: ".
func ParseSources(srcs []Source) ([]*File, error) {
	files := make([]*File, len(srcs))
	for i, s := range srcs {
		f, err := Parse(s.Name, s.Data)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		files[i] = f
	}
	return files, nil
}

// drawable is what a page draws of a file: a run's envelope (with its stop event and refusals)
// or a capacity bundle's evidence.
func drawable(f *File) (*loaded, error) {
	l := &loaded{name: f.Path}
	switch {
	case f.Evidence != nil:
		l.evidence = f.Evidence
	case f.Search != nil:
		return nil, fmt.Errorf("report: %s is a search file: report it on its own (loadproof report %s --format html draws its load-response page)", f.Path, f.Path)
	case f.Envelope != nil:
		l.env, l.keycast, l.stop, l.refused = f.Envelope, f.Keycast, f.Stop, f.Refused
	case f.Keycast != nil:
		return nil, fmt.Errorf("report: %s is a Keycast results file in the upstream schema: it has no interval snapshots to draw (%w)", f.Path, ErrNotEnvelope)
	default:
		return nil, fmt.Errorf("%w: %s is a %s file without one", ErrNotEnvelope, f.Path, f.Kind)
	}
	return l, nil
}

// BuildModel parses the sources (ParseSources) and computes the page's data.
func BuildModel(srcs []Source, opt HTMLOptions) (*Model, error) {
	files, err := ParseSources(srcs)
	if err != nil {
		return nil, err
	}
	return BuildModelFiles(files, opt)
}

// BuildModelFiles computes the page's data from files as Open read them.
func BuildModelFiles(files []*File, opt HTMLOptions) (*Model, error) {
	if len(files) == 0 {
		return nil, errors.New("report: no files to draw")
	}
	var ls []*loaded
	for _, f := range files {
		l, err := drawable(f)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	m := &Model{Title: opt.Title}
	for _, l := range ls {
		m.Files = append(m.Files, filepath.Base(l.name))
	}
	var evidence []*loaded
	for _, l := range ls {
		if l.evidence != nil {
			evidence = append(evidence, l)
		}
	}
	switch {
	case len(evidence) > 0:
		if len(ls) != 1 {
			return nil, errors.New("report: draw a capacity evidence bundle on its own (one evidence.json or bundle directory)")
		}
		if err := capacityModel(m, ls[0]); err != nil {
			return nil, err
		}
	case opt.Compare:
		if len(ls) != 2 {
			return nil, fmt.Errorf("report: --compare draws two runs; got %d files", len(ls))
		}
		m.Mode = "compare"
		for i, l := range ls {
			rv := singleRun(l)
			rv.Label = fmt.Sprintf("%s: %s", string(rune('A'+i)), filepath.Base(l.name))
			m.Runs = append(m.Runs, rv)
		}
		m.Compare = differences(m.Runs[0].Headline, m.Runs[1].Headline)
	case len(ls) == 1:
		m.Mode = "single"
		m.Runs = []*RunView{singleRun(ls[0])}
	default:
		m.Mode = "merged"
		ps := make([]result.Part, len(ls))
		for i, l := range ls {
			ps[i] = result.Part{Name: l.name, Envelope: l.env}
		}
		cov, err := result.CheckRun(ps)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		merged := &result.Envelope{}
		var stop *result.StopEvent
		for _, l := range ls {
			if err := merged.Merge(l.env); err != nil {
				return nil, fmt.Errorf("report: merging %s: %w", l.name, err)
			}
			if stop == nil {
				stop = l.stop
			}
		}
		merged.MarkPartial(cov.Missing)
		label := fmt.Sprintf("%d segments merged", len(ls))
		if merged.Partial {
			label += " — PARTIAL: segments " + result.SegmentList(merged.MissingSegments) + " missing"
		}
		refused := map[string]int64{}
		for _, l := range ls {
			for k, v := range l.refused {
				refused[k] += v
			}
		}
		rv := runView(label, merged, []part{{env: merged}}, stop, refused)
		if ls[0].keycast != nil {
			if kr, err := keycastMerged(ls); err == nil {
				rv.Extra = append(keycastExtra(kr), rv.Extra...)
			}
		}
		m.Runs = []*RunView{rv}
	}
	if m.Title == "" {
		r := m.Runs[0]
		m.Title = fmt.Sprintf("loadproof %s %s", r.Harness, r.Command)
		switch m.Mode {
		case "compare":
			m.Title += " — comparison"
		case "capacity":
			m.Title = "loadproof capacity profile " + m.Capacity.Profile
		}
	}
	return m, nil
}

func keycastMerged(ls []*loaded) (*keycastresult.Results, error) {
	parts := make([]*keycastresult.Results, len(ls))
	for i, l := range ls {
		if l.keycast == nil {
			return nil, errors.New("not all Keycast")
		}
		parts[i] = l.keycast
	}
	return keycastresult.Merge(parts)
}

func singleRun(l *loaded) *RunView {
	rv := runView(filepath.Base(l.name), l.env, []part{{env: l.env}}, l.stop, l.refused)
	if l.keycast != nil {
		rv.Extra = append(keycastExtra(l.keycast), rv.Extra...)
	}
	return rv
}

// capacityModel lays a bundle's phases end to end on one time axis (each at its start time after
// the first phase's start, so pauses between phases show), merges their figures for the headline,
// and lists their checks.
func capacityModel(m *Model, l *loaded) error {
	ev := l.evidence
	m.Mode = "capacity"
	cv := &CapacityView{Scope: ev.EvidenceScope, GeneratedAt: ev.GeneratedAt, Passed: ev.Passed,
		CertificationReady: ev.CertificationReady, StopReason: ev.StopReason, Blockers: ev.Blockers, StopAt: num(gap),
		Profile: ev.Plan.ProfileName, Target: ev.Plan.TargetURL, Rehearsal: Rehearsal(ev)}
	if ev.StoppedAfterPhase != nil {
		cv.StoppedAfterPhase = *ev.StoppedAfterPhase
	}
	whole := &result.Envelope{}
	var parts []part
	var first time.Time
	var cursor float64
	var refused map[string]int64
	for _, ph := range ev.Phases {
		pv := &PhaseView{Name: ph.Name, Kind: ph.Kind, Passed: ph.Passed, StopBreached: ph.StopBreached,
			Interrupted: ph.Interrupted, LiveStop: ph.LiveStop, Start: num(cursor), End: num(cursor),
			PlannedSecs: num(ph.PlannedSecs), ElapsedSecs: num(ph.ElapsedSecs), Overran: ph.Overran}
		if ph.Error != nil {
			pv.Error = *ph.Error
		}
		for _, c := range ph.Checks {
			pv.Checks = append(pv.Checks, CheckView{Metric: c.Metric, Comparison: c.Comparison, Observed: num(c.Observed), Limit: num(c.Limit), Outcome: c.Outcome})
		}
		for _, c := range ph.StopChecks {
			pv.Checks = append(pv.Checks, CheckView{Stop: true, Metric: c.Metric, Comparison: c.Comparison, Observed: num(c.Observed), Limit: num(c.Limit), Outcome: c.Outcome})
		}
		if r := phaseResults(ph); r != nil && r.Envelope != nil {
			env := r.Envelope
			off := cursor
			if !env.StartedAt.IsZero() {
				if first.IsZero() {
					first = env.StartedAt
				}
				off = max(env.StartedAt.Sub(first).Seconds(), cursor)
			}
			parts = append(parts, part{env: env, offset: off})
			end := off + env.Elapsed().Seconds()
			if n := len(env.Intervals); n > 0 {
				end = max(end, off+env.Intervals[n-1].T+env.Intervals[n-1].Secs)
			}
			pv.Start, pv.End = num(off), num(end)
			cursor = end
			pv.Headline = headlineOf(env.Totals, env.Histograms, env.Elapsed(), r.Stop, r.refused)
			refused = addTo(refused, r.refused)
			if pv.ElapsedSecs == 0 && !ph.Overran {
				pv.ElapsedSecs = num(env.Elapsed().Seconds()) // a bundle written before phases recorded it
			}
			// Phases are not segments of one run: sum their figures without the interval merge.
			whole.Totals = addTo(whole.Totals, env.Totals)
			whole.Causes = addTo(whole.Causes, env.Causes)
			for k, h := range env.Histograms {
				if whole.Histograms == nil {
					whole.Histograms = map[string]*hist.Histogram{}
				}
				if whole.Histograms[k] == nil {
					whole.Histograms[k] = hist.New()
				}
				whole.Histograms[k].Merge(h)
			}
			if whole.Harness == "" {
				whole.Harness, whole.Command, whole.Target, whole.Classes, whole.Flags = env.Harness, env.Command, env.Target, env.Classes, env.Flags
				whole.StartedAt = env.StartedAt
			}
			whole.EndedAt = env.EndedAt
			if len(whole.Machines) == 0 {
				whole.Machines = env.Machines
			}
		}
		if ph.LiveStop != nil && math.IsNaN(float64(cv.StopAt)) {
			cv.StopAt = pv.Start + num(ph.LiveStop.ElapsedSecs)
		}
		cv.Phases = append(cv.Phases, pv)
	}
	if cv.StoppedAfterPhase != "" && math.IsNaN(float64(cv.StopAt)) && len(cv.Phases) > 0 {
		cv.StopAt = cv.Phases[len(cv.Phases)-1].End
	}
	if whole.Harness == "" {
		whole.Harness, whole.Command, whole.Target = "keycast", "capacity", cv.Target
	}
	if ev.Machine != nil && len(whole.Machines) == 0 {
		whole.Machines = []machine.Record{*ev.Machine}
	}
	rv := runView(cv.Profile, whole, parts, nil, refused)
	rv.Command = "capacity"
	// The headline's duration is the axis the phases cover, not the first start to the last end
	// of files that may have been written apart.
	rv.Headline.DurationS = num(cursor)
	if cursor > 0 {
		rv.Headline.Throughput = num(float64(rv.Headline.Succeeded) / cursor)
		rv.Headline.OfferedRate = num(float64(rv.Headline.Operations) / cursor)
	}
	m.Runs = []*RunView{rv}
	m.Capacity = cv
	labelPhases(cv.Phases)
	return nil
}

// labelPhases gives each phase its label for the chart bands: its name without the prefix every
// phase's name shares ("kc-capacity-warmup", "kc-capacity-spike" are "warmup", "spike"), cut
// at a separator so that no label starts mid-word; the whole name where nothing would be left.
func labelPhases(phases []*PhaseView) {
	if len(phases) < 2 {
		for _, p := range phases {
			p.Label = p.Name
		}
		return
	}
	prefix := phases[0].Name
	for _, p := range phases[1:] {
		n := 0
		for n < len(prefix) && n < len(p.Name) && prefix[n] == p.Name[n] {
			n++
		}
		prefix = prefix[:n]
	}
	// Cut back to just after the last separator in the shared part.
	cut := strings.LastIndexAny(prefix, "-_ .:/")
	prefix = prefix[:cut+1]
	for _, p := range phases {
		p.Label = p.Name
		if rest := strings.TrimLeft(p.Name[len(prefix):], "-_ .:/"); rest != "" {
			p.Label = rest
		}
	}
}

func addTo(dst, src map[string]int64) map[string]int64 {
	if dst == nil {
		dst = map[string]int64{}
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// StaticCSP is the content security policy of a report page read from a file, and of the flame
// graph pages: inline script and style only, no fetch, no connection, no form submission, no
// <base>; a crafted file can neither load nor send anything.
const StaticCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; form-action 'none'; base-uri 'none'"

// LiveCSP is StaticCSP plus connections to the page's own origin: the live dashboard's page reads
// its server-sent events from the server that served it.
const LiveCSP = StaticCSP + "; connect-src 'self'"

// HTML draws the sources as one self-contained HTML page.
func HTML(srcs []Source, opt HTMLOptions) ([]byte, error) {
	files, err := ParseSources(srcs)
	if err != nil {
		return nil, err
	}
	return HTMLFiles(files, opt)
}

// HTMLFiles draws files as Open read them as one self-contained HTML page.
func HTMLFiles(files []*File, opt HTMLOptions) ([]byte, error) {
	m, err := BuildModelFiles(files, opt)
	if err != nil {
		return nil, err
	}
	return Page(m)
}

// PageCSP is the page's Content-Security-Policy: nothing loads but what the page carries, and
// it may connect to its own origin only (the dashboard's event stream). The page declares it in a
// meta element; the dashboard also sends it as a header.
const PageCSP = LiveCSP

// Page renders a model as the self-contained page: the chart library, the page's script and
// styles and the data, all inline. Nothing is fetched when it opens. The dashboard serves the same
// page with Model.Live set.
func Page(m *Model) ([]byte, error) {
	data, err := encodeModel(m)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.Grow(len(uplotJS) + len(reportJS) + len(data) + 8192)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	// No network: the page may load nothing but what it carries, submit no form and take no base
	// URL; only the live dashboard's page may connect back to its own origin (the SSE feed).
	csp := StaticCSP
	if m.Live != nil {
		csp = LiveCSP
	}
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"" + csp + "\">\n")
	b.WriteString("<meta name=\"generator\" content=\"loadproof report (uPlot " + UPlotVersion + ")\">\n")
	b.WriteString("<title>" + html.EscapeString(m.Title) + "</title>\n")
	b.WriteString("<style id=\"lp-uplot-css\">\n" + uplotCSS + "\n</style>\n")
	b.WriteString("<style id=\"lp-css\">\n" + reportCSS + "\n</style>\n")
	b.WriteString("</head>\n<body>\n<div id=\"app\"><noscript>This report draws its charts with JavaScript; the data is in the script element \"lp-data\".</noscript></div>\n")
	b.WriteString("<script id=\"lp-uplot\">\n" + uplotJS + "\n</script>\n")
	b.WriteString("<script id=\"lp-data\" type=\"application/json\">")
	b.Write(data)
	b.WriteString("</script>\n")
	b.WriteString("<script id=\"lp-app\">\n" + reportJS + "\n</script>\n")
	b.WriteString("</body>\n</html>\n")
	return []byte(b.String()), nil
}

// phaseResults decodes a phase's embedded results for drawing: both harnesses' results carry the
// shared envelope at their top level, which is all a capacity page draws (with the stop event).
func phaseResults(ph evidence.Phase) *phaseResult {
	if len(ph.Results) == 0 || string(ph.Results) == "null" {
		return nil
	}
	var r phaseResult
	if json.Unmarshal(ph.Results, &r.Results) != nil {
		return nil
	}
	// A LinkKeys phase's refusals by design by reason (its results' refused field).
	var lk struct {
		Refused map[string]int64 `json:"refused"`
	}
	if json.Unmarshal(ph.Results, &lk) == nil {
		r.refused = lk.Refused
	}
	return &r
}

// phaseResult is a phase's results as a capacity page draws them.
type phaseResult struct {
	keycastresult.Results
	refused map[string]int64
}

// RunEnvelope is the file's run envelope, validated: what a comparison or search reads of a
// run. A bundle or a file without an envelope is refused, saying what to give instead.
func (f *File) RunEnvelope() (*result.Envelope, error) {
	if f.Evidence != nil {
		return nil, fmt.Errorf("report: %s is a capacity evidence bundle, not a run's result file: give its phases' results files", f.Path)
	}
	l, err := drawable(f)
	if err != nil {
		return nil, err
	}
	if err := l.env.Validate(); err != nil {
		return nil, fmt.Errorf("report: %s: %w", f.Path, err)
	}
	return l.env, nil
}
