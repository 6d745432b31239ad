package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/search"
	"github.com/loadproof/loadproof/internal/textclip"
)

// MaxSearchPoints caps the trials a search page draws and lists (a search file may hold 1,000
// steps of 100 trials); the page says how many it left out.
const MaxSearchPoints = 3000

// SearchModel is the search page's data: the load-response curve (every trial a point), the knee,
// the bracket, the confidence statement and what broke first.
type SearchModel struct {
	Title   string `json:"title"`
	File    string `json:"file"`
	Vary    string `json:"vary"`
	XLabel  string `json:"x_label"`
	SLO     string `json:"slo"`
	Command string `json:"command,omitempty"`

	From          num `json:"from"`
	To            num `json:"to"`
	Growth        num `json:"growth"`
	Resolution    num `json:"resolution"` // a share: 0.05 is 5 %
	TrialsPerStep int `json:"trials_per_step"`

	StartedAt string `json:"started_at"`
	DurationS num    `json:"duration_s"`

	// Knee, LastPass and FirstFail are null when absent (no value passed; the ceiling passed).
	Knee num `json:"knee"`
	// KneeRule says how the knee was found, in words: the rule the marked knee answers to.
	KneeRule      string   `json:"knee_rule"`
	LastPass      num      `json:"last_pass"`
	FirstFail     num      `json:"first_fail"`
	Confidence    string   `json:"confidence"`
	HoldsAtKnee   num      `json:"holds_at_knee"`
	FailsAtFail   num      `json:"fails_at_fail"`
	KneeInBracket num      `json:"knee_in_bracket"`
	BrokeFirst    []string `json:"broke_first,omitempty"`
	Stopped       string   `json:"stopped"`
	Aborted       string   `json:"aborted,omitempty"`

	StepCount  int           `json:"step_count"`
	TrialCount int           `json:"trial_count"`
	Steps      []SearchStep  `json:"steps"`
	Points     []SearchPoint `json:"points"`
	// Omitted counts the trials neither drawn nor listed (over MaxSearchPoints).
	Omitted int `json:"omitted,omitempty"`
	// Limits are the SLO's latency and share terms, drawn as lines on the chart.
	Limits []SearchLimit `json:"limits,omitempty"`
}

// SearchStep is one value tried.
type SearchStep struct {
	Index  int    `json:"index"`
	Phase  string `json:"phase"`
	Value  num    `json:"value"`
	Passed bool   `json:"passed"`
	Held   num    `json:"held"`
	// P50 and P99 are the medians over the step's trials (ms), the curve's line; Throughput the
	// median of their achieved successes a second.
	P50        num `json:"p50"`
	P99        num `json:"p99"`
	Throughput num `json:"throughput"`
}

// SearchPoint is one trial: its value, latency, error and shed shares, and what broke.
type SearchPoint struct {
	Step   int  `json:"step"`
	Trial  int  `json:"trial"`
	Value  num  `json:"value"`
	Held   bool `json:"held"`
	P50    num  `json:"p50"` // ms; null when the trial measured no latency
	P99    num  `json:"p99"`
	Errors num  `json:"errors"` // share of operations that failed (refusals excluded)
	Shed   num  `json:"shed"`   // share refused by design
	// Throughput is the trial's achieved successes a second (null when it measured no time).
	Throughput num      `json:"throughput"`
	Ops        int64    `json:"ops"`
	OK         int64    `json:"ok"`
	Refused    int64    `json:"refused"`
	Secs       num      `json:"secs"`
	RunFailed  bool     `json:"run_failed,omitempty"`
	ExitCode   int      `json:"exit_code"`
	Broke      []string `json:"broke,omitempty"`
	Generator  []string `json:"generator,omitempty"`
}

// SearchLimit is one SLO term drawn as a line: a latency limit (ms, left axis), an error or shed
// share (right axis), or a throughput floor on the throughput chart (successes a second, or a
// share of the offered rate when OfOffered).
type SearchLimit struct {
	Text      string `json:"text"`
	Metric    string `json:"metric"` // latency, errors, failed, shed or throughput
	Limit     num    `json:"limit"`
	OfOffered bool   `json:"of_offered,omitempty"`
}

// xLabels names the chart's x axis for each varied flag.
var xLabels = map[string]string{
	"rate":        "offered load (arrival rate, ops/s)",
	"count":       "offered load (connections held)",
	"concurrency": "offered load (concurrent clients)",
}

// BuildSearchModel turns a search file (read with search.ReadFile or search.Parse) into the
// page's data. name is the file's name as the page shows it.
func BuildSearchModel(r *search.Result, name, title string) (*SearchModel, error) {
	if r == nil {
		return nil, errors.New("report: no search to draw")
	}
	c := &r.Config
	m := &SearchModel{Title: pageText(title), File: pageText(name), Vary: pageText(c.Vary), From: num(c.From), To: num(c.To),
		Growth: num(c.Growth), Resolution: num(c.Resolution), TrialsPerStep: c.Trials,
		Knee: optNum(r.Knee), LastPass: optNum(r.LastPass), FirstFail: optNum(r.FirstFail),
		Confidence: pageText(r.Confidence.Statement), HoldsAtKnee: optNum(r.Confidence.HoldsAtKnee),
		FailsAtFail: optNum(r.Confidence.FailsAtFail), KneeInBracket: optNum(r.Confidence.KneeInBracket),
		BrokeFirst: pageList(r.BrokeFirst), Stopped: pageText(r.Stopped), Aborted: pageText(r.Aborted),
		StepCount: len(r.Steps), TrialCount: r.TrialCount, DurationS: gapNum()}
	m.XLabel = cmp.Or(xLabels[c.Vary], "offered load ("+m.Vary+")")
	if c.SLO != nil {
		m.SLO = pageText(c.SLO.Text)
		for _, t := range c.SLO.Terms {
			switch t.Metric {
			case search.MetricLatency, search.MetricErrors, search.MetricFailed, search.MetricShed, search.MetricThroughput:
				if len(m.Limits) < maxPageList {
					m.Limits = append(m.Limits, SearchLimit{Text: pageText(t.Text), Metric: t.Metric, Limit: num(t.Limit), OfOffered: t.OfOffered})
				}
			}
		}
	}
	if len(r.Command) > 0 {
		args := r.Command
		if len(args) > maxPageList {
			args = args[:maxPageList]
		}
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = Sanitize(a)
		}
		m.Command = textclip.String(strings.Join(parts, " "), 4*maxPageText)
	}
	if !r.StartedAt.IsZero() {
		m.StartedAt = r.StartedAt.UTC().Format(time.RFC3339)
		if d := r.EndedAt.Sub(r.StartedAt); d >= 0 {
			m.DurationS = num(d.Seconds())
		}
	}
	if m.Title == "" {
		m.Title = "loadproof search: the knee of " + m.Vary
	}
	m.KneeRule = kneeRule(c, m.SLO)
	for _, v := range []struct {
		what string
		p    *float64
	}{{"knee", r.Knee}, {"last pass", r.LastPass}, {"first fail", r.FirstFail}} {
		if v.p != nil && (!(*v.p > 0) || math.IsInf(*v.p, 0)) {
			return nil, fmt.Errorf("report: %s: the %s %v is not a positive number: the file is damaged", m.File, v.what, *v.p)
		}
	}
	for si, st := range r.Steps {
		if !(st.Value > 0) || math.IsInf(st.Value, 0) {
			return nil, fmt.Errorf("report: %s: step %d tries %s %v: a value must be a positive number", m.File, si+1, m.Vary, st.Value)
		}
		sv := SearchStep{Index: st.Index, Phase: pageText(st.Phase), Value: num(st.Value), Passed: st.Passed, Held: num(st.Held)}
		var p50s, p99s, tps []float64
		for _, t := range st.Trials {
			p := trialPoint(st, t)
			if !math.IsNaN(float64(p.Throughput)) {
				tps = append(tps, float64(p.Throughput))
			}
			if !math.IsNaN(float64(p.P50)) {
				p50s = append(p50s, float64(p.P50))
			}
			if !math.IsNaN(float64(p.P99)) {
				p99s = append(p99s, float64(p.P99))
			}
			if len(m.Points) < MaxSearchPoints {
				m.Points = append(m.Points, p)
			} else {
				m.Omitted++
			}
		}
		sv.P50, sv.P99, sv.Throughput = num(median(p50s)), num(median(p99s)), num(median(tps))
		m.Steps = append(m.Steps, sv)
	}
	return m, nil
}

// kneeRule states the rule a search's knee answers to.
func kneeRule(c *search.Config, slo string) string {
	trials := "its trial holds"
	if c.Trials > 1 {
		trials = fmt.Sprintf("all %d of its trials hold", c.Trials)
	}
	return fmt.Sprintf("the knee is the highest %s at which %s the SLO %s; the search grows it ×%s a step from %s until a step fails (or %s passes), then bisects the bracket until first fail / last pass is within %s%%",
		pageText(c.Vary), trials, cmp.Or(slo, "(none recorded)"), search.FormatValue(c.Growth), search.FormatValue(c.From), search.FormatValue(c.To),
		strconvPct(c.Resolution))
}

// strconvPct writes a share as a percentage with no trailing zeros (0.05 is "5").
func strconvPct(v float64) string { return search.FormatValue(math.Round(v*1e6) / 1e4) }

// trialPoint reduces one trial's summary to its point on the curve.
func trialPoint(st search.Step, t search.TrialSummary) SearchPoint {
	p := SearchPoint{Step: st.Index, Trial: t.Trial, Value: num(st.Value), Held: t.Held, Ops: t.Total, OK: t.Success,
		Refused: t.Refused, Secs: num(t.Secs), RunFailed: t.RunFailed, ExitCode: t.ExitCode,
		P50: gapNum(), P99: gapNum(), Errors: gapNum(), Shed: gapNum(), Throughput: gapNum(), Generator: pageList(t.GeneratorLimited)}
	if t.Secs > 0 {
		p.Throughput = num(float64(t.Success) / t.Secs)
	}
	// A trial with no successes has no latency to show: its zero percentiles mean "none".
	if t.Success > 0 && (t.P50Ms > 0 || t.P99Ms > 0) {
		p.P50, p.P99 = num(t.P50Ms), num(t.P99Ms)
	}
	if t.Total > 0 {
		p.Errors = num(float64(t.Total-t.Success-t.Refused) / float64(t.Total))
		p.Shed = num(float64(t.Refused) / float64(t.Total))
	}
	var broke []string
	for _, tr := range t.Terms {
		if !tr.Held {
			s := tr.Term
			if tr.Measured {
				s += fmt.Sprintf(" (observed %.4g)", tr.Observed)
			} else {
				s += " (nothing measured)"
			}
			broke = append(broke, s)
		}
	}
	p.Broke = pageList(broke)
	return p
}

// median of values (NaN when none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func optNum(p *float64) num {
	if p == nil {
		return gapNum()
	}
	return num(*p)
}

func gapNum() num { return num(math.NaN()) }

// SearchPage draws a search file as one self-contained page: the load-response curve (offered
// load on a log scale against p50 and p99, with errors and shedding), each trial a point, the knee
// and the bracket marked, the confidence statement and what broke first, then every step and trial.
func SearchPage(r *search.Result, name, title string) ([]byte, error) {
	m, err := BuildSearchModel(r, name, title)
	if err != nil {
		return nil, err
	}
	return statPage(m.Title, m, searchJS)
}
