package capacity

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/keycastresult"
)

func TestPhaseChecks(t *testing.T) {
	plan := testPlan()
	healthy := keycastresult.Summary{TotalRequests: 1000, ErrorRate: 0.0005, UnintentionalErrorRate: 0.0005, LatencyP95Ms: 12, IntentionalRejectionRate: 0}
	spiky := keycastresult.Summary{TotalRequests: 1000, ErrorRate: 0.2, UnintentionalErrorRate: 0.001, LatencyP95Ms: 700, IntentionalRejectionRate: 0.199}
	empty := keycastresult.Summary{}
	cases := []struct {
		name     string
		phase    int
		mutate   func(*Phase)
		summary  keycastresult.Summary
		checks   []Check
		stops    []Check
		passed   bool
		breached bool
	}{
		{
			name: "healthy ramp under the SLO", phase: 0, summary: healthy,
			checks: []Check{
				{MetricTotalRequests, AtLeast, 1000, 1, Passed},
				{MetricUnintentionalErrorRate, AtMost, 0.0005, 0.01, Passed},
				{MetricLatencyP95, AtMost, 12, 500, Passed},
				{MetricIntentionalRejectionRate, AtLeast, 0, 0, NotTested},
				{MetricAvailabilityPercent, AtLeast, 99.95, 99.9, Passed},
				{MetricSLOLatencyP95, AtMost, 12, 500, Passed},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0.0005, 0.05, Passed},
				{MetricStopLatencyP95, AtMost, 12, 1000, Passed},
			},
			passed: true,
		},
		{
			name: "spike declaring shedding, SLO off", phase: 1, summary: spiky,
			mutate: func(p *Phase) { p.MaxLatencyP95Ms = 800 },
			checks: []Check{
				{MetricTotalRequests, AtLeast, 1000, 1, Passed},
				{MetricUnintentionalErrorRate, AtMost, 0.001, 0.01, Passed},
				{MetricLatencyP95, AtMost, 700, 800, Passed},
				{MetricIntentionalRejectionRate, AtLeast, 0.199, 0.01, Passed},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0.001, 0.05, Passed},
				{MetricStopLatencyP95, AtMost, 700, 1000, Passed},
			},
			passed: true,
		},
		{
			name: "spike without shedding records not-tested with the observed rate", phase: 1, summary: spiky,
			mutate: func(p *Phase) { p.IntentionalShedding = nil },
			checks: []Check{
				{MetricTotalRequests, AtLeast, 1000, 1, Passed},
				{MetricUnintentionalErrorRate, AtMost, 0.001, 0.01, Passed},
				{MetricLatencyP95, AtMost, 700, 500, Failed},
				{MetricIntentionalRejectionRate, AtLeast, 0.199, 0, NotTested},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0.001, 0.05, Passed},
				{MetricStopLatencyP95, AtMost, 700, 1000, Passed},
			},
		},
		{
			name: "shedding below the declared minimum fails", phase: 1,
			summary: keycastresult.Summary{TotalRequests: 10, LatencyP95Ms: 1, IntentionalRejectionRate: 0.005},
			checks: []Check{
				{MetricTotalRequests, AtLeast, 10, 1, Passed},
				{MetricUnintentionalErrorRate, AtMost, 0, 0.01, Passed},
				{MetricLatencyP95, AtMost, 1, 500, Passed},
				{MetricIntentionalRejectionRate, AtLeast, 0.005, 0.01, Failed},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0, 0.05, Passed},
				{MetricStopLatencyP95, AtMost, 1, 1000, Passed},
			},
		},
		{
			name: "no requests fails total_requests; limits are inclusive", phase: 2, summary: empty,
			mutate: func(p *Phase) { p.MaxErrorRate = 0 },
			checks: []Check{
				{MetricTotalRequests, AtLeast, 0, 1, Failed},
				{MetricUnintentionalErrorRate, AtMost, 0, 0, Passed},
				{MetricLatencyP95, AtMost, 0, 500, Passed},
				{MetricIntentionalRejectionRate, AtLeast, 0, 0, NotTested},
				{MetricAvailabilityPercent, AtLeast, 100, 99.9, Passed},
				{MetricSLOLatencyP95, AtMost, 0, 500, Passed},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0, 0.05, Passed},
				{MetricStopLatencyP95, AtMost, 0, 1000, Passed},
			},
		},
		{
			name: "stop breach on totals", phase: 3,
			summary: keycastresult.Summary{TotalRequests: 100, ErrorRate: 0.06, UnintentionalErrorRate: 0.06, LatencyP95Ms: 1000},
			mutate:  func(p *Phase) { p.MaxErrorRate, p.MaxLatencyP95Ms = 0.1, 1000 },
			checks: []Check{
				{MetricTotalRequests, AtLeast, 100, 1, Passed},
				{MetricUnintentionalErrorRate, AtMost, 0.06, 0.1, Passed},
				{MetricLatencyP95, AtMost, 1000, 1000, Passed},
				{MetricIntentionalRejectionRate, AtLeast, 0, 0, NotTested},
				{MetricAvailabilityPercent, AtLeast, 94, 99.9, Failed},
				{MetricSLOLatencyP95, AtMost, 1000, 500, Failed},
			},
			stops: []Check{
				{MetricStopUnintentionalErrorRate, AtMost, 0.06, 0.05, Failed},
				{MetricStopLatencyP95, AtMost, 1000, 1000, Passed},
			},
			breached: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ph := plan.Phases[c.phase]
			if c.mutate != nil {
				c.mutate(&ph)
			}
			checks, stops := PhaseChecks(plan, &ph, c.summary)
			approx(t, "checks", checks, c.checks)
			approx(t, "stop checks", stops, c.stops)
			passed, breached := PhaseOutcome(checks, stops)
			if passed != c.passed || breached != c.breached {
				t.Errorf("outcome (%v,%v), want (%v,%v)", passed, breached, c.passed, c.breached)
			}
		})
	}
}

// approx compares checks with a tolerance on the floating-point figures.
func approx(t *testing.T, what string, got, want []Check) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d %+v, want %d", what, len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Metric != w.Metric || g.Comparison != w.Comparison || g.Outcome != w.Outcome ||
			math.Abs(float64(g.Observed-w.Observed)) > 1e-9 || math.Abs(float64(g.Limit-w.Limit)) > 1e-9 {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

func TestNumberEncodesNonFiniteAsNull(t *testing.T) {
	c := atMost("latency_p95_ms", math.NaN(), 10)
	if c.Outcome != Failed {
		t.Fatal("a NaN observation passed")
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metric":"latency_p95_ms","comparison":"at-most","observed":null,"limit":10,"outcome":"failed"}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back Check
	if err := json.Unmarshal(b, &back); err != nil || !math.IsNaN(float64(back.Observed)) {
		t.Fatalf("decode: %v %v", back, err)
	}
	back.Observed = 0
	c.Observed = 0
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("decode: %+v != %+v", back, c)
	}
}

func TestConclude(t *testing.T) {
	plan := testPlan()
	ok := func(name string, kind Kind) PhaseEvidence {
		return PhaseEvidence{Name: name, Kind: kind, Passed: true, Checks: []Check{{Metric: MetricIntentionalRejectionRate, Outcome: NotTested}}}
	}
	all := func() []PhaseEvidence {
		var out []PhaseEvidence
		for _, ph := range plan.Phases {
			out = append(out, ok(ph.Name, ph.Kind))
		}
		return out
	}

	c := Conclude(plan, all(), "")
	if !c.Passed || !c.CertificationReady || len(c.Blockers) != 0 {
		t.Fatalf("all passed with shedding declared: %+v", c)
	}

	// A phase whose generator saturated passes its checks but is not evidence of the server.
	limited := all()
	limited[2].GeneratorLimited = []string{"load-2: client CPU 95% of 2 cores (limit 90%)"}
	c = Conclude(plan, limited, "")
	if !c.Passed || c.CertificationReady || len(c.Blockers) != 1 ||
		!strings.HasPrefix(c.Blockers[0], `phase "`+limited[2].Name+`" was generator-limited`) || !strings.Contains(c.Blockers[0], "load-2: client CPU 95%") {
		t.Fatalf("generator-limited phase: %+v", c)
	}

	noShed := testPlan()
	noShed.Phases[1].IntentionalShedding = nil
	c = Conclude(noShed, all(), "")
	if !c.Passed || c.CertificationReady || len(c.Blockers) != 1 || !strings.Contains(c.Blockers[0], "no phase declares intentional_shedding") {
		t.Fatalf("no shedding declared: %+v", c)
	}

	failedShed := all()
	failedShed[1].Passed = false
	failedShed[1].Checks = []Check{{Metric: MetricIntentionalRejectionRate, Comparison: AtLeast, Observed: 0.001, Limit: 0.01, Outcome: Failed}}
	c = Conclude(plan, failedShed, "")
	if c.Passed || c.CertificationReady || len(c.Blockers) != 1 ||
		c.Blockers[0] != `phase "spike" failed check intentional_rejection_rate: observed 0.001 is below the at-least limit 0.01` {
		t.Fatalf("shedding failed: %+v", c)
	}

	msg := "capacity: phase \"soak\" could not run: users file \"users.json\" does not exist"
	partial := all()[:3]
	partial[2] = PhaseEvidence{Name: "soak", Kind: KindSoak, Error: &msg, Checks: []Check{}, StopChecks: []Check{}}
	c = Conclude(plan, partial, StopReasonPhaseError)
	want := []string{
		`phase "soak" could not run: users file "users.json" does not exist`,
		`3 of 6 planned phases did not run because a phase could not run: "recovery", "rollout", "scale-down"`,
	}
	if c.Passed || c.CertificationReady || !reflect.DeepEqual(c.Blockers, want) {
		t.Fatalf("phase error: %+v", c)
	}

	live := all()[:2]
	live[1].Passed, live[1].StopBreached = false, true
	live[1].LiveStop = &keycastresult.StopEvent{Reason: "stop-condition", Metric: "latency_p95_ms", Observed: 2500, Limit: 1000, WindowSecs: 5, ElapsedSecs: 7.5}
	c = Conclude(plan, live, StopReasonStopCondition)
	want = []string{
		`phase "spike" was ended early by a live stop condition: latency_p95_ms reached 2500 against limit 1000 over a 5 s window at 7.5 s into the phase`,
		`4 of 6 planned phases did not run because a stop condition was breached: "soak", "recovery", "rollout", "scale-down"`,
	}
	if c.Passed || c.CertificationReady || !reflect.DeepEqual(c.Blockers, want) {
		t.Fatalf("live stop: %+v", c)
	}

	c = Conclude(plan, nil, StopReasonSignal)
	if c.Passed || c.CertificationReady || len(c.Blockers) != 1 || !strings.Contains(c.Blockers[0], "interrupted by a signal") {
		t.Fatalf("signal before any phase: %+v", c)
	}
}

// Upstream's tests intentional_rejections_reduce_healthy_phase_availability and
// ordinary_miss_continues_but_absolute_breach_stops (docs/protocol-keycast.md, Upstream tests used
// as a model).

func TestIntentionalRejectionsReduceHealthyPhaseAvailability(t *testing.T) {
	r := results(1, 1, 1, 0)
	if r.Summary.ErrorRate != 1 || r.Summary.UnintentionalErrorRate != 0 {
		t.Fatalf("fixture: error rate %v, unintentional %v", r.Summary.ErrorRate, r.Summary.UnintentionalErrorRate)
	}
	if got := AvailabilityPercent(r.Summary); got != 0 {
		t.Fatalf("availability %v, want 0", got)
	}
}

func TestOrdinaryMissContinuesButAbsoluteBreachStops(t *testing.T) {
	check := func(ok bool) []Check { return []Check{{Metric: "test", Comparison: AtMost, Outcome: outcome(ok)}} }
	if p, s := PhaseOutcome(check(false), check(true)); p || s {
		t.Fatalf("ordinary miss: (%v,%v), want (false,false)", p, s)
	}
	if p, s := PhaseOutcome(check(true), check(false)); p || !s {
		t.Fatalf("stop breach: (%v,%v), want (false,true)", p, s)
	}
	if p, s := PhaseOutcome(check(true), check(true)); !p || s {
		t.Fatalf("all pass: (%v,%v), want (true,false)", p, s)
	}
	notTested := []Check{{Metric: "test", Outcome: NotTested}}
	if p, _ := PhaseOutcome(notTested, check(true)); !p {
		t.Fatal("not-tested counted as a failure")
	}
}
