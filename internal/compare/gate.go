package compare

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Gate is one allowance: a metric's change must stay above (">") or below ("<") Limit percent.
type Gate struct {
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Limit  float64 `json:"limit_pct"`
}

// GateResult says which gates failed: a gated metric worse beyond its allowance at the confidence
// (the whole interval past the limit).
type GateResult struct {
	Gates  []Gate   `json:"gates"`
	Failed []string `json:"failed,omitempty"`
	Passed bool     `json:"passed"`
}

// maxGateText bounds a gate expression.
const maxGateText = 4096

// ParseGate reads "throughput>-3%,p99<+5%,error_rate<+0.5%": comma-separated metric, < or >, and a
// signed percentage. Metrics: throughput, error_rate, refusal_rate, p50, p90, p99, p99.9 (the
// headline latency kind) or pNN:KIND.
func ParseGate(s string) ([]Gate, error) {
	if len(s) > maxGateText {
		return nil, fmt.Errorf("gate: %d characters: at most %d", len(s), maxGateText)
	}
	var out []Gate
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("gate %q: an empty item (two commas, or a trailing one)", s)
		}
		i := strings.IndexAny(part, "<>")
		if i <= 0 {
			return nil, fmt.Errorf("gate item %q: want METRIC<LIMIT%% or METRIC>LIMIT%% (throughput>-3%%, p99<+5%%)", part)
		}
		name, op, lim := strings.TrimSpace(part[:i]), part[i:i+1], strings.TrimSpace(part[i+1:])
		if err := checkMetricName(name); err != nil {
			return nil, fmt.Errorf("gate item %q: %w", part, err)
		}
		num, ok := strings.CutSuffix(lim, "%")
		if !ok {
			return nil, fmt.Errorf("gate item %q: the limit %q needs a %% sign: it is a change in percent", part, lim)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e6 {
			return nil, fmt.Errorf("gate item %q: the limit %q is not a percentage", part, lim)
		}
		out = append(out, Gate{Metric: name, Op: op, Limit: v})
	}
	return out, nil
}

func checkMetricName(name string) error {
	switch name {
	case "throughput", "error_rate", "refusal_rate":
		return nil
	}
	p, kind, _ := strings.Cut(name, ":")
	for _, q := range percentiles {
		if p == q.name {
			if strings.ContainsAny(kind, " <>,%") {
				return fmt.Errorf("latency kind %q", kind)
			}
			return nil
		}
	}
	return fmt.Errorf("unknown metric %q: throughput, error_rate, refusal_rate, p50, p90, p99, p99.9 or pNN:KIND", name)
}

// headlineKinds are the latency kinds a bare "p99" means, in order of preference (successes).
var headlineKinds = []string{"latency", "connect_handshake", "request", "resumed"}

// ApplyGate judges c's metrics against the gates. A gate naming a metric the runs lack is an error.
func (c *Comparison) ApplyGate(gates []Gate) error {
	res := &GateResult{Gates: gates, Passed: true}
	for _, g := range gates {
		m := c.find(g.Metric)
		if m == nil {
			return fmt.Errorf("gate: the runs have no metric %q (they have %s)", g.Metric, strings.Join(c.names(), ", "))
		}
		if math.IsNaN(m.Low) || math.IsNaN(m.High) {
			continue // no interval: nothing shown beyond doubt
		}
		bad := g.Op == ">" && m.High < g.Limit || g.Op == "<" && m.Low > g.Limit
		if bad {
			res.Passed = false
			res.Failed = append(res.Failed, fmt.Sprintf("%s changed %+.2f%% [%+.2f%%, %+.2f%%], beyond the allowance %s%+g%%", m.Name, m.Change, m.Low, m.High, g.Op, g.Limit))
		}
	}
	c.Gate = res
	return nil
}

// Find returns the metric a gate's name means (a bare "p99" is the headline latency kind's), or
// nil when the comparison has none: the page draws each allowance on the row it judges.
func (c *Comparison) Find(name string) *Metric { return c.find(name) }

func (c *Comparison) find(name string) *Metric {
	if !strings.Contains(name, ":") && strings.HasPrefix(name, "p") {
		for _, k := range headlineKinds {
			if m := c.find(name + ":" + k); m != nil {
				return m
			}
		}
		for i := range c.Metrics {
			if strings.HasPrefix(c.Metrics[i].Name, name+":") {
				return &c.Metrics[i]
			}
		}
		return nil
	}
	for i := range c.Metrics {
		if c.Metrics[i].Name == name {
			return &c.Metrics[i]
		}
	}
	return nil
}

func (c *Comparison) names() []string {
	out := make([]string, len(c.Metrics))
	for i, m := range c.Metrics {
		out[i] = m.Name
	}
	return slices.Compact(out)
}
