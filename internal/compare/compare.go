// Package compare answers "did it get worse?" for two sets of runs of one configuration: per
// metric (throughput, latency percentiles per kind, error and refusal rates) the change of B
// against A with a bootstrap confidence interval, and a verdict (better, worse, no change) at the
// chosen confidence. The interval comes from resampling runs and, within each drawn run, its
// per-second intervals, so the machine's noise is in the model instead of ignored. With one run a
// side only the intervals are resampled, and the comparison says run-to-run noise is not modelled.
//
// It reads result envelopes only (pure data); the command line reads the files.
package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/loadproof/loadproof/internal/result"
)

// Verdicts of one metric.
const (
	Better   = "better"
	Worse    = "worse"
	NoChange = "no change"
)

// Options tune the comparison.
type Options struct {
	// Confidence is the two-sided confidence of the intervals (0.5 to 0.999; default 0.95).
	Confidence float64
	// Iterations is the number of bootstrap resamples (100 to 100,000; default 2,000).
	Iterations int
	// Seed fixes the resampling (tests); 0 draws one.
	Seed uint64
}

// Metric is one compared figure.
type Metric struct {
	// Name is "throughput", "error_rate", "refusal_rate" or "pNN:KIND" (p50, p90, p99, p99.9).
	Name string `json:"name"`
	// Higher says a higher value is better (throughput); lower is better otherwise.
	Higher bool    `json:"higher_is_better"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	// Change is (B-A)/A in percent; Low and High bound it at the confidence (null in JSON when the
	// resamples could not bound it). A rate that is zero on side A compares in percentage points
	// (Absolute true: Change is (B-A)×100).
	Change   float64 `json:"change_pct"`
	Low      float64 `json:"low_pct"`
	High     float64 `json:"high_pct"`
	Absolute bool    `json:"absolute,omitempty"`
	Verdict  string  `json:"verdict"`
	// Unit is the metric's unit: "/s", "ms" or "share".
	Unit string `json:"unit"`
}

// Comparison is the whole answer.
type Comparison struct {
	RunsA      int      `json:"runs_a"`
	RunsB      int      `json:"runs_b"`
	Confidence float64  `json:"confidence"`
	Iterations int      `json:"iterations"`
	Metrics    []Metric `json:"metrics"`
	// Notes say what the model could not include (one run a side: no run-to-run noise).
	Notes []string `json:"notes,omitempty"`
	// Gate is the gate's outcome when one was given.
	Gate *GateResult `json:"gate,omitempty"`
}

// percentiles compared per latency kind.
var percentiles = []struct {
	name string
	q    float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p99.9", 0.999}}

// run is one result reduced to what the bootstrap draws: its intervals' counts and latencies, the
// latencies as sparse indices into the side-wide value table.
type run struct {
	ivs []interval
}

type interval struct {
	secs                       float64
	ok, refused, failed, total int64
	lat                        map[string][]bucket
}

type bucket struct {
	idx   int
	count int64
}

// side is one side's runs and the sorted table of every latency value its histograms hold.
type side struct {
	runs   []run
	values map[string][]int64 // kind -> sorted distinct bucket values (µs)
}

// Compare compares B against A. Every envelope needs interval snapshots (a result file written by
// loadproof); runs of different commands are refused.
func Compare(a, b []*result.Envelope, opt Options) (*Comparison, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, errors.New("compare: give at least one run on each side")
	}
	if opt.Confidence == 0 {
		opt.Confidence = 0.95
	}
	if opt.Confidence < 0.5 || opt.Confidence > 0.999 || math.IsNaN(opt.Confidence) {
		return nil, fmt.Errorf("compare: confidence %v: give a value from 0.5 to 0.999 (0.95 is usual)", opt.Confidence)
	}
	if opt.Iterations == 0 {
		opt.Iterations = 2000
	}
	if opt.Iterations < 100 || opt.Iterations > 100000 {
		return nil, fmt.Errorf("compare: %d iterations: give 100 to 100000", opt.Iterations)
	}
	cmd := a[0].Harness + " " + a[0].Command
	for i, e := range append(slices.Clone(a), b...) {
		if c := e.Harness + " " + e.Command; c != cmd {
			return nil, fmt.Errorf("compare: run %d is %s, run 1 is %s: compare runs of one command", i+1, c, cmd)
		}
		if len(e.Intervals) == 0 {
			return nil, fmt.Errorf("compare: run %d (%s %s) has no interval snapshots: the bootstrap resamples them", i+1, e.Harness, e.Command)
		}
	}
	sa, sb := newSide(a), newSide(b)
	kinds := commonKinds(sa, sb)
	type def struct {
		name   string
		higher bool
		unit   string
		f      func(*side, []drawn) float64
	}
	defs := []def{
		{"throughput", true, "/s", throughput},
		{"error_rate", false, "share", errorRate},
		{"refusal_rate", false, "share", refusalRate},
	}
	for _, k := range kinds {
		for _, p := range percentiles {
			defs = append(defs, def{p.name + ":" + k, false, "ms", quantileOf(k, p.q)})
		}
	}
	seed := opt.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := &Comparison{RunsA: len(a), RunsB: len(b), Confidence: opt.Confidence, Iterations: opt.Iterations}
	if len(a) == 1 || len(b) == 1 {
		c.Notes = append(c.Notes, "one run on a side: only its seconds are resampled, so run-to-run noise (a noisy neighbour, a cold cache) is not in the intervals; give 3 or more runs a side for a noise model")
	}
	// One set of resamples serves every metric, so the metrics are judged on the same draws.
	drawsA, drawsB := make([][]drawn, opt.Iterations), make([][]drawn, opt.Iterations)
	for i := range opt.Iterations {
		drawsA[i], drawsB[i] = sa.draw(rng), sb.draw(rng)
	}
	allA, allB := sa.all(), sb.all()
	alpha := (1 - opt.Confidence) / 2
	for _, d := range defs {
		va, vb := d.f(sa, allA), d.f(sb, allB)
		m := Metric{Name: d.name, Higher: d.higher, A: va, B: vb, Unit: d.unit}
		abs := va == 0 && d.unit == "share" // a rate that was zero: its change in percentage points
		m.Absolute = abs
		changes := make([]float64, 0, opt.Iterations)
		for i := range opt.Iterations {
			x, y := d.f(sa, drawsA[i]), d.f(sb, drawsB[i])
			if ch, ok := change(x, y, abs); ok {
				changes = append(changes, ch)
			}
		}
		m.Change, _ = change(va, vb, abs)
		if len(changes) < opt.Iterations/2 {
			m.Verdict, m.Low, m.High = NoChange, math.NaN(), math.NaN()
			c.Metrics = append(c.Metrics, m)
			continue
		}
		sort.Float64s(changes)
		m.Low, m.High = quantile(changes, alpha), quantile(changes, 1-alpha)
		switch {
		case m.Low > 0:
			m.Verdict = pick(d.higher, Better, Worse)
		case m.High < 0:
			m.Verdict = pick(d.higher, Worse, Better)
		default:
			m.Verdict = NoChange
		}
		c.Metrics = append(c.Metrics, m)
	}
	return c, nil
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// change is B against A: in percent of A, or absolute when A is zero.
func change(a, b float64, abs bool) (float64, bool) {
	if math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	if abs {
		return (b - a) * 100, true
	}
	if a == 0 {
		// Nothing on either side (a rare refusal or error missing from both draws) is no change;
		// dropping such draws would leave only those where A had some and make the interval a
		// certain -100 %.
		return 0, b == 0
	}
	return (b - a) / a * 100, true
}

// quantile of sorted values (linear interpolation).
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	return s[i]*(1-f) + s[i+1]*f
}

// drawn is one interval chosen by a resample: run r, interval i.
type drawn struct{ r, i int }

func newSide(envs []*result.Envelope) *side {
	s := &side{values: map[string][]int64{}}
	seen := map[string]map[int64]bool{}
	for _, e := range envs {
		for _, iv := range e.Intervals {
			for k, h := range iv.Latency {
				if seen[k] == nil {
					seen[k] = map[int64]bool{}
				}
				for _, b := range h.Buckets() {
					seen[k][b.Micros] = true
				}
			}
		}
	}
	for k, vs := range seen {
		vals := make([]int64, 0, len(vs))
		for v := range vs {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		s.values[k] = vals
	}
	for _, e := range envs {
		var r run
		for _, iv := range e.Intervals {
			secs := iv.Secs
			if secs <= 0 {
				secs = e.IntervalSecs
			}
			if secs <= 0 {
				secs = 1
			}
			x := interval{secs: secs, ok: iv.Counts[result.ClassSuccess], refused: iv.Refused(), total: iv.Total(), lat: map[string][]bucket{}}
			x.failed = x.total - x.ok - x.refused
			for k, h := range iv.Latency {
				for _, b := range h.Buckets() {
					idx, _ := slices.BinarySearch(s.values[k], b.Micros)
					x.lat[k] = append(x.lat[k], bucket{idx, b.Count})
				}
			}
			r.ivs = append(r.ivs, x)
		}
		s.runs = append(s.runs, r)
	}
	return s
}

// draw resamples the side: as many runs as it has, with replacement (unless it has one), and
// within each drawn run as many of its intervals as it has, with replacement.
func (s *side) draw(rng *rand.Rand) []drawn {
	var out []drawn
	for range s.runs {
		r := 0
		if len(s.runs) > 1 {
			r = rng.IntN(len(s.runs))
		}
		n := len(s.runs[r].ivs)
		for range n {
			out = append(out, drawn{r, rng.IntN(n)})
		}
	}
	return out
}

// all is the side as measured: every interval of every run once.
func (s *side) all() []drawn {
	var out []drawn
	for r, run := range s.runs {
		for i := range run.ivs {
			out = append(out, drawn{r, i})
		}
	}
	return out
}

func throughput(s *side, d []drawn) float64 {
	var ok int64
	var secs float64
	for _, x := range d {
		iv := &s.runs[x.r].ivs[x.i]
		ok += iv.ok
		secs += iv.secs
	}
	if secs == 0 {
		return math.NaN()
	}
	return float64(ok) / secs
}

func errorRate(s *side, d []drawn) float64 {
	var failed, n int64
	for _, x := range d {
		iv := &s.runs[x.r].ivs[x.i]
		failed += iv.failed
		n += iv.total - iv.refused
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(failed) / float64(n)
}

func refusalRate(s *side, d []drawn) float64 {
	var refused, n int64
	for _, x := range d {
		iv := &s.runs[x.r].ivs[x.i]
		refused += iv.refused
		n += iv.total
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(refused) / float64(n)
}

// quantileOf returns the metric "quantile q of kind's latency, in ms" over drawn intervals: their
// buckets added into a dense count table, then walked to the quantile.
func quantileOf(kind string, q float64) func(*side, []drawn) float64 {
	return func(s *side, d []drawn) float64 {
		vals := s.values[kind]
		if len(vals) == 0 {
			return math.NaN()
		}
		counts := make([]int64, len(vals))
		var total int64
		for _, x := range d {
			for _, b := range s.runs[x.r].ivs[x.i].lat[kind] {
				counts[b.idx] += b.count
				total += b.count
			}
		}
		if total == 0 {
			return math.NaN()
		}
		// HdrHistogram's rule: the value at quantile q is the lowest whose cumulative count reaches
		// ceil(q × total).
		want := int64(math.Ceil(q * float64(total)))
		want = max(want, 1)
		var cum int64
		for i, c := range counts {
			cum += c
			if cum >= want {
				return float64(vals[i]) / 1000
			}
		}
		return float64(vals[len(vals)-1]) / 1000
	}
}

// commonKinds lists the latency kinds both sides recorded, in name order.
func commonKinds(a, b *side) []string {
	var out []string
	for k := range a.values {
		if _, ok := b.values[k]; ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// metricPlain is Metric without its JSON methods; metricJSON is a Metric's JSON form, the five
// figures as pointers so that NaN (nothing measured, no interval) travels as null.
type metricPlain Metric

type metricJSON struct {
	metricPlain
	A      *float64 `json:"a"`
	B      *float64 `json:"b"`
	Change *float64 `json:"change_pct"`
	Low    *float64 `json:"low_pct"`
	High   *float64 `json:"high_pct"`
}

// MarshalJSON writes NaN figures (nothing measured, no interval) as null.
func (m Metric) MarshalJSON() ([]byte, error) {
	f := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(metricJSON{metricPlain(m), f(m.A), f(m.B), f(m.Change), f(m.Low), f(m.High)})
}
