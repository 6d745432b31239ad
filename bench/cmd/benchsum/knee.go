package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func runSearchKnee(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	out := args[0]
	reps, err := intArg("REPS", args[1])
	if err != nil {
		return err
	}
	var knees []string
	var kn, fs []float64
	for i := 1; i <= reps; i++ {
		r, err := openSearch(join(out, fmt.Sprintf("search%d.json", i)))
		if err != nil {
			return err
		}
		tb, err := os.ReadFile(join(out, fmt.Sprintf("search%d.time", i)))
		if err != nil {
			return err
		}
		tf := strings.Fields(string(tb))
		if len(tf) != 2 {
			return fmt.Errorf("search%d.time: want two times (start end), have %q", i, string(tb))
		}
		t0, err0 := strconv.ParseFloat(tf[0], 64)
		t1, err1 := strconv.ParseFloat(tf[1], 64)
		if err0 != nil || err1 != nil {
			return fmt.Errorf("search%d.time: %q is not two times in seconds", i, string(tb))
		}
		k, f := show(r.Knee), show(r.FirstFail)
		knees = append(knees, k)
		if r.Knee != nil {
			kn = append(kn, *r.Knee)
		}
		if r.FirstFail != nil {
			fs = append(fs, *r.FirstFail)
		}
		e.printf("search %d: knee %s rate, bracket [%s, %s), P(knee in bracket) %s, broke first %s, %d trials in %d steps, %.1f min\n",
			i, k, k, f,
			show(r.Confidence.KneeInBracket), show(r.BrokeFirst), r.TrialCount, len(r.Steps), (t1-t0)/60)
		v, err := os.ReadFile(join(out, fmt.Sprintf("verify%d.txt", i)))
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(string(v), "\n")
		e.printf("  %s\n", strings.TrimSpace(first))
	}
	lo, hi := "None", "None"
	var loV, hiV float64
	if len(kn) > 0 {
		loV = kn[0]
		for _, x := range kn {
			loV = max(loV, x)
		}
		lo = strconv.FormatFloat(loV, 'f', -1, 64)
	}
	if len(fs) > 0 {
		hiV = fs[0]
		for _, x := range fs {
			hiV = min(hiV, x)
		}
		hi = strconv.FormatFloat(hiV, 'f', -1, 64)
	}
	inside := len(kn) > 0 && len(kn) == len(fs) && len(fs) == reps && loV < hiV
	e.printf("knees [%s]: every bracket overlaps every other: %s (common range [%s, %s))\n",
		strings.Join(knees, ", "), pyBool(inside), lo, hi)
	return nil
}
