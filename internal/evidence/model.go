package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// SchemaVersion is the evidence schema version; upstream uses 1 in every version, and loadproof's
// additions are new fields only, so upstream readers keep working.
const SchemaVersion = 1

// MaxEvidenceBytes caps evidence.json (it embeds every phase's results).
const MaxEvidenceBytes = 256 << 20

// Evidence is what a reader draws from a capacity evidence file of either harness (a Keycast
// bundle's evidence.json, or a LinkKeys one, which says harness "linkkeys"): the verdict, the stop
// point, every phase's checks and, for LinkKeys, its server's verified limits. The writers' own
// types (with the full plan and results) stay in package capacity; this is the reading side, and
// every field here has the same name and meaning there.
type Evidence struct {
	SchemaVersion        int      `json:"schema_version"`
	EvidenceScope        string   `json:"evidence_scope"`
	GeneratedAt          string   `json:"generated_at"`
	Harness              string   `json:"harness"`
	ExecutionEnvironment string   `json:"execution_environment"`
	Plan                 PlanInfo `json:"plan"`
	Passed               bool     `json:"passed"`
	CertificationReady   bool     `json:"certification_ready"`
	StoppedAfterPhase    *string  `json:"stopped_after_phase"`
	StopReason           string   `json:"stop_reason"`
	Blockers             []string `json:"certification_blockers"`
	Phases               []Phase  `json:"phases"`
	// Machine is the record of the machine the load ran from.
	Machine *machine.Record `json:"machine"`
}

// PlanInfo is the part of the plan a reader shows.
type PlanInfo struct {
	ProfileName string `json:"profile_name"`
	TargetURL   string `json:"target_url"`
}

// Phase is one phase of an evidence file.
type Phase struct {
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	Passed       bool              `json:"passed"`
	StopBreached bool              `json:"stop_breached"`
	Interrupted  bool              `json:"interrupted"`
	Error        *string           `json:"error"`
	ResultsFile  string            `json:"results_file"`
	Checks       []Check           `json:"checks"`
	StopChecks   []Check           `json:"stop_checks"`
	LiveStop     *result.StopEvent `json:"live_stop"`
	Server       *Server           `json:"server"`
	// PlannedSecs is the phase's planned length, ElapsedSecs how long its load ran, Overran that
	// it ran more than twice as long as planned (capacity.Overran); zero in bundles written before.
	PlannedSecs float64 `json:"planned_secs"`
	ElapsedSecs float64 `json:"elapsed_secs"`
	Overran     bool    `json:"overran"`
	// Results are the phase's results as evidence.json embeds them, in the harness's own result
	// form (both carry the shared result.Envelope at their top level); null when the phase has none.
	Results json.RawMessage `json:"results"`
}

// Verdict is a phase's one-word verdict.
type Verdict string

// The phase verdicts, most telling first: a phase interrupted by a signal, one that could not run
// (or whose results could not be written), one that breached a stop condition, one that missed a
// check, one that passed.
const (
	VerdictInterrupted Verdict = "interrupted"
	VerdictError       Verdict = "error"
	VerdictStopped     Verdict = "STOPPED"
	VerdictFailed      Verdict = "failed"
	VerdictPassed      Verdict = "passed"
)

// VerdictOf decides a phase's verdict word from its outcome; it is the only place the word is
// chosen (reports and the capacity progress lines use it).
func VerdictOf(passed, stopBreached, interrupted, hasError bool) Verdict {
	switch {
	case interrupted:
		return VerdictInterrupted
	case hasError:
		return VerdictError
	case stopBreached:
		return VerdictStopped
	case !passed:
		return VerdictFailed
	}
	return VerdictPassed
}

// Verdict is the phase's verdict word.
func (p *Phase) Verdict() Verdict {
	return VerdictOf(p.Passed, p.StopBreached, p.Interrupted, p.Error != nil)
}

// Check is one check; a null observation (a figure that could not be measured) is NaN.
type Check struct {
	Metric     string `json:"metric"`
	Comparison string `json:"comparison"`
	Observed   Number `json:"observed"`
	Limit      Number `json:"limit"`
	Outcome    string `json:"outcome"`
}

// Server is a LinkKeys phase's server record.
type Server struct {
	Mode                string   `json:"mode"`
	EnvironmentProfile  string   `json:"environment_profile"`
	ConfigLine          string   `json:"config_line"`
	ExpectedConfigLine  string   `json:"expected_config_line"`
	EnvironmentVerified bool     `json:"environment_verified"`
	Mismatches          []string `json:"mismatches"`
	Log                 string   `json:"log"`
	// Target, ServerVerified and VerificationNote are a remote server's: where it was reached and
	// whether its limits were read.
	Target           string `json:"target"`
	ServerVerified   bool   `json:"server_verified"`
	VerificationNote string `json:"verification_note"`
}

// Number is a float64 that reads JSON null as NaN (a figure that could not be measured) and
// writes NaN and ±Inf as null, as serde_json does.
type Number float64

// UnmarshalJSON reads a number or null (as NaN).
func (n *Number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Number(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("not a number: %.40s", b)
	}
	*n = Number(f)
	return nil
}

// MarshalJSON writes the number, or null when it is not finite.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// IsEvidence reports whether b looks like an evidence file (its schema_version and
// evidence_scope keys), to tell it from a result file.
func IsEvidence(b []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	_, v := top["schema_version"]
	_, s := top["evidence_scope"]
	return v && s
}

// Parse reads an evidence file of either harness.
func Parse(b []byte) (*Evidence, error) {
	var e Evidence
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("evidence: not an evidence file: %w", err)
	}
	var problems []error
	if e.SchemaVersion != SchemaVersion {
		problems = append(problems, fmt.Errorf("schema_version %d is not %d", e.SchemaVersion, SchemaVersion))
	}
	if e.EvidenceScope == "" {
		problems = append(problems, errors.New("evidence_scope is missing"))
	}
	if e.Phases == nil {
		problems = append(problems, errors.New("phases is missing"))
	}
	for i, ph := range e.Phases {
		if ph.ResultsFile != "" && !ValidMemberName(ph.ResultsFile) {
			problems = append(problems, fmt.Errorf("phase %d results_file %q is not a plain file name in the bundle", i+1, ph.ResultsFile))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("evidence: not a capacity evidence file: %w", errors.Join(problems...))
	}
	return &e, nil
}

// HarnessName is the evidence's harness: "linkkeys", or "keycast" for the Keycast schema (which
// names none).
func (e *Evidence) HarnessName() string {
	if e.Harness == "" {
		return "keycast"
	}
	return e.Harness
}

// Bundle is an evidence bundle as read: its directory, evidence.json's bytes and their model.
type Bundle struct {
	Dir      string
	Raw      []byte
	Evidence *Evidence
}

// Read reads a bundle: path is its directory or its evidence.json.
func Read(path string) (*Bundle, error) {
	dir, file := path, filepath.Join(path, EvidenceFile)
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	} else if !fi.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	b, err := readCapped(file, MaxEvidenceBytes)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading %s: %w", file, err)
	}
	e, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Bundle{Dir: dir, Raw: b, Evidence: e}, nil
}

// ReadMember reads a member file of the bundle by its plain name, at most limit bytes: a name
// with a directory part (../../dev/zero) or a member that is not a regular file is refused.
func (b *Bundle) ReadMember(name string, limit int64) ([]byte, error) {
	if !ValidMemberName(name) {
		return nil, fmt.Errorf("evidence: %q is not a plain file name in the bundle", name)
	}
	data, err := readCapped(filepath.Join(b.Dir, name), limit)
	if err != nil {
		return nil, fmt.Errorf("evidence: bundle member %s: %w", name, err)
	}
	return data, nil
}
