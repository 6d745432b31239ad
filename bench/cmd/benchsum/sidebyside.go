package main

import (
	"fmt"

	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

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

// outRounds reads the OUT ROUNDS arguments most summaries start with; min and max bound the
// count of arguments (wantArgs).
func outRounds(args []string, min, max int) (string, int, error) {
	if err := wantArgs(args, min, max); err != nil {
		return "", 0, err
	}
	rounds, err := intArg("ROUNDS", args[1])
	return args[0], rounds, err
}

// ddosAttempts is a ddos result's attempts and the verdict of the server's accounting of them.
func ddosAttempts(name string, d *linkkeysresult.Result) (*linkkeysresult.Attempts, string, error) {
	if d.Attempts == nil {
		return nil, "", fmt.Errorf("%s.json has no attempts section", name)
	}
	return d.Attempts, accounting(d.Server), nil
}

// ddosRow is a ddos result's figures: attempts per second of the run's elapsed time, client CPU per
// attempt, and the attempts' counts with the verdict of the server's accounting.
func ddosRow(name string, d *linkkeysresult.Result) (sideRow, error) {
	a, verdict, err := ddosAttempts(name, d)
	if err != nil {
		return sideRow{}, err
	}
	return sideRow{ratio(float64(a.Attempted), float64(d.Elapsed)/1e9), cpuUsPerOp(d.ClientCPU, a.Attempted),
		fmt.Sprintf("%d/%d/%d %s", a.Attempted, a.Succeeded, a.Failed, verdict)}, nil
}

func runSideBySide(e *env, args []string) error {
	out, rounds, err := outRounds(args, 2, 2)
	if err != nil {
		return err
	}
	read := func(name string) (*linkkeysresult.Result, error) { return openResult(join(out, name+".json")) }
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
			got["hs"][b] = sideRow{h.FullRate, cpuUsPerOp(hs.ClientCPU, h.Completed), fmt.Sprint(h.Failed)}
			rq, err := read(fmt.Sprintf("rq-%s-%d", b, i))
			if err != nil {
				return err
			}
			if rq.Requests == nil {
				return fmt.Errorf("rq-%s-%d.json has no requests section", b, i)
			}
			q := rq.Requests
			got["rq"][b] = sideRow{q.Rate, cpuUsPerOp(rq.ClientCPU, q.Completed), fmt.Sprint(q.Errors)}
			name := fmt.Sprintf("ddos-%s-%d", b, i)
			d, err := read(name)
			if err != nil {
				return err
			}
			if got["ddos"][b], err = ddosRow(name, d); err != nil {
				return err
			}
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
