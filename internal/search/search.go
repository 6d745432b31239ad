// Package search finds the knee of a deployment: the highest load (arrival rate, connections held,
// concurrency) at which an SLO still holds. It grows the load geometrically from a start value until
// a step breaks the SLO (or the ceiling is reached), then bisects the bracket (last pass, first fail)
// to a stated resolution. Each step runs several trials; a step passes only when every trial does.
// The knee comes with a confidence statement from a bootstrap over the trials' per-second
// intervals, and with what broke first at the failing step.
//
// The package runs no load itself: a Trialer runs one trial and hands back its result file, so the
// search logic is tested with a deterministic fake and driven in production by a subprocess runner.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Format is the version of the search file's JSON form.
const Format = "loadproof.search/v1"

// Trial is what one trial hands back.
type Trial struct {
	// Env is the trial's result file, nil when the run wrote none.
	Env *result.Envelope
	// File is the result file's path (relative to the search's directory in the search file).
	File string
	// RunFailed is true when the run exited saying nothing succeeded (it is a failing trial).
	RunFailed bool
	// ExitCode is the client's exit status.
	ExitCode int
}

// Trialer runs one trial at value (step and trial count from 1).
type Trialer interface {
	Trial(ctx context.Context, value float64, step, trial int) (Trial, error)
}

// ErrAborted is returned (wrapped) when an abort condition ended the search.
var ErrAborted = errors.New("search aborted")

// Config is one search.
type Config struct {
	Vary       string  `json:"vary"`
	From       float64 `json:"from"`
	To         float64 `json:"to"`
	Growth     float64 `json:"growth"`
	Resolution float64 `json:"resolution"`
	Trials     int     `json:"trials"`
	SLO        *SLO    `json:"slo"`
	AbortOn    *SLO    `json:"abort_on,omitempty"`
	// Resamples is the bootstrap's resample count (default 1000); Seed makes it reproducible.
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	// Integer rounds every value to a whole number (counts, concurrency).
	Integer bool `json:"integer"`
	// WarmUp runs one unscored trial at From before the first step: the first trial of a search
	// often runs slower than the rest (cold caches, connection pools, a server's first minute),
	// and scored, it can fail the first value on its own.
	WarmUp bool `json:"warm_up,omitempty"`
}

// Validate rejects a configuration the search cannot run.
func (c *Config) Validate() error {
	switch {
	case c.SLO == nil || len(c.SLO.Terms) == 0:
		return fmt.Errorf("no SLO: give --slo, e.g. 'p99<20ms,errors<0.5%%'")
	case !(c.From > 0) || math.IsInf(c.From, 0):
		return fmt.Errorf("--from %v: the start value must be above 0", c.From)
	case !(c.To >= c.From) || math.IsInf(c.To, 0):
		return fmt.Errorf("--to %v: the ceiling must be at least --from (%v)", c.To, c.From)
	case !(c.Growth > 1) || c.Growth > 100:
		return fmt.Errorf("--growth %v: the growth factor must be above 1 and at most 100", c.Growth)
	case !(c.Resolution > 0) || c.Resolution >= 1:
		return fmt.Errorf("--resolution %v: must be above 0%% and below 100%%", c.Resolution)
	case c.Trials < 1 || c.Trials > 100:
		return fmt.Errorf("--trials %d: between 1 and 100", c.Trials)
	case c.Vary != "rate" && c.SLO.NeedsOffered():
		return fmt.Errorf("a throughput limit in %% compares against the offered rate, so it needs --vary rate (not %q)", c.Vary)
	}
	return nil
}

// TrialSummary is one trial's record in the search file.
type TrialSummary struct {
	Trial     int          `json:"trial"`
	File      string       `json:"file,omitempty"`
	ExitCode  int          `json:"exit_code"`
	RunFailed bool         `json:"run_failed,omitempty"`
	Held      bool         `json:"held"`
	Terms     []TermResult `json:"terms,omitempty"`
	Total     int64        `json:"total"`
	Success   int64        `json:"success"`
	Refused   int64        `json:"refused"`
	Secs      float64      `json:"secs"`
	P50Ms     float64      `json:"p50_ms"`
	P99Ms     float64      `json:"p99_ms"`
	// GeneratorLimited holds the machine records' reasons when the load generator saturated.
	GeneratorLimited []string `json:"generator_limited,omitempty"`
}

// Step is one value tried.
type Step struct {
	Index  int            `json:"index"`
	Phase  string         `json:"phase"` // "grow" or "bisect"
	Value  float64        `json:"value"`
	Passed bool           `json:"passed"`
	Held   float64        `json:"held_share"` // share of trials that held
	Trials []TrialSummary `json:"trials"`
}

// Confidence is the bootstrap statement for the knee.
type Confidence struct {
	Resamples int `json:"resamples"`
	// HoldsAtKnee is the share of resamples of the knee's intervals in which the SLO held.
	HoldsAtKnee *float64 `json:"holds_at_knee,omitempty"`
	// FailsAtFail is the share of resamples of the first failing step's intervals in which it failed.
	FailsAtFail *float64 `json:"fails_at_fail,omitempty"`
	// KneeInBracket is their product: the probability the true knee lies in [knee, first fail).
	KneeInBracket *float64 `json:"knee_in_bracket,omitempty"`
	Statement     string   `json:"statement"`
}

// Result is the search file.
type Result struct {
	Format    string    `json:"format"`
	Config    Config    `json:"config"`
	Command   []string  `json:"command,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	// WarmUp is the unscored warm-up trial (Config.WarmUp): its result file is in the bundle, and
	// it counts toward no step, no knee and no trial count.
	WarmUp *TrialSummary `json:"warm_up,omitempty"`
	Steps  []Step        `json:"steps"`
	// Knee is the highest passing value (absent when no value passed).
	Knee *float64 `json:"knee,omitempty"`
	// LastPass and FirstFail bracket the knee; FirstFail is absent when the ceiling passed.
	LastPass   *float64   `json:"last_pass,omitempty"`
	FirstFail  *float64   `json:"first_fail,omitempty"`
	Confidence Confidence `json:"confidence"`
	// BrokeFirst says what broke at the first failing step: latency, errors, shedding, throughput,
	// generator (the load generator saturated) or run-failed.
	BrokeFirst []string `json:"broke_first,omitempty"`
	TrialCount int      `json:"trial_count"`
	Aborted    string   `json:"aborted,omitempty"`
	Stopped    string   `json:"stopped"`
}

func (c *Config) round(v float64) float64 {
	if c.Integer || v >= 10 {
		return math.Max(1, math.Round(v))
	}
	return math.Round(v*1000) / 1000
}

// Run performs the search. The Result holds every step run so far even when an error ends it.
func Run(ctx context.Context, cfg Config, tr Trialer) (*Result, error) {
	if cfg.Growth == 0 {
		cfg.Growth = 2
	}
	if cfg.Resolution == 0 {
		cfg.Resolution = 0.05
	}
	if cfg.Trials == 0 {
		cfg.Trials = 3
	}
	if cfg.Resamples == 0 {
		cfg.Resamples = 1000
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Format: Format, Config: cfg, StartedAt: time.Now().UTC()}
	defer func() { res.EndedAt = time.Now().UTC() }()
	var (
		lastPass, firstFail float64 // 0: none yet
		stepEnvs            [][]*result.Envelope
	)
	step := func(phase string, v float64) (bool, error) {
		st := Step{Index: len(res.Steps) + 1, Phase: phase, Value: v}
		var envs []*result.Envelope
		defer func() { stepEnvs = append(stepEnvs, envs) }()
		held := 0
		for i := 1; i <= cfg.Trials; i++ {
			t, err := tr.Trial(ctx, v, st.Index, i)
			if err != nil {
				st.Held = share(held, len(st.Trials))
				res.Steps = append(res.Steps, st)
				return false, fmt.Errorf("step %d (%s %v) trial %d: %w", st.Index, cfg.Vary, v, i, err)
			}
			res.TrialCount++
			ts := Summarise(&cfg, t, v)
			ts.Trial = i
			if ts.Held {
				held++
			}
			st.Trials = append(st.Trials, ts)
			envs = append(envs, t.Env)
			if cfg.AbortOn != nil && t.Env != nil {
				s := WholeRun(t.Env)
				if met, why := cfg.AbortOn.Met(&s, offered(&cfg, v)); met {
					st.Held = share(held, len(st.Trials))
					res.Steps = append(res.Steps, st)
					res.Aborted = fmt.Sprintf("step %d trial %d at %s %v met the abort condition %s", st.Index, i, cfg.Vary, v, why)
					return false, fmt.Errorf("%w: %s", ErrAborted, res.Aborted)
				}
			}
		}
		st.Held = share(held, cfg.Trials)
		st.Passed = held == cfg.Trials
		res.Steps = append(res.Steps, st)
		return st.Passed, nil
	}
	finish := func(err error) (*Result, error) {
		Conclude(res, stepEnvs)
		return res, err
	}
	// Grow, after the warm-up trial.
	v := cfg.round(cfg.From)
	if cfg.WarmUp {
		t, err := tr.Trial(ctx, v, 0, 1)
		if err != nil {
			res.Stopped = "error"
			return finish(fmt.Errorf("warm-up trial (%s %v): %w", cfg.Vary, v, err))
		}
		ts := Summarise(&cfg, t, v)
		ts.Trial = 1
		res.WarmUp = &ts
	}
	for {
		ok, err := step("grow", v)
		if err != nil {
			res.Stopped = "error"
			return finish(err)
		}
		if ok {
			lastPass = v
			if v >= cfg.To {
				res.Stopped = "the ceiling (--to) passed"
				return finish(nil)
			}
			next := cfg.round(math.Min(v*cfg.Growth, cfg.To))
			if next <= v {
				next = v + 1
			}
			v = next
			continue
		}
		firstFail = v
		break
	}
	if lastPass == 0 {
		res.Stopped = "the first value (--from) failed"
		return finish(nil)
	}
	// Bisect (geometric midpoints) until the bracket is within the resolution.
	for firstFail/lastPass > 1+cfg.Resolution {
		mid := cfg.round(math.Sqrt(lastPass * firstFail))
		if mid <= lastPass || mid >= firstFail {
			break
		}
		ok, err := step("bisect", mid)
		if err != nil {
			res.Stopped = "error"
			return finish(err)
		}
		if ok {
			lastPass = mid
		} else {
			firstFail = mid
		}
	}
	res.Stopped = fmt.Sprintf("bracket within the resolution (%.3g%%)", cfg.Resolution*100)
	return finish(nil)
}

func ptr(v float64) *float64 { return &v }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Conclude sets the knee (the highest passing value), the bracket (the lowest failing value above
// it), what broke first there and the bootstrap confidence from the steps and their trials' result
// files (envs[i] holds step i's, nil for a trial that wrote none). The search keeps every pass below
// every failure, so the knee and the first failure are the highest pass and the lowest failure.
// Verification calls it again on the files of a bundle, so it depends on nothing else.
func Conclude(res *Result, envs [][]*result.Envelope) {
	res.Knee, res.LastPass, res.FirstFail, res.BrokeFirst = nil, nil, nil, nil
	var pass, fail float64
	pi, fi := -1, -1
	for i, st := range res.Steps {
		if st.Passed && st.Value > pass {
			pass, pi = st.Value, i
		}
	}
	for i, st := range res.Steps {
		if !st.Passed && len(st.Trials) == res.Config.Trials && st.Value > pass && (fi < 0 || st.Value < fail) {
			fail, fi = st.Value, i
		}
	}
	var passEnv, failEnv []*result.Envelope
	if pi >= 0 {
		res.Knee, res.LastPass = ptr(pass), ptr(pass)
		if pi < len(envs) {
			passEnv = envs[pi]
		}
	}
	if fi >= 0 {
		res.FirstFail = ptr(fail)
		res.BrokeFirst = BrokeFirst(&res.Steps[fi])
		if fi < len(envs) {
			failEnv = envs[fi]
		}
	}
	res.Confidence = confidence(&res.Config, pass, fail, passEnv, failEnv)
}

func offered(c *Config, v float64) float64 {
	if c.Vary == "rate" {
		return v
	}
	return 0
}

// Summarise evaluates one trial against the SLO.
func Summarise(c *Config, t Trial, v float64) TrialSummary {
	ts := TrialSummary{File: t.File, ExitCode: t.ExitCode, RunFailed: t.RunFailed}
	if t.Env == nil {
		return ts
	}
	s := WholeRun(t.Env)
	ts.Held, ts.Terms = c.SLO.Evaluate(&s, offered(c, v))
	if t.RunFailed {
		ts.Held = false
	}
	ts.Total, ts.Success, ts.Refused, ts.Secs = s.Total(), s.Counts[result.ClassSuccess], t.Env.Refused(), s.Secs
	if h := s.Hists["latency"]; h != nil && h.Count() > 0 {
		ts.P50Ms = float64(h.Quantile(0.5)) / float64(time.Millisecond)
		ts.P99Ms = float64(h.Quantile(0.99)) / float64(time.Millisecond)
	}
	if lim, reasons := machine.GeneratorLimited(t.Env.Machines); lim {
		ts.GeneratorLimited = reasons
	}
	return ts
}

// BrokeFirst names what failed at a failing step: "run-failed" when a run succeeded at nothing,
// the metrics of the terms that did not hold in any trial (latency, errors, shedding, throughput),
// then "generator" when a trial's load generator saturated (the result files' machine records,
// the report's validity check): the step's figures then measure the generator as much as the server.
func BrokeFirst(st *Step) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	generator := false
	for _, t := range st.Trials {
		generator = generator || len(t.GeneratorLimited) > 0
		if t.RunFailed {
			add("run-failed")
		}
		for _, tr := range t.Terms {
			if tr.Held {
				continue
			}
			switch tr.Metric {
			case MetricShed:
				add("shedding")
			case MetricErrors, MetricFailed:
				add("errors")
			default:
				add(tr.Metric)
			}
		}
	}
	if generator {
		add("generator")
	}
	return out
}

// holdShare resamples a step's trials and their per-second intervals (two levels, as compare does:
// draw as many trials as there are, with replacement, then from each drawn trial as many of its
// intervals as it has) and returns the share of resamples in which the SLO held. The trial level
// carries what changes from one trial to the next (a host whose speed swings from minute to
// minute) into the statement; with one trial a step it is the bootstrap over that trial's seconds.
func holdShare(c *Config, v float64, envs []*result.Envelope, rng *rand.Rand) (float64, bool) {
	var trials [][]*result.Interval
	for _, e := range envs {
		if e == nil || len(e.Intervals) == 0 {
			continue
		}
		ivs := make([]*result.Interval, len(e.Intervals))
		for i := range e.Intervals {
			ivs[i] = &e.Intervals[i]
		}
		trials = append(trials, ivs)
	}
	if len(trials) == 0 {
		return 0, false
	}
	held := 0
	for r := 0; r < c.Resamples; r++ {
		var s Sample
		for range trials {
			ivs := trials[rng.IntN(len(trials))]
			for range ivs {
				s.Add(ivs[rng.IntN(len(ivs))])
			}
		}
		if ok, _ := c.SLO.Evaluate(&s, offered(c, v)); ok {
			held++
		}
	}
	return float64(held) / float64(c.Resamples), true
}

func confidence(c *Config, pass, fail float64, passEnv, failEnv []*result.Envelope) Confidence {
	conf := Confidence{Resamples: c.Resamples}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5ea4c4))
	var hk, ff float64 = 1, 1
	var parts []string
	if pass > 0 {
		if h, ok := holdShare(c, pass, passEnv, rng); ok {
			conf.HoldsAtKnee, hk = ptr(h), h
			parts = append(parts, fmt.Sprintf("the SLO held in %.1f%% of resamples at the knee (%s %v)", h*100, c.Vary, pass))
		}
	}
	if fail > 0 {
		if h, ok := holdShare(c, fail, failEnv, rng); ok {
			conf.FailsAtFail, ff = ptr(1-h), 1-h
			parts = append(parts, fmt.Sprintf("failed in %.1f%% at the first failing value (%s %v)", (1-h)*100, c.Vary, fail))
		}
	}
	switch {
	case conf.HoldsAtKnee != nil && conf.FailsAtFail != nil:
		conf.KneeInBracket = ptr(hk * ff)
		conf.Statement = fmt.Sprintf("%s and %s: the knee lies in [%v, %v) with probability %.2f (bootstrap over trials and their per-second intervals, %d resamples)",
			parts[0], parts[1], pass, fail, hk*ff, c.Resamples)
	case len(parts) > 0:
		conf.Statement = parts[0] + fmt.Sprintf(" (bootstrap over trials and their per-second intervals, %d resamples); no bracket on the other side", c.Resamples)
	default:
		conf.Statement = "no confidence statement: the trials recorded no per-second intervals"
	}
	return conf
}

// ParseResolution reads a --resolution as a share: "5%" (or the share itself, 0.05). The range is
// Config.Validate's to check.
func ParseResolution(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage such as 5%%", s)
	}
	if strings.HasSuffix(strings.TrimSpace(s), "%") {
		v /= 100
	}
	return v, nil
}
