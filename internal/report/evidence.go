package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/hist"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
)

func numText(v evidence.Number) string {
	f := float64(v)
	if math.IsNaN(f) {
		return "unknown"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// EvidenceText draws an evidence file: the verdict, each phase with its checks and (LinkKeys) its
// server's verification, why the run stopped, and the certification blockers.
func EvidenceText(w io.Writer, e *evidence.Evidence) {
	w = TextWriter(w)
	fmt.Fprintf(w, "Capacity evidence (%s harness): %s\n", Sanitize(e.HarnessName()), Sanitize(e.Plan.ProfileName))
	fmt.Fprintf(w, "generated %s, environment %s, scope: %s\n", Sanitize(e.GeneratedAt), Sanitize(string(e.ExecutionEnvironment)), Sanitize(e.EvidenceScope))
	for i, ph := range e.Phases {
		fmt.Fprintf(w, "\nphase %d %s (%s): %s\n", i+1, Sanitize(ph.Name), Sanitize(ph.Kind), ph.Verdict())
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
				fmt.Fprintf(w, "  remote server %s: %s (%s)\n", Sanitize(s.Target), verified, Sanitize(s.VerificationNote))
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
		fmt.Fprintf(w, "machine: %s, %d cores, kernel %s, loadproof %s\n", m.CPUModel, m.Cores, m.Kernel, m.LoadproofVersion)
	}
	fmt.Fprintf(w, "passed: %v  certification_ready: %v\n", e.Passed, e.CertificationReady)
	if Rehearsal(e) {
		fmt.Fprintln(w, "rehearsal: not certifiable (the load went to this machine over loopback; run the plan against the deployment for evidence)")
	}
	if !e.CertificationReady && len(e.Blockers) > 0 {
		fmt.Fprintln(w, "Certification is not ready:")
		for _, b := range e.Blockers {
			fmt.Fprintf(w, "  - %s\n", b)
		}
	}
}

// EvidenceCSV writes one row per check: phase, kind, whether it is a stop check, the metric, the
// comparison, observed, limit and outcome (an unknown observation is empty).
func EvidenceCSV(e *evidence.Evidence) string {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	_ = cw.Write([]string{"harness", "phase", "kind", "phase_passed", "check", "metric", "comparison", "observed", "limit", "outcome"})
	num := func(v evidence.Number) string {
		if math.IsNaN(float64(v)) {
			return ""
		}
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	}
	for _, ph := range e.Phases {
		for _, set := range []struct {
			kind   string
			checks []evidence.Check
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
