package capacity

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// The executor below is harness-generic: a harness (Keycast's HTTP phases, LinkKeys' TCP
// workloads) describes its planned phases, runs one when asked and says which checks judge it;
// the executor owns everything else the two share: the order of phases, the progress lines, phase
// errors (scrubbed), a phase that ran but whose results could not be written, live stop
// conditions, SIGINT/SIGTERM, the continue/stop rule, the per-phase results files, the verdict
// with its certification blockers, the manifest, and the mapping of the outcome to an error.

// Metrics are a phase's named figures; checks read them by name.
type Metrics map[string]float64

// CheckSpec is one declared check: the name it carries in the evidence, the metric it reads (From;
// empty means Metric), a comparison and a limit. NotTested records the observation without judging
// it (an undeclared expectation).
type CheckSpec struct {
	Metric     string
	From       string
	Comparison Comparison
	Limit      float64
	NotTested  bool
}

// Evaluate judges the check against m. A metric that m lacks is observed as NaN, which fails
// every comparison: a figure that could not be measured never passes.
func (s CheckSpec) Evaluate(m Metrics) Check {
	from := s.From
	if from == "" {
		from = s.Metric
	}
	v, ok := m[from]
	if !ok {
		v = math.NaN()
	}
	c := Check{Metric: s.Metric, Comparison: s.Comparison, Observed: Number(v), Limit: Number(s.Limit)}
	switch {
	case s.NotTested:
		c.Outcome = NotTested
	case s.Comparison == AtLeast:
		c.Outcome = outcome(v >= s.Limit)
	default:
		c.Outcome = outcome(v <= s.Limit)
	}
	return c
}

// EvaluateAll judges every spec against m, in order.
func EvaluateAll(specs []CheckSpec, m Metrics) []Check {
	out := make([]Check, 0, len(specs))
	for _, s := range specs {
		out = append(out, s.Evaluate(m))
	}
	return out
}

// PhasePlan is what the executor knows of one planned phase.
type PhasePlan struct {
	Name string
	// Kind is the phase's kind as its evidence records it.
	Kind string
	// Describe is the rest of the phase's start line ("ramp, get-public-key, …").
	Describe string
	// DurationSeconds is the phase's planned length (for the interruption message).
	DurationSeconds uint64
}

// PhaseResult is what a harness's runner returns for one phase.
type PhaseResult[R any] struct {
	// Results is the harness's result document of the phase: written to the phase's results file
	// and embedded in the evidence.
	Results R
	// Envelope is the phase's shared result envelope (counts, histograms, timeline), when the
	// results carry one.
	Envelope *result.Envelope
	// Metrics are the phase's named figures, which its checks read.
	Metrics Metrics
	// Stop says why the phase ended before its planned end: a live stop condition (reason
	// "stop-condition") or a signal ("signal").
	Stop *result.StopEvent
	// ElapsedSecs is how long the phase ran.
	ElapsedSecs float64
	// Summary is the phase's one-line figures for the progress line.
	Summary string
}

// PhaseRunner runs phase index of a harness. It returns results even when ctx ends early or a
// live stop condition ends the phase (with Stop set), and an error only when the phase could not
// be carried out; the error's text reaches the evidence only through ScrubError.
type PhaseRunner[R any] func(ctx context.Context, index int) (*PhaseResult[R], error)

// Harness is one harness's side of a capacity run.
type Harness[R any] struct {
	// Phases are the planned phases, in order.
	Phases []PhasePlan
	// Prepare, when set, runs before the first phase; its error is that phase's error.
	Prepare func(ctx context.Context) error
	// Run runs one phase.
	Run PhaseRunner[R]
	// Checks returns the phase's checks and stop checks.
	Checks func(index int) (checks, stopChecks []CheckSpec)
	// Scrub, when set, makes a phase's results safe for the bundle before they are written.
	Scrub func(R)
	// Extra, when set, returns more files for the bundle after a phase ran (a server log), by name.
	Extra func(index int) map[string][]byte
}

// phaseRecord is one phase's outcome as the executor saw it.
type phaseRecord[R any] struct {
	Name         string
	Kind         string
	Results      R
	HasResults   bool
	Metrics      Metrics
	Checks       []Check
	StopChecks   []Check
	Passed       bool
	StopBreached bool
	Error        *string
	ResultsFile  string
	LiveStop     *result.StopEvent
	Interrupted  bool
	// GeneratorLimited holds, host by host, why the load generator saturated in this phase (empty
	// when it did not): such a phase measured the generator, so certification is not ready.
	GeneratorLimited []string
	// PlannedSecs is the phase's planned duration; ElapsedSecs how long its load ran (0 when it
	// produced no results); Overran says ElapsedSecs > OverrunFactor × PlannedSecs.
	PlannedSecs, ElapsedSecs float64
	Overran                  bool
}

// OverrunFactor: a phase whose load ran longer than this many times its planned duration overran
// (a request outlived its phase by far, or the end of the phase waited on something): its figures
// are not those of the plan, so certification is not ready.
const OverrunFactor = 2

// Overran reports whether a phase planned for planned seconds that ran elapsed seconds overran.
func Overran(planned, elapsed float64) bool { return planned > 0 && elapsed > OverrunFactor*planned }

// overrunBlocker is the certification blocker of a phase that overran.
func overrunBlocker(name string, planned, elapsed float64) string {
	return fmt.Sprintf("phase %q ran %s s, more than %d times its planned %s s: a request or the end of the phase stalled, so its figures are not those of the plan; find the stall (the phase's slowest requests and cut-off count) and run it again",
		name, formatNum(elapsed), OverrunFactor, formatNum(planned))
}

// verdictPhase is the part of a phase's evidence the verdict reads.
type verdictPhase struct {
	Name        string
	Passed      bool
	Error       *string
	Interrupted bool
	Checks      []Check
	StopChecks  []Check
	LiveStop    *result.StopEvent
	// GeneratorLimited says why the generator saturated (machine.GeneratorLimited), if it did.
	GeneratorLimited []string
	// PlannedSecs, ElapsedSecs and Overran: see phaseRecord.
	PlannedSecs, ElapsedSecs float64
	Overran                  bool
}

func (r *phaseRecord[R]) verdict() verdictPhase {
	return verdictPhase{Name: r.Name, Passed: r.Passed, Error: r.Error, Interrupted: r.Interrupted, Checks: r.Checks,
		StopChecks: r.StopChecks, LiveStop: r.LiveStop, GeneratorLimited: r.GeneratorLimited,
		PlannedSecs: r.PlannedSecs, ElapsedSecs: r.ElapsedSecs, Overran: r.Overran}
}

// runOutcome is what the executor hands back to the harness that assembles the evidence.
type runOutcome[R any] struct {
	Phases       []phaseRecord[R]
	StoppedAfter *string
	StopReason   string
}

// execute runs h's phases in order into the bundle b: the shared phase loop.
func execute[R any](ctx context.Context, h Harness[R], b *bundle, progress io.Writer, logger *slog.Logger) runOutcome[R] {
	var out runOutcome[R]
	stop := func(name, reason string) {
		n := name
		out.StoppedAfter, out.StopReason = &n, reason
	}
	prepared := h.Prepare == nil
	for i := range h.Phases {
		ph := &h.Phases[i]
		if ctx.Err() != nil {
			out.StopReason = StopReasonSignal
			if len(out.Phases) > 0 {
				n := out.Phases[len(out.Phases)-1].Name
				out.StoppedAfter = &n
			}
			fmt.Fprintf(progress, "capacity: interrupted before phase %d/%d %s\n", i+1, len(h.Phases), ph.Name)
			break
		}
		fmt.Fprintf(progress, "capacity: phase %d/%d %s (%s)\n", i+1, len(h.Phases), ph.Name, ph.Describe)
		rec := phaseRecord[R]{Name: ph.Name, Kind: ph.Kind, Checks: []Check{}, StopChecks: []Check{}, PlannedSecs: float64(ph.DurationSeconds)}
		phaseError := func(err error, interrupted bool) {
			logger.Error("capacity phase could not run", "phase", ph.Name, "error", err)
			msg := fmt.Sprintf("capacity: phase %q could not run: %s", ph.Name, ScrubError(err))
			rec.Error = &msg
			rec.Interrupted = interrupted
			out.Phases = append(out.Phases, rec)
			if interrupted {
				stop(ph.Name, StopReasonSignal)
			} else {
				stop(ph.Name, StopReasonPhaseError)
			}
			fmt.Fprintf(progress, "capacity: phase %s could not run: %s\n", ph.Name, ScrubError(err))
		}
		if !prepared {
			if err := h.Prepare(ctx); err != nil {
				phaseError(err, false)
				break
			}
			prepared = true
		}
		engine.StartPhase(ctx, ph.Name)
		res, err := h.Run(ctx, i)
		if err == nil && res == nil {
			err = &SafeError{Msg: "the load engine returned no results and no error"}
		}
		if err != nil {
			phaseError(err, ctx.Err() != nil)
			break
		}
		if hook := engine.ResultHook(ctx); hook != nil && res.Envelope != nil {
			hook(res.Envelope) // what an observer of the phase did (remote write), in its file
		}
		if h.Scrub != nil {
			h.Scrub(res.Results)
		}
		name := PhaseFileName(i, ph.Name)
		rb, err := json.MarshalIndent(res.Results, "", "  ")
		if err == nil {
			err = b.write(name, append(rb, '\n'))
		}
		if err == nil && h.Extra != nil {
			for extra, data := range h.Extra(i) {
				if err = b.write(extra, data); err != nil {
					break
				}
			}
		}
		rec.Results, rec.HasResults, rec.Metrics = res.Results, true, res.Metrics
		rec.ElapsedSecs = res.ElapsedSecs
		rec.Overran = Overran(rec.PlannedSecs, rec.ElapsedSecs)
		if res.Envelope != nil {
			if limited, why := machine.GeneratorLimited(res.Envelope.Machines); limited {
				rec.GeneratorLimited = why
			}
		}
		checks, stopChecks := h.Checks(i)
		rec.Checks, rec.StopChecks = EvaluateAll(checks, res.Metrics), EvaluateAll(stopChecks, res.Metrics)
		rec.Passed, rec.StopBreached = PhaseOutcome(rec.Checks, rec.StopChecks)
		if err != nil {
			// The phase ran: its figures go into the evidence (if that can still be written), and
			// the message must not say it could not run.
			logger.Error("capacity phase results could not be written", "phase", ph.Name, "file", name, "error", err)
			why := ScrubError(&SafeError{Msg: "writing " + name, Err: err})
			msg := fmt.Sprintf("capacity: phase %q ran, but its results could not be written: %s", ph.Name, why)
			rec.Error, rec.Passed = &msg, false
			out.Phases = append(out.Phases, rec)
			stop(ph.Name, StopReasonWriteError)
			fmt.Fprintf(progress, "capacity: phase %s ran, but its results could not be written: %s\n", ph.Name, why)
			break
		}
		rec.ResultsFile = name
		interrupted, workerLost := false, false
		if s := res.Stop; s != nil {
			switch s.Reason {
			case StopReasonStopCondition:
				ls := *s
				rec.LiveStop = &ls
				rec.Passed, rec.StopBreached = false, true
			case StopReasonSignal:
				interrupted = true
			case StopReasonWorkerLost:
				workerLost = true
			}
		}
		if workerLost && ctx.Err() == nil {
			msg := fmt.Sprintf("capacity: phase %q was cut short after %.1f s of its %d s: a load worker was lost (%s); its results are the other workers' partial ones",
				ph.Name, res.ElapsedSecs, ph.DurationSeconds, res.Stop.Metric)
			rec.Error, rec.Interrupted, rec.Passed = &msg, true, false
			out.Phases = append(out.Phases, rec)
			fmt.Fprintf(progress, "capacity: phase %s cut short: a load worker was lost\n", ph.Name)
			stop(ph.Name, StopReasonWorkerLost)
			break
		}
		if ctx.Err() != nil {
			interrupted = true
		}
		if interrupted {
			msg := fmt.Sprintf("capacity: phase %q was interrupted by a signal after %.1f s of its %d s", ph.Name, res.ElapsedSecs, ph.DurationSeconds)
			rec.Error, rec.Interrupted, rec.Passed = &msg, true, false
		}
		out.Phases = append(out.Phases, rec)
		fmt.Fprintf(progress, "capacity: phase %s %s: %s\n", ph.Name, verdictWord(rec.verdict(), rec.StopBreached), res.Summary)
		if interrupted {
			stop(ph.Name, StopReasonSignal)
			break
		}
		if rec.StopBreached {
			stop(ph.Name, StopReasonStopCondition)
			break
		}
	}
	return out
}

// verdictWord is the phase's verdict word (evidence.VerdictOf), with the live stop condition named
// when one ended the phase.
func verdictWord(pe verdictPhase, stopBreached bool) string {
	w := string(evidence.VerdictOf(pe.Passed, stopBreached, pe.Interrupted, pe.Error != nil && !pe.Interrupted))
	if pe.LiveStop != nil {
		w += " by a live stop condition"
	}
	return w
}

// certification says when a harness's evidence is certification-ready beyond passing: some phase
// declares the expected shedding, and no check of it failed.
type certification struct {
	// Declared says a phase declares the expected shedding.
	Declared bool
	// IsShedding reports whether a check is one of the shedding checks.
	IsShedding func(Check) bool
	// NotDeclared is the blocker when no phase declares shedding.
	NotDeclared string
}

// conclude applies the verdict: passed when every planned phase has an entry and every entry
// passed; certification-ready when passed, shedding is declared and no shedding check failed;
// the blockers say, one line each, why certification is not ready.
func conclude(planned []string, phases []verdictPhase, stopReason string, cert certification) Conclusion {
	var c Conclusion
	c.Passed = len(phases) == len(planned)
	for _, ph := range phases {
		if !ph.Passed {
			c.Passed = false
		}
	}
	sheddingFailed := false
	for _, ph := range phases {
		for _, ch := range ph.Checks {
			if cert.IsShedding(ch) && ch.Outcome == Failed {
				sheddingFailed = true
			}
		}
	}
	generatorLimited, overran := false, false
	for _, ph := range phases {
		generatorLimited = generatorLimited || len(ph.GeneratorLimited) > 0
		overran = overran || ph.Overran
	}
	c.CertificationReady = c.Passed && cert.Declared && !sheddingFailed && !generatorLimited && !overran

	var b []string
	for _, ph := range phases {
		switch {
		case ph.Error != nil:
			b = append(b, strings.TrimPrefix(*ph.Error, "capacity: "))
		case ph.Interrupted:
			b = append(b, fmt.Sprintf("phase %q was interrupted by a signal before its planned end", ph.Name))
		}
		for _, ch := range ph.Checks {
			if ch.Outcome == Failed {
				b = append(b, fmt.Sprintf("phase %q failed check %s", ph.Name, describeCheck(ch)))
			}
		}
		for _, ch := range ph.StopChecks {
			if ch.Outcome == Failed {
				b = append(b, fmt.Sprintf("phase %q breached stop condition %s", ph.Name, describeCheck(ch)))
			}
		}
		if s := ph.LiveStop; s != nil {
			b = append(b, fmt.Sprintf("phase %q was ended early by a live stop condition: %s", ph.Name, describeStop(s)))
		}
		if len(ph.GeneratorLimited) > 0 {
			b = append(b, fmt.Sprintf("phase %q was generator-limited (the load generator saturated, so its figures understate the server; add load hosts or cores): %s",
				ph.Name, strings.Join(ph.GeneratorLimited, "; ")))
		}
		if ph.Overran {
			b = append(b, overrunBlocker(ph.Name, ph.PlannedSecs, ph.ElapsedSecs))
		}
	}
	if len(phases) < len(planned) {
		var names []string
		for _, n := range planned[len(phases):] {
			names = append(names, strconv.Quote(n))
		}
		why := "the run ended early"
		switch stopReason {
		case StopReasonSignal:
			why = "the run was interrupted by a signal"
		case StopReasonPhaseError:
			why = "a phase could not run"
		case StopReasonWriteError:
			why = "a phase's results could not be written"
		case StopReasonWorkerLost:
			why = "a load worker was lost"
		case StopReasonStopCondition:
			why = "a stop condition was breached"
		}
		b = append(b, fmt.Sprintf("%d of %d planned phases did not run because %s: %s", len(names), len(planned), why, strings.Join(names, ", ")))
	}
	if !cert.Declared {
		b = append(b, cert.NotDeclared)
	}
	if c.CertificationReady {
		b = nil
	} else if len(b) == 0 {
		// The rules above cover every way to be not ready; keep the list honest if they drift.
		b = append(b, "certification is not ready for a reason this version does not describe; see the phases")
	}
	c.Blockers = b
	if c.Blockers == nil {
		c.Blockers = []string{}
	}
	return c
}

// finish writes the evidence and the manifest and maps the outcome to Execute's error: nil when
// passed, an incompleteError when the run could not finish, ErrLimitsExceeded otherwise.
// With priv set, the manifest is signed (evidence.sig).
func finishBundle[R any](b *bundle, ev []byte, out runOutcome[R], passed bool, now func() time.Time, priv ed25519.PrivateKey) error {
	if err := b.write(EvidenceFile, ev); err != nil {
		return err
	}
	if err := evidence.Seal(b.dir, b.files, now(), priv); err != nil {
		return err
	}
	if passed {
		return nil
	}
	switch out.StopReason {
	case StopReasonPhaseError, StopReasonSignal, StopReasonWriteError, StopReasonWorkerLost:
		detail := "interrupted by a signal before the first phase"
		if n := len(out.Phases); n > 0 {
			detail = "interrupted by a signal after phase " + strconv.Quote(out.Phases[n-1].Name)
			if e := out.Phases[n-1].Error; e != nil {
				detail = *e
			}
		}
		return &incompleteError{detail: strings.TrimPrefix(detail, "capacity: "), limits: out.StopReason == StopReasonPhaseError}
	}
	return ErrLimitsExceeded
}
