package search

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// Metric names an SLO term reads from a result file.
const (
	MetricLatency    = "latency"    // a percentile of a latency kind, in milliseconds
	MetricErrors     = "errors"     // share of operations that failed, refusals by design excluded
	MetricFailed     = "failed"     // share of operations that did not succeed, refusals included
	MetricShed       = "shed"       // share of operations refused by design (result.IsRefusal)
	MetricThroughput = "throughput" // successes per second; as a share of the offered rate when given in %
)

// Term is one clause of an SLO: Metric Op Limit, for example p99<20ms or errors<0.5%.
type Term struct {
	Text   string `json:"text"`
	Metric string `json:"metric"`
	// Quantile (0..100) and Kind are set for latency terms: p99:uncorrected<20ms reads the
	// "uncorrected" histogram; the default kind is "latency".
	Quantile float64 `json:"quantile,omitempty"`
	Kind     string  `json:"kind,omitempty"`
	// Below is true for < and <=, false for > and >=; Inclusive for <= and >=.
	Below     bool    `json:"below"`
	Inclusive bool    `json:"inclusive"`
	Limit     float64 `json:"limit"`
	// OfOffered is true for a throughput limit given as a share (%) of the offered rate.
	OfOffered bool `json:"of_offered,omitempty"`
}

// SLO is a conjunction of terms: it holds when every term does.
type SLO struct {
	Text  string `json:"text"`
	Terms []Term `json:"terms"`
}

const maxSLOText = 4096

// ParseSLO reads a comma-separated list of terms:
//
//	pNN[.N][:KIND] (<|<=|>|>=) DURATION   latency percentile of a kind (default "latency"), e.g. p99<20ms
//	errors|failed|shed (<|<=|>|>=) N%     shares of all operations, e.g. errors<0.5%
//	throughput (<|<=|>|>=) N[%]           successes per second, or N% of the offered rate
func ParseSLO(s string) (*SLO, error) {
	if len(s) > maxSLOText {
		return nil, fmt.Errorf("SLO is %d bytes long; at most %d", len(s), maxSLOText)
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("SLO is empty: give terms such as 'p99<20ms,errors<0.5%%'")
	}
	slo := &SLO{Text: s}
	for _, part := range strings.Split(s, ",") {
		t, err := parseTerm(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		slo.Terms = append(slo.Terms, t)
	}
	return slo, nil
}

func parseTerm(p string) (Term, error) {
	if p == "" {
		return Term{}, fmt.Errorf("SLO has an empty term (two commas, or a trailing comma)")
	}
	i := strings.IndexAny(p, "<>")
	if i <= 0 {
		return Term{}, fmt.Errorf("SLO term %q: want METRIC<LIMIT or METRIC>LIMIT, e.g. p99<20ms or errors<0.5%%", p)
	}
	t := Term{Text: p, Below: p[i] == '<'}
	name, rest := strings.TrimSpace(p[:i]), p[i+1:]
	if strings.HasPrefix(rest, "=") {
		t.Inclusive, rest = true, rest[1:]
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return Term{}, fmt.Errorf("SLO term %q has no limit", p)
	}
	switch {
	case name == MetricErrors || name == MetricFailed || name == MetricShed:
		t.Metric = name
		v, err := parsePercent(rest, true)
		if err != nil {
			return Term{}, fmt.Errorf("SLO term %q: %v", p, err)
		}
		t.Limit = v
	case name == MetricThroughput:
		t.Metric = name
		if strings.HasSuffix(rest, "%") {
			v, err := parsePercent(rest, false)
			if err != nil {
				return Term{}, fmt.Errorf("SLO term %q: %v", p, err)
			}
			t.Limit, t.OfOffered = v, true
		} else {
			v, err := parseNumber(strings.TrimSuffix(rest, "/s"))
			if err != nil {
				return Term{}, fmt.Errorf("SLO term %q: %v", p, err)
			}
			t.Limit = v
		}
	case strings.HasPrefix(name, "p"):
		t.Metric, t.Kind = MetricLatency, "latency"
		q := name[1:]
		if j := strings.IndexByte(q, ':'); j >= 0 {
			q, t.Kind = q[:j], q[j+1:]
			if t.Kind == "" || len(t.Kind) > 64 {
				return Term{}, fmt.Errorf("SLO term %q: the latency kind after ':' must be 1 to 64 characters", p)
			}
		}
		v, err := strconv.ParseFloat(q, 64)
		if err != nil || q == "" || math.IsNaN(v) || v <= 0 || v > 100 || strings.ContainsAny(q, "eExXpP_+-") {
			return Term{}, fmt.Errorf("SLO term %q: %q is no percentile: write p50, p99, p99.9 (above 0, at most 100)", p, name)
		}
		t.Quantile = v
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return Term{}, fmt.Errorf("SLO term %q: latency limit %q is no duration (write 20ms, 500us, 1.5s)", p, rest)
		}
		t.Limit = float64(d) / float64(time.Millisecond)
	default:
		return Term{}, fmt.Errorf("SLO term %q: unknown metric %q: use pNN[:KIND], errors, failed, shed or throughput", p, name)
	}
	return t, nil
}

func parseNumber(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%q is not a finite number at least 0", s)
	}
	return v, nil
}

// parsePercent reads "N%" as a share (N/100); a bare number is refused so 0.5 and 0.5% cannot be confused.
func parsePercent(s string, capped bool) (float64, error) {
	if !strings.HasSuffix(s, "%") {
		return 0, fmt.Errorf("limit %q must be a percentage such as 0.5%%", s)
	}
	v, err := parseNumber(strings.TrimSuffix(s, "%"))
	if err != nil {
		return 0, err
	}
	if capped && v > 100 {
		return 0, fmt.Errorf("limit %q is above 100%%", s)
	}
	return v / 100, nil
}

// NeedsOffered reports whether a term compares throughput against the offered rate.
func (s *SLO) NeedsOffered() bool {
	for _, t := range s.Terms {
		if t.OfOffered {
			return true
		}
	}
	return false
}

// Sample is the part of a run (a whole result file, or a resample of its intervals) an SLO reads.
type Sample struct {
	Counts map[string]int64
	Hists  map[string]*hist.Histogram
	Secs   float64
}

// Total is the number of operations in the sample.
func (s *Sample) Total() int64 {
	var n int64
	for _, v := range s.Counts {
		n += v
	}
	return n
}

// WholeRun is the sample of an entire result file.
func WholeRun(e *result.Envelope) Sample {
	secs := e.Elapsed().Seconds()
	if len(e.Intervals) > 0 {
		secs = 0
		for _, iv := range e.Intervals {
			secs += iv.Secs
		}
	}
	return Sample{Counts: e.Totals, Hists: e.Histograms, Secs: secs}
}

// Add merges an interval into the sample (the sample's maps become its own).
func (s *Sample) Add(iv *result.Interval) {
	if s.Counts == nil {
		s.Counts = map[string]int64{}
		s.Hists = map[string]*hist.Histogram{}
	}
	for k, v := range iv.Counts {
		s.Counts[k] += v
	}
	for k, h := range iv.Latency {
		if h == nil {
			continue
		}
		if s.Hists[k] == nil {
			s.Hists[k] = hist.New()
		}
		s.Hists[k].Merge(h)
	}
	s.Secs += iv.Secs
}

// Value is what a term's metric reads from a sample (offered is the step's arrival rate, 0 when
// unknown); ok is false when the metric has nothing to read (no operations, no such histogram).
func (t *Term) Value(s *Sample, offered float64) (v float64, ok bool) {
	total := s.Total()
	switch t.Metric {
	case MetricLatency:
		h := s.Hists[t.Kind]
		if h == nil || h.Count() == 0 {
			return 0, false
		}
		return float64(h.Quantile(t.Quantile/100)) / float64(time.Millisecond), true
	case MetricErrors, MetricFailed, MetricShed:
		if total == 0 {
			return 0, false
		}
		var refused int64
		for k, n := range s.Counts {
			if result.IsRefusal(k) {
				refused += n
			}
		}
		succ := s.Counts[result.ClassSuccess]
		switch t.Metric {
		case MetricErrors:
			return float64(total-succ-refused) / float64(total), true
		case MetricFailed:
			return float64(total-succ) / float64(total), true
		default:
			return float64(refused) / float64(total), true
		}
	case MetricThroughput:
		if s.Secs <= 0 {
			return 0, false
		}
		tp := float64(s.Counts[result.ClassSuccess]) / s.Secs
		if t.OfOffered {
			if offered <= 0 {
				return 0, false
			}
			return tp / offered, true
		}
		return tp, true
	}
	return 0, false
}

// Holds reports whether the term holds for v.
func (t *Term) Holds(v float64) bool {
	switch {
	case t.Below && t.Inclusive:
		return v <= t.Limit
	case t.Below:
		return v < t.Limit
	case t.Inclusive:
		return v >= t.Limit
	}
	return v > t.Limit
}

// TermResult is one term evaluated on one sample.
type TermResult struct {
	Term     string  `json:"term"`
	Metric   string  `json:"metric"`
	Observed float64 `json:"observed"`
	Measured bool    `json:"measured"`
	Held     bool    `json:"held"`
}

// Evaluate checks every term; a term with nothing to measure does not hold (a run with no
// operations proves no SLO).
func (s *SLO) Evaluate(smp *Sample, offered float64) (held bool, terms []TermResult) {
	held = true
	for i := range s.Terms {
		t := &s.Terms[i]
		v, ok := t.Value(smp, offered)
		r := TermResult{Term: t.Text, Metric: t.Metric, Observed: v, Measured: ok, Held: ok && t.Holds(v)}
		if !r.Held {
			held = false
		}
		terms = append(terms, r)
	}
	return held, terms
}

// Met reports whether any term of a stop condition holds (an abort condition is met by any of its
// clauses): the opposite sense of an SLO.
func (s *SLO) Met(smp *Sample, offered float64) (bool, string) {
	for i := range s.Terms {
		t := &s.Terms[i]
		if v, ok := t.Value(smp, offered); ok && t.Holds(v) {
			return true, fmt.Sprintf("%s (observed %.4g)", t.Text, v)
		}
	}
	return false, ""
}

// MarshalJSON writes the SLO as its text; UnmarshalJSON parses it again, so a file's terms are
// always the parser's reading of its text.
func (s *SLO) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // p99<20ms stays readable
	if err := enc.Encode(s.Text); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// UnmarshalJSON reads an SLO from its text.
func (s *SLO) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return fmt.Errorf("an SLO is a string such as \"p99<20ms,errors<0.5%%\": %w", err)
	}
	p, err := ParseSLO(text)
	if err != nil {
		return err
	}
	*s = *p
	return nil
}
