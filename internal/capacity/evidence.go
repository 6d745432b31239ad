package capacity

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// SchemaVersion is the evidence schema version (evidence.SchemaVersion).
const SchemaVersion = evidence.SchemaVersion

// EvidenceScope is the fixed scope statement of every bundle.
const EvidenceScope = "synthetic non-production capacity rehearsal"

// EvidenceFile and ManifestFile are the fixed file names in a bundle.
const (
	EvidenceFile = evidence.EvidenceFile
	ManifestFile = evidence.ManifestFile
)

// Why a run ended before its last phase (Evidence.StopReason): the result package's stop reasons.
const (
	StopReasonStopCondition = result.StopCondition
	StopReasonPhaseError    = result.StopPhaseError
	StopReasonSignal        = result.StopSignal
	StopReasonWriteError    = result.StopWriteError
	StopReasonWorkerLost    = result.StopWorkerLost
)

// Evidence is evidence.json: upstream's a8d40c9 fields first, in upstream's order and spelling
// (docs/protocol-keycast.md, Evidence file), then loadproof's additions.
type Evidence struct {
	SchemaVersion        int             `json:"schema_version"`
	EvidenceScope        string          `json:"evidence_scope"`
	GeneratedAt          string          `json:"generated_at"`
	ExecutionEnvironment Environment     `json:"execution_environment"`
	Plan                 *Plan           `json:"plan"`
	Passed               bool            `json:"passed"`
	CertificationReady   bool            `json:"certification_ready"`
	StoppedAfterPhase    *string         `json:"stopped_after_phase"`
	Phases               []PhaseEvidence `json:"phases"`

	// CertificationBlockers says, one line each, why CertificationReady is false; empty when it is true.
	CertificationBlockers []string `json:"certification_blockers"`
	// StopReason says why the run ended before its last phase (StopReason* constants); empty when
	// every phase ran.
	StopReason string `json:"stop_reason,omitempty"`
	// Machine is the record of the machine the load ran from.
	Machine *machine.Record `json:"machine,omitempty"`
	// TargetTLS records how the target's certificate was verified (--ca-cert, its SHA-256, or
	// --insecure-skip-verify); absent: against the system roots.
	TargetTLS *keycastresult.TLS `json:"target_tls,omitempty"`
}

// PhaseEvidence is one phase's entry.
type PhaseEvidence struct {
	Name         string                 `json:"name"`
	Kind         Kind                   `json:"kind"`
	Passed       bool                   `json:"passed"`
	Checks       []Check                `json:"checks"`
	StopBreached bool                   `json:"stop_breached"`
	StopChecks   []Check                `json:"stop_checks"`
	Results      *keycastresult.Results `json:"results"`
	// Error is the phase's error chain, rebuilt from safe parts only (see ScrubError); null when none.
	Error *string `json:"error"`

	// ResultsFile is the phase's results file in the bundle (phase-{i:02}-{name}.json).
	ResultsFile string `json:"results_file,omitempty"`
	// LiveStop is the live stop condition that ended the phase early, with its time and figures.
	// It makes StopBreached true even when the phase's totals stayed inside the stop limits.
	LiveStop *keycastresult.StopEvent `json:"live_stop,omitempty"`
	// Interrupted says SIGINT/SIGTERM ended the phase before its planned end.
	Interrupted bool `json:"interrupted,omitempty"`
	// GeneratorLimited says, host by host, why the load generator saturated during the phase
	// (absent when it did not); certification is then not ready.
	GeneratorLimited []string `json:"generator_limited,omitempty"`
	// PlannedSecs is the phase's planned duration (duration_seconds), ElapsedSecs how long its
	// load ran (0 when it produced no results); Overran says ElapsedSecs > 2 × PlannedSecs, a
	// certification blocker.
	PlannedSecs float64 `json:"planned_secs"`
	ElapsedSecs float64 `json:"elapsed_secs"`
	Overran     bool    `json:"overran"`
}

// Conclusion is upstream's verdict (docs/protocol-keycast.md, Verdict) with the reasons
// certification is not ready.
type Conclusion struct {
	Passed             bool
	CertificationReady bool
	Blockers           []string
}

// Conclude applies upstream's verdict: passed when every planned phase has an entry and every
// entry passed; certification_ready when passed, at least one phase declares intentional shedding,
// no intentional_rejection_rate check failed, and no phase was generator-limited. Blockers lists, in plain words, everything that
// keeps certification_ready false (it is empty exactly when certification_ready is true). stopReason
// is Evidence.StopReason.
func Conclude(plan *Plan, phases []PhaseEvidence, stopReason string) Conclusion {
	planned := make([]string, len(plan.Phases))
	declared := false
	for i, ph := range plan.Phases {
		planned[i] = ph.Name
		if ph.IntentionalShedding != nil {
			declared = true
		}
	}
	vs := make([]verdictPhase, len(phases))
	for i, ph := range phases {
		vs[i] = verdictPhase{Name: ph.Name, Passed: ph.Passed, Error: ph.Error, Interrupted: ph.Interrupted, Checks: ph.Checks,
			StopChecks: ph.StopChecks, LiveStop: ph.LiveStop, GeneratorLimited: ph.GeneratorLimited,
			PlannedSecs: ph.PlannedSecs, ElapsedSecs: ph.ElapsedSecs, Overran: ph.Overran}
	}
	return conclude(planned, vs, stopReason, certification{
		Declared:   declared,
		IsShedding: func(c Check) bool { return c.Metric == MetricIntentionalRejectionRate },
		NotDeclared: "no phase declares intentional_shedding, so shedding was not tested; declare it on the spike phase " +
			"(status 503, error_code admission_rejected, min_rate above 0) against a target that sheds",
	})
}

func describeCheck(c Check) string {
	rel := "above the at-most"
	if c.Comparison == AtLeast {
		rel = "below the at-least"
	}
	return fmt.Sprintf("%s: observed %s is %s limit %s", c.Metric, formatNum(float64(c.Observed)), rel, formatNum(float64(c.Limit)))
}

func describeStop(s *keycastresult.StopEvent) string {
	var b strings.Builder
	b.WriteString(s.Metric)
	if b.Len() == 0 {
		b.WriteString("a stop metric")
	}
	fmt.Fprintf(&b, " reached %s against limit %s", formatNum(s.Observed), formatNum(s.Limit))
	if s.WindowSecs > 0 {
		fmt.Fprintf(&b, " over a %s s window", formatNum(s.WindowSecs))
	}
	fmt.Fprintf(&b, " at %s s into the phase", formatNum(s.ElapsedSecs))
	return b.String()
}

func formatNum(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// Encode returns the evidence as pretty JSON (two-space indent, as upstream's to_string_pretty).
func (e *Evidence) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("capacity: encoding evidence: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadEvidence decodes evidence.json bytes (ours or upstream's).
func ReadEvidence(b []byte) (*Evidence, error) {
	var e Evidence
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("capacity: not an evidence file: %w", err)
	}
	return &e, nil
}
