package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

// Evidence is what a report draws from a capacity evidence file of either harness (a Keycast
// bundle's evidence.json, or a LinkKeys one, which says harness "linkkeys"): the verdict, the stop
// point, every phase's checks and, for LinkKeys, its server's verified limits. It is read from the
// file alone; the harness's own types stay in package capacity.
type Evidence struct {
	SchemaVersion        int             `json:"schema_version"`
	EvidenceScope        string          `json:"evidence_scope"`
	GeneratedAt          string          `json:"generated_at"`
	Harness              string          `json:"harness"`
	ExecutionEnvironment string          `json:"execution_environment"`
	Plan                 evidencePlan    `json:"plan"`
	Passed               bool            `json:"passed"`
	CertificationReady   bool            `json:"certification_ready"`
	StoppedAfterPhase    *string         `json:"stopped_after_phase"`
	StopReason           string          `json:"stop_reason"`
	Blockers             []string        `json:"certification_blockers"`
	Phases               []EvidencePhase `json:"phases"`
	Machine              *struct {
		CPUModel string `json:"cpu_model"`
		Cores    int    `json:"cores"`
		Kernel   string `json:"kernel"`
		Version  string `json:"loadproof_version"`
	} `json:"machine"`
}

type evidencePlan struct {
	ProfileName string `json:"profile_name"`
}

// EvidencePhase is one phase of an evidence file.
type EvidencePhase struct {
	Name         string          `json:"name"`
	Kind         string          `json:"kind"`
	Passed       bool            `json:"passed"`
	StopBreached bool            `json:"stop_breached"`
	Interrupted  bool            `json:"interrupted"`
	Error        *string         `json:"error"`
	ResultsFile  string          `json:"results_file"`
	Checks       []EvidenceCheck `json:"checks"`
	StopChecks   []EvidenceCheck `json:"stop_checks"`
	Server       *EvidenceServer `json:"server"`
}

// EvidenceCheck is one check; a null observation (a figure that could not be measured) is NaN.
type EvidenceCheck struct {
	Metric     string   `json:"metric"`
	Comparison string   `json:"comparison"`
	Observed   nullable `json:"observed"`
	Limit      nullable `json:"limit"`
	Outcome    string   `json:"outcome"`
}

// EvidenceServer is a LinkKeys phase's server record.
type EvidenceServer struct {
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

type nullable float64

func (n *nullable) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = nullable(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	*n = nullable(f)
	return nil
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

// ReadEvidence reads an evidence file of either harness.
func ReadEvidence(b []byte) (*Evidence, error) {
	var e Evidence
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("report: not an evidence file: %w", err)
	}
	var problems []error
	if e.SchemaVersion != 1 {
		problems = append(problems, fmt.Errorf("schema_version %d is not 1", e.SchemaVersion))
	}
	if e.EvidenceScope == "" {
		problems = append(problems, errors.New("evidence_scope is missing"))
	}
	if e.Phases == nil {
		problems = append(problems, errors.New("phases is missing"))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("report: not a capacity evidence file: %w", errors.Join(problems...))
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

func numText(v nullable) string {
	f := float64(v)
	if math.IsNaN(f) {
		return "unknown"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// EvidenceText draws an evidence file: the verdict, each phase with its checks and (LinkKeys) its
// server's verification, why the run stopped, and the certification blockers.
func EvidenceText(w io.Writer, e *Evidence) {
	fmt.Fprintf(w, "Capacity evidence (%s harness): %s\n", e.HarnessName(), e.Plan.ProfileName)
	fmt.Fprintf(w, "generated %s, environment %s, scope: %s\n", e.GeneratedAt, e.ExecutionEnvironment, e.EvidenceScope)
	for i, ph := range e.Phases {
		verdict := "passed"
		switch {
		case ph.Interrupted:
			verdict = "interrupted"
		case ph.Error != nil:
			verdict = "error"
		case ph.StopBreached:
			verdict = "STOPPED"
		case !ph.Passed:
			verdict = "failed"
		}
		fmt.Fprintf(w, "\nphase %d %s (%s): %s\n", i+1, ph.Name, ph.Kind, verdict)
		if ph.Error != nil {
			fmt.Fprintf(w, "  error: %s\n", *ph.Error)
		}
		if s := ph.Server; s != nil {
			env := "environment verified"
			if !s.EnvironmentVerified {
				env = "environment NOT verified (config: line only)"
			}
			fmt.Fprintf(w, "  server: %s, profile %s, %s\n", s.Mode, s.EnvironmentProfile, env)
			if s.Mode == "remote" {
				verified := "limits verified"
				if !s.ServerVerified {
					verified = "server side NOT verified"
				}
				fmt.Fprintf(w, "  remote server %s: %s (%s)\n", s.Target, verified, s.VerificationNote)
			}
			fmt.Fprintf(w, "  server %s\n", s.ConfigLine)
			for _, m := range s.Mismatches {
				fmt.Fprintf(w, "  MISMATCH %s\n", m)
			}
		}
		for _, c := range ph.Checks {
			fmt.Fprintf(w, "  %-10s %-40s %-8s observed %s, limit %s\n", c.Outcome, c.Metric, c.Comparison, numText(c.Observed), numText(c.Limit))
		}
		for _, c := range ph.StopChecks {
			fmt.Fprintf(w, "  %-10s %-40s %-8s observed %s, limit %s (stop condition)\n", c.Outcome, c.Metric, c.Comparison, numText(c.Observed), numText(c.Limit))
		}
	}
	fmt.Fprintln(w)
	if e.StoppedAfterPhase != nil {
		fmt.Fprintf(w, "stopped after phase %s (%s)\n", *e.StoppedAfterPhase, e.StopReason)
	}
	if m := e.Machine; m != nil {
		fmt.Fprintf(w, "machine: %s, %d cores, kernel %s, loadproof %s\n", m.CPUModel, m.Cores, m.Kernel, m.Version)
	}
	fmt.Fprintf(w, "passed: %v  certification_ready: %v\n", e.Passed, e.CertificationReady)
	if !e.CertificationReady && len(e.Blockers) > 0 {
		fmt.Fprintln(w, "Certification is not ready:")
		for _, b := range e.Blockers {
			fmt.Fprintf(w, "  - %s\n", b)
		}
	}
}

// EvidenceCSV writes one row per check: phase, kind, whether it is a stop check, the metric, the
// comparison, observed, limit and outcome (an unknown observation is empty).
func EvidenceCSV(e *Evidence) string {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write([]string{"harness", "phase", "kind", "phase_passed", "check", "metric", "comparison", "observed", "limit", "outcome"})
	num := func(v nullable) string {
		if math.IsNaN(float64(v)) {
			return ""
		}
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	}
	for _, ph := range e.Phases {
		for _, set := range []struct {
			kind   string
			checks []EvidenceCheck
		}{{"check", ph.Checks}, {"stop", ph.StopChecks}} {
			for _, c := range set.checks {
				_ = cw.Write([]string{e.HarnessName(), ph.Name, ph.Kind, strconv.FormatBool(ph.Passed), set.kind, c.Metric, c.Comparison, num(c.Observed), num(c.Limit), c.Outcome})
			}
		}
	}
	cw.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// LinkKeysCSV writes a LinkKeys result's figures, one row per command (or per stream of a combined
// result): attempts, successes, failures, completed operations, rate, latency percentiles.
func LinkKeysCSV(r *lkr.Result) string {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write([]string{"command", "stream", "kind", "attempted", "succeeded", "failed", "completed", "errors", "per_sec",
		"p50_ms", "p99_ms", "p999_ms", "max_ms", "held_still_open", "elapsed_secs"})
	row := func(stream, kind string, s *lkr.Result) {
		var att, ok, fail, done, errs int64
		var rate float64
		var h *hist.Histogram
		if a := s.Attempts; a != nil {
			att, ok, fail, h = a.Attempted, a.Succeeded, a.Failed, a.Latency
		}
		open := ""
		switch {
		case s.Handshakes != nil:
			done, errs, rate = s.Handshakes.Completed, s.Handshakes.Failed, s.Handshakes.Rate
		case s.Requests != nil:
			q := s.Requests
			done, errs, rate, h = q.Completed, q.Errors, q.Rate, q.Latency
		}
		if s.Hold != nil {
			open = strconv.FormatInt(s.Hold.StillOpen, 10)
		}
		var p50, p99, p999, mx string
		if h != nil && h.Count() > 0 {
			sm := h.Summary()
			f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
			p50, p99, p999, mx = f(sm.P50Ms), f(sm.P99Ms), f(sm.P999Ms), f(sm.MaxMs)
		}
		_ = cw.Write([]string{r.Command, stream, kind, itoa(att), itoa(ok), itoa(fail), itoa(done), itoa(errs),
			strconv.FormatFloat(rate, 'f', 1, 64), p50, p99, p999, mx, open,
			strconv.FormatFloat(time.Duration(s.Elapsed).Seconds(), 'f', 3, 64)})
	}
	if c := r.Combined; c != nil {
		for i := range c.Streams {
			s := &c.Streams[i]
			if s.Result != nil {
				row(s.Name, s.Kind, s.Result)
			}
		}
	} else {
		row("", r.Command, r)
	}
	cw.Flush()
	return strings.TrimRight(b.String(), "\n")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
