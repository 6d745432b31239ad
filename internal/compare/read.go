package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/loadproof/loadproof/internal/boundedfile"
)

// comparisonFile is the bounded read of a comparison file: a few dozen metrics, far below the cap.
var comparisonFile = boundedfile.Kind{Name: "comparison file", Max: 16 << 20}

// ReadFile reads a comparison file that `loadproof compare --format json` wrote (its -o file or
// its standard output): Parse of the file's bytes, read within a size cap.
func ReadFile(path string) (*Comparison, error) {
	b, err := boundedfile.Read(path, comparisonFile)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a comparison in the JSON form `loadproof compare --format json` writes; a figure
// written as null (nothing measured, no interval) reads as NaN. It is the one reader of that
// form, so a tool that summarises comparisons reads the model the command wrote. A comparison
// must name its metrics and give each a known verdict.
func Parse(b []byte) (*Comparison, error) {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("compare: reading a comparison: not a JSON object; give the file `loadproof compare --format json` wrote")
	}
	var c Comparison
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("compare: reading a comparison: %w", err)
	}
	if c.RunsA < 1 || c.RunsB < 1 {
		return nil, fmt.Errorf("compare: reading a comparison: runs_a %d and runs_b %d, want at least one run a side; is this a comparison file?", c.RunsA, c.RunsB)
	}
	if len(c.Metrics) == 0 {
		return nil, fmt.Errorf("compare: reading a comparison: no metrics; is this a comparison file?")
	}
	for i, m := range c.Metrics {
		if m.Name == "" {
			return nil, fmt.Errorf("compare: reading a comparison: metric %d has no name", i)
		}
		switch m.Verdict {
		case Better, Worse, NoChange:
		default:
			return nil, fmt.Errorf("compare: reading a comparison: metric %q has verdict %q, want %q, %q or %q", m.Name, m.Verdict, Better, Worse, NoChange)
		}
	}
	return &c, nil
}

// UnmarshalJSON reads the form MarshalJSON writes: null figures are NaN.
func (m *Metric) UnmarshalJSON(b []byte) error {
	var in metricJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	f := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*m = Metric(in.metricPlain)
	m.A, m.B, m.Change, m.Low, m.High = f(in.A), f(in.B), f(in.Change), f(in.Low), f(in.High)
	return nil
}
