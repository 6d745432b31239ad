package main

import (
	"fmt"
	"strings"
)

// calibRun is what a throughput needs of a keycast run file: successes and seconds per interval.
type calibRun struct {
	IntervalSecs float64 `json:"interval_secs"`
	Intervals    []struct {
		Counts map[string]float64 `json:"counts"`
		Secs   float64            `json:"secs"`
	} `json:"intervals"`
}

// throughput is successes per second over the run's intervals.
func throughput(path string) (float64, error) {
	var r calibRun
	if err := readJSON(path, &r); err != nil {
		return 0, err
	}
	var ok, secs float64
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
	return ok / secs, nil
}

// compareMetric is one metric of a `loadproof compare --format json` file.
type compareMetric struct {
	Name      string   `json:"name"`
	Verdict   string   `json:"verdict"`
	ChangePct *float64 `json:"change_pct"`
	LowPct    *float64 `json:"low_pct"`
	HighPct   *float64 `json:"high_pct"`
	A         *float64 `json:"a"`
	B         *float64 `json:"b"`
}

type comparison struct {
	Metrics []compareMetric `json:"metrics"`
}

// byName indexes the metrics; the headline is p99 of the first latency kind the runs have.
func (c comparison) byName() map[string]compareMetric {
	m := map[string]compareMetric{}
	for _, x := range c.Metrics {
		m[x.Name] = x
	}
	return m
}

func (c comparison) headline() string {
	m := c.byName()
	for _, k := range []string{"latency", "connect_handshake", "request", "resumed"} {
		if _, ok := m["p99:"+k]; ok {
			return "p99:" + k
		}
	}
	return ""
}

// opt prints an optional figure: - when absent.
func opt(verb string, x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf(verb, *x)
}

// interval is a metric's change and its confidence interval.
func (m compareMetric) interval() string {
	return fmt.Sprintf("%s%% [%s, %s]", opt("%+.1f", m.ChangePct), opt("%+.1f", m.LowPct), opt("%+.1f", m.HighPct))
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
	load := func(part string, r int) (comparison, bool) {
		var c comparison
		if err := readJSON(join(out, fmt.Sprintf("%s-%d-compare.json", part, r)), &c); err != nil {
			e.printf("  %s %d: no comparison (%v)\n", part, r, err)
			return c, false
		}
		return c, true
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
	get := func(m map[string]compareMetric, name string) (compareMetric, error) {
		x, ok := m[name]
		if !ok {
			return x, fmt.Errorf("a comparison has no metric %q", name)
		}
		return x, nil
	}

	e.printf("(a) identical configurations\n")
	allNC, headNC, count := 0, 0, 0
	var names []string // metrics in the order first seen
	changed, per := map[string]int{}, map[string]int{}
	for r := 1; r <= reps; r++ {
		c, ok := load("ident", r)
		if !ok {
			continue
		}
		count++
		h := c.headline()
		v := c.byName()
		var ch []string
		for _, m := range c.Metrics {
			if _, seen := per[m.Name]; !seen {
				names = append(names, m.Name)
			}
			per[m.Name]++
			if m.Verdict != "no change" {
				changed[m.Name]++
				ch = append(ch, fmt.Sprintf("%s %s %s", m.Name, m.Verdict, m.interval()))
			}
		}
		if len(ch) == 0 {
			allNC++
		}
		head := true
		for _, k := range []string{"throughput", h} {
			if k != "" && v[k].Verdict != "no change" {
				head = false
			}
		}
		if head {
			headNC++
		}
		t, err := get(v, "throughput")
		if err != nil {
			return err
		}
		hm, err := get(v, h)
		if err != nil {
			return err
		}
		tail := "no change on every metric"
		if len(ch) > 0 {
			tail = strings.Join(ch, "; ")
		}
		e.printf("  %2d: throughput %s vs %s/s %s, %s %s vs %s ms %s: %s\n", r, opt("%.0f", t.A), opt("%.0f", t.B), t.interval(),
			h, opt("%.2f", hm.A), opt("%.2f", hm.B), hm.interval(), tail)
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
			c, ok := load(p.part, r)
			if !ok {
				continue
			}
			h := c.headline()
			v := c.byName()
			t, err := get(v, "throughput")
			if err != nil {
				return err
			}
			hm, err := get(v, h)
			if err != nil {
				return err
			}
			p50, err := get(v, strings.Replace(h, "p99", "p50", 1))
			if err != nil {
				return err
			}
			if t.Verdict == "worse" {
				worse++
			}
			e.printf("  %d: throughput %s vs %s/s %s %s; %s %s vs %s ms %s %s; p50 %s %s\n", r, opt("%.0f", t.A), opt("%.0f", t.B),
				t.interval(), t.Verdict, h, opt("%.2f", hm.A), opt("%.2f", hm.B), hm.interval(), hm.Verdict, p50.interval(), p50.Verdict)
		}
		e.printf("  throughput worse: %d/%d\n", worse, repsB)
		e.printf("%s\n", pairs(p.part, repsB, runsB))
	}
	return nil
}
