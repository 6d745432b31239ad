package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
)

// MaxPhaseResultsBytes caps a phase results file that Recompute reads.
const MaxPhaseResultsBytes = 256 << 20

// Recompute recomputes a bundle's checks, stop checks, phase outcomes and verdict from its plan and
// its phase results files, with the rules the executor used when it wrote them, and returns, one
// line each, everything evidence.json states differently (empty: it says what its figures say). A
// phase's results come from its results file (which the manifest covers); results embedded in
// evidence.json must equal the file's. `loadproof verify` and `loadproof report` reach it through
// evidence.VerifyOptions.Recompute.
func Recompute(b *evidence.Bundle) []string {
	if b.Evidence.HarnessName() == linkkeysresult.Harness {
		return recomputeLinkKeys(b)
	}
	return recomputeKeycast(b)
}

// phaseInput is one recorded phase as the recomputation needs it.
type phaseInput struct {
	Name, ResultsFile    string
	Passed, StopBreached bool
	Interrupted          bool
	Error                *string
	LiveStop             *result.StopEvent
	Checks, StopChecks   []Check
	embedded             json.RawMessage // results as evidence.json embeds them (null when none)
	recordedMetrics      map[string]Number
	hasRecordedMetrics   bool
}

// recomputed is one phase's recomputation: its checks from its figures and its outcome.
type recomputed struct {
	checks, stop []Check
	has          bool
}

func recomputeKeycast(b *evidence.Bundle) []string {
	ev, err := ReadEvidence(b.Raw)
	if err != nil {
		return []string{err.Error()}
	}
	if ev.Plan == nil {
		return []string{"evidence.json has no plan: the checks cannot be recomputed"}
	}
	var diffs []string
	var raw struct {
		Phases []struct {
			Results json.RawMessage `json:"results"`
		} `json:"phases"`
	}
	_ = json.Unmarshal(b.Raw, &raw) // ReadEvidence decoded the same bytes
	vs := make([]PhaseEvidence, 0, len(ev.Phases))
	for i, pe := range ev.Phases {
		if i >= len(ev.Plan.Phases) {
			diffs = append(diffs, fmt.Sprintf("phase %d %q is not in the plan (%d phases)", i+1, pe.Name, len(ev.Plan.Phases)))
			break
		}
		ph := &ev.Plan.Phases[i]
		if ph.Name != pe.Name {
			diffs = append(diffs, fmt.Sprintf("phase %d is %q, but the plan's phase %d is %q", i+1, pe.Name, i+1, ph.Name))
		}
		in := phaseInput{Name: pe.Name, ResultsFile: pe.ResultsFile, Passed: pe.Passed, StopBreached: pe.StopBreached,
			Interrupted: pe.Interrupted, Error: pe.Error, LiveStop: pe.LiveStop, Checks: pe.Checks, StopChecks: pe.StopChecks}
		if i < len(raw.Phases) {
			in.embedded = raw.Phases[i].Results
		}
		var rc recomputed
		if pe.ResultsFile != "" {
			data, err := b.ReadMember(pe.ResultsFile, MaxPhaseResultsBytes)
			if err == nil {
				var res *keycastresult.Results
				if res, err = keycastresult.Parse(data); err == nil {
					rc.checks, rc.stop = PhaseChecks(ev.Plan, ph, res.Summary)
					rc.has = true
					diffs = append(diffs, sameTiming(pe.Name, ph.DurationSeconds, pe.PlannedSecs, pe.ElapsedSecs, pe.Overran, res.Summary.DurationSecs)...)
					diffs = append(diffs, sameResults(pe.Name, in.embedded, res)...)
				}
			}
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("phase %q: results file %s: %v", pe.Name, pe.ResultsFile, err))
				continue
			}
		} else if pe.Results != nil {
			// A phase that ran but whose results file could not be written: its figures are the
			// embedded ones only.
			rc.checks, rc.stop = PhaseChecks(ev.Plan, ph, pe.Results.Summary)
			rc.has = true
		}
		p, d := recomputePhase(in, rc)
		diffs = append(diffs, d...)
		pe.Checks, pe.StopChecks, pe.Passed, pe.StopBreached = p.Checks, p.StopChecks, p.Passed, p.StopBreached
		vs = append(vs, pe)
	}
	if len(diffs) > 0 {
		return diffs
	}
	c := Conclude(ev.Plan, vs, ev.StopReason)
	return compareVerdict(ev.Passed, ev.CertificationReady, ev.CertificationBlockers, c)
}

func recomputeLinkKeys(b *evidence.Bundle) []string {
	ev, err := ReadLinkKeysEvidence(b.Raw)
	if err != nil {
		return []string{err.Error()}
	}
	if ev.Plan == nil {
		return []string{"evidence.json has no plan: the checks cannot be recomputed"}
	}
	var raw struct {
		Phases []struct {
			Results json.RawMessage `json:"results"`
		} `json:"phases"`
	}
	_ = json.Unmarshal(b.Raw, &raw)
	var diffs []string
	vs := make([]verdictPhase, 0, len(ev.Phases))
	var unverified []string
	shedding := make([]map[string]bool, len(ev.Plan.Phases))
	for i, pe := range ev.Phases {
		if i >= len(ev.Plan.Phases) {
			diffs = append(diffs, fmt.Sprintf("phase %d %q is not in the plan (%d phases)", i+1, pe.Name, len(ev.Plan.Phases)))
			break
		}
		ph := &ev.Plan.Phases[i]
		if ph.Name != pe.Name {
			diffs = append(diffs, fmt.Sprintf("phase %d is %q, but the plan's phase %d is %q", i+1, pe.Name, i+1, ph.Name))
		}
		specs, stopSpecs, shed := linkKeysCheckSpecs(ev.Plan, ph)
		shedding[i] = shed
		in := phaseInput{Name: pe.Name, ResultsFile: pe.ResultsFile, Passed: pe.Passed, StopBreached: pe.StopBreached,
			Interrupted: pe.Interrupted, Error: pe.Error, LiveStop: pe.LiveStop, Checks: pe.Checks, StopChecks: pe.StopChecks}
		if i < len(raw.Phases) {
			in.embedded = raw.Phases[i].Results
		}
		var rc recomputed
		if pe.ResultsFile != "" {
			data, err := b.ReadMember(pe.ResultsFile, MaxPhaseResultsBytes)
			if err == nil {
				var res linkkeysresult.Result
				if res, err = linkkeysresult.Read(data); err == nil {
					m := LinkKeysPhaseMetrics(&res)
					diffs = append(diffs, sameTiming(pe.Name, ph.DurationSeconds, pe.PlannedSecs, pe.ElapsedSecs, pe.Overran, res.PlannedPartSecs())...)
					rc.checks, rc.stop, rc.has = EvaluateAll(specs, m), EvaluateAll(stopSpecs, m), true
					diffs = append(diffs, sameResults(pe.Name, in.embedded, &res)...)
				}
			}
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("phase %q: results file %s: %v", pe.Name, pe.ResultsFile, err))
				continue
			}
		} else if pe.Results != nil {
			m := LinkKeysPhaseMetrics(pe.Results)
			rc.checks, rc.stop, rc.has = EvaluateAll(specs, m), EvaluateAll(stopSpecs, m), true
		}
		p, d := recomputePhase(in, rc)
		diffs = append(diffs, d...)
		vs = append(vs, verdictPhase{Name: pe.Name, Passed: p.Passed, Error: pe.Error, Interrupted: pe.Interrupted,
			Checks: p.Checks, StopChecks: p.StopChecks, LiveStop: pe.LiveStop, GeneratorLimited: pe.GeneratorLimited,
			PlannedSecs: pe.PlannedSecs, ElapsedSecs: pe.ElapsedSecs, Overran: pe.Overran})
		if b := unverifiedServer(pe.Name, pe.Server, rc.has); b != "" {
			unverified = append(unverified, b)
		}
	}
	if len(diffs) > 0 {
		return diffs
	}
	c := linkKeysConclude(ev.Plan, vs, ev.StopReason, shedding, unverified)
	return compareVerdict(ev.Passed, ev.CertificationReady, ev.CertificationBlockers, c)
}

// recomputePhase applies the executor's phase rules to the recomputed checks and compares the
// recorded checks and outcome with them. It returns the recomputed phase.
func recomputePhase(in phaseInput, rc recomputed) (PhaseEvidence, []string) {
	var diffs []string
	out := PhaseEvidence{Name: in.Name, Checks: []Check{}, StopChecks: []Check{}}
	if rc.has {
		out.Checks, out.StopChecks = rc.checks, rc.stop
		out.Passed, out.StopBreached = PhaseOutcome(rc.checks, rc.stop)
	}
	if in.LiveStop != nil {
		out.Passed, out.StopBreached = false, true
	}
	if in.Error != nil || in.Interrupted {
		out.Passed = false
	}
	diffs = append(diffs, compareChecks(in.Name, "check", in.Checks, out.Checks)...)
	diffs = append(diffs, compareChecks(in.Name, "stop check", in.StopChecks, out.StopChecks)...)
	if in.Passed != out.Passed {
		diffs = append(diffs, fmt.Sprintf("phase %q says passed %v; its checks say %v", in.Name, in.Passed, out.Passed))
	}
	if in.StopBreached != out.StopBreached {
		diffs = append(diffs, fmt.Sprintf("phase %q says stop_breached %v; its stop checks say %v", in.Name, in.StopBreached, out.StopBreached))
	}
	return out, diffs
}

func compareChecks(phase, what string, recorded, recomputed []Check) []string {
	var diffs []string
	if len(recorded) != len(recomputed) {
		return []string{fmt.Sprintf("phase %q records %d %ss; its plan and figures give %d", phase, len(recorded), what, len(recomputed))}
	}
	for i, r := range recorded {
		c := recomputed[i]
		switch {
		case r.Metric != c.Metric || r.Comparison != c.Comparison:
			diffs = append(diffs, fmt.Sprintf("phase %q %s %d is %s %s; the plan gives %s %s", phase, what, i+1, r.Metric, r.Comparison, c.Metric, c.Comparison))
		case !sameNumber(r.Limit, c.Limit):
			diffs = append(diffs, fmt.Sprintf("phase %q %s %s has limit %s; the plan gives %s", phase, what, r.Metric, formatNum(float64(r.Limit)), formatNum(float64(c.Limit))))
		case !sameNumber(r.Observed, c.Observed):
			diffs = append(diffs, fmt.Sprintf("phase %q %s %s records observed %s; the results file gives %s", phase, what, r.Metric, formatNum(float64(r.Observed)), formatNum(float64(c.Observed))))
		case r.Outcome != c.Outcome:
			diffs = append(diffs, fmt.Sprintf("phase %q %s %s says %s; observed %s against limit %s is %s", phase, what, r.Metric, r.Outcome,
				formatNum(float64(c.Observed)), formatNum(float64(c.Limit)), c.Outcome))
		}
	}
	return diffs
}

func sameNumber(a, b Number) bool {
	x, y := float64(a), float64(b)
	if math.IsNaN(x) || math.IsNaN(y) {
		return math.IsNaN(x) && math.IsNaN(y)
	}
	if x == y {
		return true
	}
	return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
}

// sameResults compares the results evidence.json embeds with the results file's (both re-encoded
// through the same type, so formatting does not matter).
func sameResults(phase string, embedded json.RawMessage, file any) []string {
	if len(embedded) == 0 || string(embedded) == "null" {
		return nil
	}
	emb := newLike(file)
	if err := json.Unmarshal(embedded, emb); err != nil {
		return []string{fmt.Sprintf("phase %q: the results embedded in evidence.json do not read: %v", phase, err)}
	}
	a, errA := json.Marshal(emb)
	b, errB := json.Marshal(file)
	if errA != nil || errB != nil || string(a) != string(b) {
		return []string{fmt.Sprintf("phase %q: the results embedded in evidence.json differ from its results file", phase)}
	}
	return nil
}

func newLike(v any) any {
	switch v.(type) {
	case *keycastresult.Results:
		return &keycastresult.Results{}
	case *linkkeysresult.Result:
		return &linkkeysresult.Result{}
	}
	return new(any)
}

func compareVerdict(passed, ready bool, blockers []string, c Conclusion) []string {
	var diffs []string
	if passed != c.Passed {
		diffs = append(diffs, fmt.Sprintf("evidence.json says passed %v; its phases say %v", passed, c.Passed))
	}
	if ready != c.CertificationReady {
		diffs = append(diffs, fmt.Sprintf("evidence.json says certification_ready %v; its phases say %v", ready, c.CertificationReady))
	}
	if !slices.Equal(blockers, c.Blockers) && !(len(blockers) == 0 && len(c.Blockers) == 0) {
		diffs = append(diffs, "evidence.json's certification_blockers are not the ones its phases give")
	}
	return diffs
}

// sameTiming checks a phase's planned_secs, elapsed_secs and overran against the plan and the
// phase's results file: planned_secs is the plan's duration_seconds, elapsed_secs the results'
// run length, and overran says elapsed_secs > OverrunFactor × planned_secs. A bundle written
// before these fields existed has all three zero and is taken as it is.
func sameTiming(name string, planDuration uint64, planned, elapsed float64, overran bool, resultsElapsed float64) []string {
	if planned == 0 && elapsed == 0 && !overran {
		return nil
	}
	var d []string
	if planned != float64(planDuration) {
		d = append(d, fmt.Sprintf("phase %q: planned_secs %s is not the plan's duration_seconds %d", name, formatNum(planned), planDuration))
	}
	if math.Abs(elapsed-resultsElapsed) > 1e-6*max(1, resultsElapsed) {
		d = append(d, fmt.Sprintf("phase %q: elapsed_secs %s is not its results' run length %s", name, formatNum(elapsed), formatNum(resultsElapsed)))
	}
	if want := Overran(planned, elapsed); overran != want {
		d = append(d, fmt.Sprintf("phase %q: overran is %v, but elapsed_secs %s against planned_secs %s gives %v", name, overran, formatNum(elapsed), formatNum(planned), want))
	}
	return d
}
