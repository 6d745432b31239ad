package capacity

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/loadproof/loadproof/internal/keycastresult"
)

// Comparison says which side of the limit passes.
type Comparison string

// The two comparisons.
const (
	AtLeast Comparison = "at-least"
	AtMost  Comparison = "at-most"
)

// Outcome is a check's result.
type Outcome string

// The three outcomes. NotTested never fails a phase.
const (
	Passed    Outcome = "passed"
	Failed    Outcome = "failed"
	NotTested Outcome = "not-tested"
)

// Check metric names, in the order PhaseChecks emits them (docs/protocol-keycast.md, Checks).
const (
	MetricTotalRequests              = "total_requests"
	MetricUnintentionalErrorRate     = "unintentional_error_rate"
	MetricLatencyP95                 = "latency_p95_ms"
	MetricIntentionalRejectionRate   = "intentional_rejection_rate"
	MetricAvailabilityPercent        = "availability_percent"
	MetricSLOLatencyP95              = "slo_latency_p95_ms"
	MetricStopUnintentionalErrorRate = "stop_unintentional_error_rate"
	MetricStopLatencyP95             = "stop_latency_p95_ms"
)

// Number is a float64 that encodes NaN and ±Inf as JSON null, as serde_json does, so a check over a
// degenerate result still serialises (and fails: no comparison with NaN holds).
type Number float64

// MarshalJSON writes the number, or null when it is not finite.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads a number or null (as NaN).
func (n *Number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Number(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// Check is one evidence check.
type Check struct {
	Metric     string     `json:"metric"`
	Comparison Comparison `json:"comparison"`
	Observed   Number     `json:"observed"`
	Limit      Number     `json:"limit"`
	Outcome    Outcome    `json:"outcome"`
}

func outcome(ok bool) Outcome {
	if ok {
		return Passed
	}
	return Failed
}

func atMost(metric string, observed, limit float64) Check {
	return Check{Metric: metric, Comparison: AtMost, Observed: Number(observed), Limit: Number(limit), Outcome: outcome(observed <= limit)}
}

// AvailabilityPercent is the availability a phase showed: (1 − error_rate) × 100 over every failed
// request, so intentional rejections and 429s lower it too (a healthy phase should see neither).
func AvailabilityPercent(s keycastresult.Summary) float64 {
	return (1 - s.ErrorRate) * 100
}

// KeycastMetrics are the named figures of a Keycast phase's results summary that its checks read:
// total_requests, unintentional_error_rate, latency_p95_ms, intentional_rejection_rate and
// availability_percent.
func KeycastMetrics(s keycastresult.Summary) Metrics {
	return Metrics{
		MetricTotalRequests:            float64(s.TotalRequests),
		MetricUnintentionalErrorRate:   s.UnintentionalErrorRate,
		MetricLatencyP95:               s.LatencyP95Ms,
		MetricIntentionalRejectionRate: s.IntentionalRejectionRate,
		MetricAvailabilityPercent:      AvailabilityPercent(s),
	}
}

// keycastCheckSpecs are upstream's checks and stop checks of a Keycast phase (see PhaseChecks).
func keycastCheckSpecs(plan *Plan, phase *Phase) (checks, stopChecks []CheckSpec) {
	checks = []CheckSpec{
		// At least one request: the count is whole, so ">= 1" is upstream's "> 0".
		{Metric: MetricTotalRequests, Comparison: AtLeast, Limit: 1},
		{Metric: MetricUnintentionalErrorRate, Comparison: AtMost, Limit: phase.MaxErrorRate},
		{Metric: MetricLatencyP95, Comparison: AtMost, Limit: phase.MaxLatencyP95Ms},
	}
	if sh := phase.IntentionalShedding; sh != nil {
		checks = append(checks, CheckSpec{Metric: MetricIntentionalRejectionRate, Comparison: AtLeast, Limit: sh.MinRate})
	} else {
		checks = append(checks, CheckSpec{Metric: MetricIntentionalRejectionRate, Comparison: AtLeast, Limit: 0, NotTested: true})
	}
	if phase.SLOApplies {
		checks = append(checks,
			CheckSpec{Metric: MetricAvailabilityPercent, Comparison: AtLeast, Limit: plan.Objectives.AvailabilityPercent},
			CheckSpec{Metric: MetricSLOLatencyP95, From: MetricLatencyP95, Comparison: AtMost, Limit: plan.Objectives.LatencyP95Ms},
		)
	}
	stopChecks = []CheckSpec{
		{Metric: MetricStopUnintentionalErrorRate, From: MetricUnintentionalErrorRate, Comparison: AtMost, Limit: plan.StopConditions.MaxErrorRate},
		{Metric: MetricStopLatencyP95, From: MetricLatencyP95, Comparison: AtMost, Limit: plan.StopConditions.MaxLatencyP95Ms},
	}
	return checks, stopChecks
}

// PhaseChecks computes a phase's checks and stop checks from its results summary, exactly as
// upstream (docs/protocol-keycast.md, Checks): checks are total_requests, unintentional_error_rate,
// latency_p95_ms, intentional_rejection_rate (not-tested with limit 0 when the phase declares no
// shedding), then, when the SLO applies, availability_percent and slo_latency_p95_ms; stop checks
// are stop_unintentional_error_rate and stop_latency_p95_ms against the plan's stop conditions.
// They are CheckSpecs evaluated by metric name against KeycastMetrics.
func PhaseChecks(plan *Plan, phase *Phase, s keycastresult.Summary) (checks, stopChecks []Check) {
	cs, ss := keycastCheckSpecs(plan, phase)
	m := KeycastMetrics(s)
	return EvaluateAll(cs, m), EvaluateAll(ss, m)
}

// PhaseOutcome is upstream's continue/stop rule: the stop is breached when any stop check failed;
// the phase passed when no check failed (not-tested is not a failure) and the stop was not breached.
// An ordinary miss lets the run continue, so recovery is still measured; a breach stops it.
func PhaseOutcome(checks, stopChecks []Check) (passed, stopBreached bool) {
	for _, c := range stopChecks {
		if c.Outcome == Failed {
			stopBreached = true
		}
	}
	passed = !stopBreached
	for _, c := range checks {
		if c.Outcome == Failed {
			passed = false
		}
	}
	return passed, stopBreached
}
