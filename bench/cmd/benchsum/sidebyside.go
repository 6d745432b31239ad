package main

import "fmt"

// sideBySide is the LinkKeys client figures of bench/linkkeys-side-by-side.sh's result files.
type sideBySideResult struct {
	envelopeMachine
	ClientCPU  cpuNs `json:"client_cpu"`
	Handshakes *struct {
		FullPerSec float64 `json:"full_per_sec"`
		Completed  float64 `json:"completed"`
		Failed     int64   `json:"failed"`
	} `json:"handshakes"`
	Requests *struct {
		PerSec    float64 `json:"requests_per_sec"`
		Completed float64 `json:"completed"`
		Errors    int64   `json:"errors"`
	} `json:"requests"`
	Attempts *attempts     `json:"attempts"`
	Elapsed  cpuNs         `json:"elapsed"`
	Server   *serverChecks `json:"server"`
}

// attempts is the attempts section of a LinkKeys connections or ddos result.
type attempts struct {
	Attempted float64 `json:"attempted"`
	Succeeded float64 `json:"succeeded"`
	Failed    float64 `json:"failed"`
}

func cpuUsPerOp(c cpuNs, ops float64) float64 { return c.Ns / 1e3 / max(ops, 1) }

// sideRow is one build's figures in one round: the rate, the client CPU per operation and what
// else the summary prints after them.
type sideRow struct {
	rate, cpu float64
	extra     string
}

// pairRound is one round of two sides (A, B) of a side-by-side bench.
type pairRound[T any] struct {
	round int
	a, b  T
}

func runSideBySide(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	out := args[0]
	rounds, err := intArg("ROUNDS", args[1])
	if err != nil {
		return err
	}
	read := func(name string) (sideBySideResult, error) {
		var r sideBySideResult
		err := readJSON(join(out, name+".json"), &r)
		return r, err
	}
	kinds := []struct{ key, title string }{
		{"hs", "handshake-bench full handshakes/s"},
		{"rq", "request-bench --pipeline 8 requests/s"},
		{"ddos", "ddos attempts/s"},
	}
	rows := map[string][]pairRound[sideRow]{}
	for i := 1; i <= rounds; i++ {
		got := map[string]map[string]sideRow{"hs": {}, "rq": {}, "ddos": {}}
		for _, b := range []string{"old", "new"} {
			hs, err := read(fmt.Sprintf("hs-%s-%d", b, i))
			if err != nil {
				return err
			}
			if hs.Handshakes == nil {
				return fmt.Errorf("hs-%s-%d.json has no handshakes section", b, i)
			}
			h := hs.Handshakes
			got["hs"][b] = sideRow{h.FullPerSec, cpuUsPerOp(hs.ClientCPU, h.Completed), fmt.Sprint(h.Failed)}
			rq, err := read(fmt.Sprintf("rq-%s-%d", b, i))
			if err != nil {
				return err
			}
			if rq.Requests == nil {
				return fmt.Errorf("rq-%s-%d.json has no requests section", b, i)
			}
			q := rq.Requests
			got["rq"][b] = sideRow{q.PerSec, cpuUsPerOp(rq.ClientCPU, q.Completed), fmt.Sprint(q.Errors)}
			d, err := read(fmt.Sprintf("ddos-%s-%d", b, i))
			if err != nil {
				return err
			}
			if d.Attempts == nil {
				return fmt.Errorf("ddos-%s-%d.json has no attempts section", b, i)
			}
			a := d.Attempts
			verdict := "exact"
			if ok, why := d.Server.exact(); !ok {
				verdict = "MISMATCH " + why
			}
			got["ddos"][b] = sideRow{ratio(a.Attempted, d.Elapsed.Ns/1e9), cpuUsPerOp(d.ClientCPU, a.Attempted),
				fmt.Sprintf("%.0f/%.0f/%.0f %s", a.Attempted, a.Succeeded, a.Failed, verdict)}
		}
		for k, v := range got {
			rows[k] = append(rows[k], pairRound[sideRow]{i, v["old"], v["new"]})
		}
	}
	m, err := resultMachine(join(out, "hs-new-1.json"))
	if err != nil {
		return err
	}
	e.printf("== machine: %s, %d cores (GOMAXPROCS %d), %.1f GiB, kernel %s, nofile %d/%d, %s\n",
		m.CPUModel, m.Cores, m.GOMAXPROCS, float64(m.MemoryBytes)/gib, m.Kernel, m.NofileSoft, m.NofileHard, m.GoVersion)
	for _, k := range kinds {
		e.printf("== %s (round, build, rate, client CPU µs/op, extra)\n", k.title)
		var rates, cpus []float64
		for _, p := range rows[k.key] {
			for _, r := range []struct {
				b string
				sideRow
			}{{"old", p.a}, {"new", p.b}} {
				e.printf("  %d %s %10.1f %8.2f  %s\n", p.round, r.b, r.rate, r.cpu, r.extra)
			}
			rates = append(rates, ratio(p.b.rate, p.a.rate))
			cpus = append(cpus, ratio(p.b.cpu, p.a.cpu))
			e.printf("  %d new/old rate %s, CPU/op %s\n", p.round, num("%.3f", rates[len(rates)-1]), num("%.3f", cpus[len(cpus)-1]))
		}
		e.printf("  median new/old: rate %s, client CPU per op %s\n", num("%.3f", median(rates)), num("%.3f", median(cpus)))
	}
	return nil
}
