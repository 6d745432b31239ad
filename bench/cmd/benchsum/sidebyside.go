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

// benchFigures is what a handshake-bench or request-bench result did.
type benchFigures struct {
	rate     float64 // handshakes or requests per second
	headline float64 // what side-by-side compares: full handshakes per second, requests per second
	done     int64   // handshakes or requests completed
	bad      int64   // handshakes failed, requests with an error
	badly    string  // what bad counts: "failed", "errors"
}

// benchOf reads the handshakes section (hs) or the requests section of the result file name.
func benchOf(name string, r *linkkeysresult.Result, hs bool) (benchFigures, error) {
	if hs {
		h := r.Handshakes
		if h == nil {
			return benchFigures{}, fmt.Errorf("%s has no handshakes section", name)
		}
		return benchFigures{h.Rate, h.FullRate, h.Completed, h.Failed, "failed"}, nil
	}
	q := r.Requests
	if q == nil {
		return benchFigures{}, fmt.Errorf("%s has no requests section", name)
	}
	return benchFigures{q.Rate, q.Rate, q.Completed, q.Errors, "errors"}, nil
}

// benchRow is side-by-side's row of a handshake-bench (hs) or request-bench result: the headline
// rate, client CPU per completed operation, and the failures.
func benchRow(hs bool) func(string, *linkkeysresult.Result) (sideRow, error) {
	return func(name string, r *linkkeysresult.Result) (sideRow, error) {
		f, err := benchOf(name, r, hs)
		return sideRow{f.headline, cpuUsPerOp(r.ClientCPU, f.done), fmt.Sprint(f.bad)}, err
	}
}

// ddosAttempts is a ddos result's attempts and the verdict of the server's accounting of them.
func ddosAttempts(name string, d *linkkeysresult.Result) (*linkkeysresult.Attempts, string, error) {
	if d.Attempts == nil {
		return nil, "", fmt.Errorf("%s has no attempts section", name)
	}
	return d.Attempts, accounting(d.Server), nil
}

// ddosRow is side-by-side's row of a ddos result: attempts per second of the run's elapsed time,
// client CPU per attempt, and the attempts' counts with the verdict of the server's accounting.
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
	kinds := []struct {
		key, title string
		row        func(string, *linkkeysresult.Result) (sideRow, error)
	}{
		{"hs", "handshake-bench full handshakes/s", benchRow(true)},
		{"rq", "request-bench --pipeline 8 requests/s", benchRow(false)},
		{"ddos", "ddos attempts/s", ddosRow},
	}
	rows := map[string][]pairRound[sideRow]{}
	for i := 1; i <= rounds; i++ {
		got := map[string]map[string]sideRow{"hs": {}, "rq": {}, "ddos": {}}
		for _, b := range []string{"old", "new"} {
			for _, k := range kinds {
				name := fmt.Sprintf("%s-%s-%d.json", k.key, b, i)
				r, err := openResult(join(out, name))
				if err != nil {
					return err
				}
				if got[k.key][b], err = k.row(name, r); err != nil {
					return err
				}
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
