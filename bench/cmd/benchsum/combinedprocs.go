package main

import (
	"fmt"
	"slices"
)

// combinedProcsRow is one layout's figures in one round.
type combinedProcsRow struct {
	req, hs, p50, p99 float64
	errors            int64
	apart             bool // the two streams ran in different processes
}

func readCombinedProcs(path string) (combinedProcsRow, error) {
	r, err := openResult(path)
	if err != nil {
		return combinedProcsRow{}, err
	}
	if r.Combined == nil {
		return combinedProcsRow{}, fmt.Errorf("%s has no combined section: not a combined result", path)
	}
	var row combinedProcsRow
	var hsPIDs, rqPIDs []int
	found := 0
	for _, s := range r.Combined.Streams {
		if s.Result == nil {
			continue
		}
		switch {
		case s.Name == "handshakes" && s.Result.Handshakes != nil:
			row.hs, hsPIDs = s.Result.Handshakes.Rate, s.PIDs
			found++
		case s.Name == "requests" && s.Result.Requests != nil:
			q := s.Result.Requests
			row.req, row.errors, rqPIDs = q.Rate, q.Errors, s.PIDs
			if q.Latency != nil {
				l := q.Latency.Summary()
				row.p50, row.p99 = l.P50Ms, l.P99Ms
			}
			found++
		}
	}
	if found != 2 {
		return combinedProcsRow{}, fmt.Errorf("%s lacks a handshakes or a requests stream", path)
	}
	row.apart = len(hsPIDs) > 0 && len(rqPIDs) > 0
	for _, p := range hsPIDs {
		row.apart = row.apart && !slices.Contains(rqPIDs, p)
	}
	return row, nil
}

func runCombinedProcs(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	out := args[0]
	rounds, err := intArg("ROUNDS", args[1])
	if err != nil {
		return err
	}
	m, err := resultMachine(join(out, "split-1.json"))
	if err != nil {
		return err
	}
	e.printf("== machine: %s, %d cores (GOMAXPROCS %d), %.1f GiB, kernel %s, %s\n",
		m.CPUModel, m.Cores, m.GOMAXPROCS, float64(m.MemoryBytes)/gib, m.Kernel, m.GoVersion)
	e.printf("== request stream beside handshake loops (round, layout, requests/s, p50 ms, p99 ms, errors, handshakes/s, processes)\n")
	var reqs, hss []float64
	for i := 1; i <= rounds; i++ {
		rows := map[string]combinedProcsRow{}
		for _, l := range []string{"shared", "split"} {
			row, err := readCombinedProcs(join(out, fmt.Sprintf("%s-%d.json", l, i)))
			if err != nil {
				return err
			}
			procs := "one"
			if row.apart {
				procs = "apart"
			}
			e.printf("  %d %-6s %10.1f %7.3f %7.3f %6d %9.1f  %s\n", i, l, row.req, row.p50, row.p99, row.errors, row.hs, procs)
			rows[l] = row
		}
		reqs = append(reqs, ratio(rows["split"].req, rows["shared"].req))
		hss = append(hss, ratio(rows["split"].hs, rows["shared"].hs))
		e.printf("  %d split/shared: requests/s %s, handshakes/s %s\n", i, num("%.3f", reqs[len(reqs)-1]), num("%.3f", hss[len(hss)-1]))
	}
	e.printf("  median split/shared: requests/s %s, handshakes/s %s\n", num("%.3f", median(reqs)), num("%.3f", median(hss)))
	return nil
}
