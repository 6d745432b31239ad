package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/loadproof/loadproof/internal/compare"
)

// throughput is successes per second over a Keycast run's intervals.
func throughput(path string) (float64, error) {
	r, err := openKeycast(path)
	if err != nil {
		return 0, err
	}
	if r.Envelope == nil {
		return 0, fmt.Errorf("%s: a results file without loadproof's envelope (upstream's schema) has no intervals", path)
	}
	var ok int64
	var secs float64
	for _, iv := range r.Intervals {
		ok += iv.Counts["success"]
		switch {
		case iv.Secs != 0:
			secs += iv.Secs
		case r.IntervalSecs != 0:
			secs += r.IntervalSecs
		default:
			secs++
		}
	}
	if secs == 0 {
		return 0, fmt.Errorf("%s: no intervals", path)
	}
	return float64(ok) / secs, nil
}

// metrics indexes a comparison's metrics by name.
func metrics(c *compare.Comparison) map[string]compare.Metric {
	m := map[string]compare.Metric{}
	for _, x := range c.Metrics {
		m[x.Name] = x
	}
	return m
}

// headline is p99 of the first latency kind the runs have.
func headline(m map[string]compare.Metric) string {
	for _, k := range []string{"latency", "connect_handshake", "request", "resumed"} {
		if _, ok := m["p99:"+k]; ok {
			return "p99:" + k
		}
	}
	return ""
}

// opt prints a figure of a comparison: - where it has none (NaN, null in the file).
func opt(verb string, x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf(verb, x)
}

// interval is a metric's change and its confidence interval.
func interval(m compare.Metric) string {
	return fmt.Sprintf("%s%% [%s, %s]", opt("%+.1f", m.Change), opt("%+.1f", m.Low), opt("%+.1f", m.High))
}

// headlines are the metrics every comparison line prints: throughput and the headline p99.
type headlines struct {
	h      string // the headline's name
	t, hm  compare.Metric
	byName map[string]compare.Metric
}

func headlinesOf(c *compare.Comparison) (headlines, error) {
	v := metrics(c)
	h := headlines{h: headline(v), byName: v}
	var err error
	if h.t, err = metric(v, "throughput"); err != nil {
		return h, err
	}
	h.hm, err = metric(v, h.h)
	return h, err
}

func metric(m map[string]compare.Metric, name string) (compare.Metric, error) {
	x, ok := m[name]
	if !ok {
		return x, fmt.Errorf("a comparison has no metric %q", name)
	}
	return x, nil
}

func runCalibration(e *env, args []string) error {
	if err := wantArgs(args, 5, 5); err != nil {
		return err
	}
	out := args[0]
	var n [4]int
	for i, name := range []string{"REPS", "REPS_B", "RUNS", "RUNS_B"} {
		v, err := intArg(name, args[i+1])
		if err != nil {
			return err
		}
		n[i] = v
	}
	reps, repsB, runs, runsB := n[0], n[1], n[2], n[3]
	load := func(part string, r int) (headlines, *compare.Comparison, bool, error) {
		c, err := compare.ReadFile(join(out, fmt.Sprintf("%s-%d-compare.json", part, r)))
		if err != nil {
			e.printf("  %s %d: no comparison (%v)\n", part, r, err)
			return headlines{}, nil, false, nil
		}
		h, err := headlinesOf(c)
		return h, c, true, err
	}
	// pairs: the throughput ratio B/A of each interleaved pair of runs (the side-by-side view of the noise).
	pairs := func(part string, reps, runs int) string {
		var rs []float64
		for r := 1; r <= reps; r++ {
			for i := 1; i <= runs; i++ {
				b, errB := throughput(join(out, fmt.Sprintf("%s-%d-b%d.json", part, r, i)))
				a, errA := throughput(join(out, fmt.Sprintf("%s-%d-a%d.json", part, r, i)))
				if errA != nil || errB != nil || a == 0 {
					continue
				}
				rs = append(rs, b/a)
			}
		}
		if len(rs) == 0 {
			return "  interleaved pairs: none readable"
		}
		lo, hi := rs[0], rs[0]
		for _, x := range rs {
			lo, hi = min(lo, x), max(hi, x)
		}
		return fmt.Sprintf("  interleaved pairs' throughput B/A: median %.2f, range %.2f-%.2f (%d pairs)", median(rs), lo, hi, len(rs))
	}

	e.printf("(a) identical configurations\n")
	allNC, headNC, count := 0, 0, 0
	var names []string // metrics in the order first seen
	changed, per := map[string]int{}, map[string]int{}
	for r := 1; r <= reps; r++ {
		hl, c, ok, err := load("ident", r)
		if !ok {
			continue
		}
		if err != nil {
			return err
		}
		count++
		var ch []string
		for _, m := range c.Metrics {
			if _, seen := per[m.Name]; !seen {
				names = append(names, m.Name)
			}
			per[m.Name]++
			if m.Verdict != compare.NoChange {
				changed[m.Name]++
				ch = append(ch, fmt.Sprintf("%s %s %s", m.Name, m.Verdict, interval(m)))
			}
		}
		if len(ch) == 0 {
			allNC++
		}
		if hl.t.Verdict == compare.NoChange && hl.hm.Verdict == compare.NoChange {
			headNC++
		}
		tail := "no change on every metric"
		if len(ch) > 0 {
			tail = strings.Join(ch, "; ")
		}
		t, hm := hl.t, hl.hm
		e.printf("  %2d: throughput %s vs %s/s %s, %s %s vs %s ms %s: %s\n", r, opt("%.0f", t.A), opt("%.0f", t.B), interval(t),
			hl.h, opt("%.2f", hm.A), opt("%.2f", hm.B), interval(hm), tail)
	}
	if count > 0 {
		e.printf("  no change on every metric: %d/%d; on throughput and p99: %d/%d\n", allNC, count, headNC, count)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %d/%d", k, changed[k], per[k])
		}
		e.printf("  comparisons with a change, per metric: %s\n", strings.Join(parts, ", "))
		e.printf("%s\n", pairs("ident", reps, runs))
	}
	for _, p := range []struct{ part, title string }{
		{"slots", "(b) KEYCAST_CPU_SLOTS=2 (A) against =1 (B)"},
		{"fast", "(c) KEYCAST_FAST_PATH=on (A) against =off (B)"},
	} {
		e.printf("%s\n", p.title)
		worse := 0
		for r := 1; r <= repsB; r++ {
			hl, _, ok, err := load(p.part, r)
			if !ok {
				continue
			}
			if err != nil {
				return err
			}
			p50, err := metric(hl.byName, strings.Replace(hl.h, "p99", "p50", 1))
			if err != nil {
				return err
			}
			t, hm := hl.t, hl.hm
			if t.Verdict == compare.Worse {
				worse++
			}
			e.printf("  %d: throughput %s vs %s/s %s %s; %s %s vs %s ms %s %s; p50 %s %s\n", r, opt("%.0f", t.A), opt("%.0f", t.B),
				interval(t), t.Verdict, hl.h, opt("%.2f", hm.A), opt("%.2f", hm.B), interval(hm), hm.Verdict, interval(p50), p50.Verdict)
		}
		e.printf("  throughput worse: %d/%d\n", worse, repsB)
		e.printf("%s\n", pairs(p.part, repsB, runsB))
	}
	return nil
}
