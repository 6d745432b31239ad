package capacity

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// DefaultOutputDir is upstream's default evidence directory.
const DefaultOutputDir = "./capacity-evidence"

// DefaultStopWindow is the sliding window over which live stop conditions are judged.
const DefaultStopWindow = 5 * time.Second

var (
	// ErrLimitsExceeded is returned (joined) whenever the evidence did not pass; its text is upstream's.
	ErrLimitsExceeded = errors.New("capacity: one or more capacity phases exceeded their predeclared limits")
	// ErrIncomplete is joined to ErrLimitsExceeded when the profile could not run to its end: a phase
	// error or SIGINT/SIGTERM. Commands map it to "could not run", distinct from "checks failed".
	ErrIncomplete = errors.New("capacity: the profile could not run to completion")
	// ErrInvalidPlan wraps validation problems returned by Execute (see Problems).
	ErrInvalidPlan = errors.New("capacity: the plan is invalid")
	// ErrOutputNotEmpty: the output directory already holds files, which would mix two runs in one
	// bundle. Choose a new directory or remove the old one.
	ErrOutputNotEmpty = errors.New("capacity: the evidence directory is not empty")
	// ErrOutputNotWritable: no file can be created in the output directory; found before any phase.
	ErrOutputNotWritable = errors.New("capacity: the evidence directory is not writable")
)

// incompleteError is Execute's error when the profile could not run to its end. It says why first;
// it is ErrIncomplete and ErrLimitsExceeded for errors.Is, but its text repeats upstream's "exceeded
// their predeclared limits" only after a phase error (where upstream says it), never after a signal
// or a failed write, when no phase exceeded anything.
type incompleteError struct {
	detail string
	limits bool // add upstream's sentence
}

func (e *incompleteError) Error() string {
	msg := "capacity: the profile could not run to completion: " + e.detail
	if e.limits {
		msg += "\n" + ErrLimitsExceeded.Error()
	}
	return msg
}

func (e *incompleteError) Unwrap() []error { return []error{ErrIncomplete, ErrLimitsExceeded} }

// PhaseRun is what Execute asks of the load engine for one phase (docs/protocol-keycast.md, Execution).
type PhaseRun struct {
	// Index is the phase's 0-based position in the plan.
	Index int
	Phase *Phase
	// URL is the plan's target_url.
	URL string
	// Users are the users file's users, loaded once per profile.
	Users     []keycast.TestUser
	UsersFile string
	// Seed is the plan's seed: the same for every phase, so every phase follows the same user order.
	Seed uint64
	// ReportInterval is clamp(duration_seconds, 1, 5) seconds, as upstream.
	ReportInterval time.Duration
	// Stop are the plan's absolute stop conditions, to be evaluated live.
	Stop LiveStop
}

// LiveStop are the live stop conditions of one phase.
type LiveStop struct {
	MaxUnintentionalErrorRate float64
	MaxLatencyP95Ms           float64
	// Window is the sliding window the conditions are judged over.
	Window time.Duration
	// MinRequests: a window with fewer requests is not judged (0 = the engine's default).
	MinRequests int64
}

// Runner runs one phase. It returns results even when ctx ends early (partial, Stop.Reason "signal")
// or a live stop condition ends the phase (Stop.Reason "stop-condition"), and an error only when the
// phase could not be carried out. KeycastloadRunner is the real one; tests substitute their own.
type Runner func(ctx context.Context, run PhaseRun) (*keycastresult.Results, error)

// Options configure Execute. The zero value runs against keycastload with upstream's defaults.
type Options struct {
	// SignKey, when set, signs the bundle: evidence.sig holds the Ed25519 signature of the manifest
	// (docs/capacity.md, Signed evidence).
	SignKey ed25519.PrivateKey
	// OutputDir is the evidence directory; default DefaultOutputDir. It must be absent or empty.
	OutputDir string
	// Validate holds the host authorizations.
	Validate ValidateOptions
	// Runner runs each phase; nil uses KeycastloadRunner(Progress, Logger, 0, TLS).
	Runner Runner
	// TLS says how the target's certificate is verified; recorded in the evidence (target_tls) and
	// in every phase's results.
	TLS keycastload.TLSOptions
	// StopWindow is the live stop window; default DefaultStopWindow.
	StopWindow time.Duration
	// StopMinRequests: windows with fewer requests are not judged; 0 = the engine's default.
	StopMinRequests int64
	// Progress receives one line as each phase starts and ends (stderr in the CLI); nil discards.
	Progress io.Writer
	// Logger receives the full, unscrubbed errors that the evidence only summarises; nil discards.
	Logger *slog.Logger
	// Machine is the machine record for the bundle; nil collects it.
	Machine *machine.Record
	// Now is the clock for time stamps; nil is time.Now.
	Now func() time.Time
}

// Execute runs a capacity profile (docs/protocol-keycast.md, Execution): it validates the plan
// (before touching the output directory), creates the directory, runs every phase in order with the
// plan's seed and live stop conditions, records each phase's checks, continues past ordinary
// misses, stops at a stop breach, a phase error or ctx's end, and writes the bundle: one results
// file per phase that produced results, evidence.json and manifest.json.
//
// The returned evidence is non-nil exactly when evidence.json was written. The error is nil when the
// evidence passed; otherwise it joins ErrLimitsExceeded with ErrIncomplete when the run could not
// finish (phase error, signal). Validation problems come back wrapped in ErrInvalidPlan, an occupied
// directory as ErrOutputNotEmpty, and failures to write the bundle as plain errors.
func Execute(ctx context.Context, plan *Plan, opts Options) (*Evidence, error) {
	env, err := Validate(plan, opts.Validate)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	runner := opts.Runner
	if runner == nil {
		runner = KeycastloadRunner(opts.Progress, opts.Logger, 0, opts.TLS)
	}
	window := opts.StopWindow
	if window <= 0 {
		window = DefaultStopWindow
	}
	dir := opts.OutputDir
	if dir == "" {
		dir = DefaultOutputDir
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	var rec machine.Record
	if opts.Machine != nil {
		rec = *opts.Machine
	} else {
		rec = machine.Collect("KEYCAST_", "HANDLER_CACHE_SIZE")
	}
	rec.Target = plan.TargetURL
	rec = scrubMachine(rec)

	b := &bundle{dir: dir}
	var users []keycast.TestUser
	h := Harness[*keycastresult.Results]{
		Prepare: func(context.Context) error {
			u, err := loadUsers(plan.UsersFile)
			users = u
			return err
		},
		Run: func(ctx context.Context, i int) (*PhaseResult[*keycastresult.Results], error) {
			ph := &plan.Phases[i]
			res, err := runner(ctx, PhaseRun{
				Index: i, Phase: ph, URL: plan.TargetURL, Users: users, UsersFile: plan.UsersFile, Seed: plan.Seed,
				ReportInterval: time.Duration(min(max(ph.DurationSeconds, 1), 5)) * time.Second,
				Stop: LiveStop{
					MaxUnintentionalErrorRate: plan.StopConditions.MaxErrorRate,
					MaxLatencyP95Ms:           plan.StopConditions.MaxLatencyP95Ms,
					Window:                    window,
					MinRequests:               opts.StopMinRequests,
				},
			})
			if err != nil || res == nil {
				return nil, err
			}
			s := res.Summary
			return &PhaseResult[*keycastresult.Results]{
				Results: res, Envelope: res.Envelope, Metrics: KeycastMetrics(s), Stop: res.Stop, ElapsedSecs: s.DurationSecs,
				Summary: fmt.Sprintf("%d requests, p95 %s, unintentional errors %.2f%%, shedding %.2f%%",
					s.TotalRequests, hist.MsText(s.LatencyP95Ms), s.UnintentionalErrorRate*100, s.IntentionalRejectionRate*100),
			}, nil
		},
		Checks: func(i int) ([]CheckSpec, []CheckSpec) { return keycastCheckSpecs(plan, &plan.Phases[i]) },
		Scrub:  scrubResults,
	}
	for i := range plan.Phases {
		ph := &plan.Phases[i]
		h.Phases = append(h.Phases, PhasePlan{Name: ph.Name, Kind: string(ph.Kind), DurationSeconds: ph.DurationSeconds,
			Describe: fmt.Sprintf("%s, %s, %s, concurrency %d, %d s, ramp-up %d s", ph.Kind, ph.Method, ph.Scenario, ph.Concurrency, ph.DurationSeconds, ph.RampUpSeconds)})
	}
	out := execute(ctx, h, b, progress, logger)
	phases := make([]PhaseEvidence, 0, len(out.Phases))
	for _, r := range out.Phases {
		pe := PhaseEvidence{Name: r.Name, Kind: Kind(r.Kind), Passed: r.Passed, Checks: r.Checks, StopBreached: r.StopBreached,
			StopChecks: r.StopChecks, Error: r.Error, ResultsFile: r.ResultsFile, LiveStop: r.LiveStop, Interrupted: r.Interrupted,
			GeneratorLimited: r.GeneratorLimited, PlannedSecs: r.PlannedSecs, ElapsedSecs: r.ElapsedSecs, Overran: r.Overran}
		if r.HasResults {
			pe.Results = r.Results
		}
		phases = append(phases, pe)
	}
	c := Conclude(plan, phases, out.StopReason)
	ev := &Evidence{
		SchemaVersion:         SchemaVersion,
		EvidenceScope:         EvidenceScope,
		GeneratedAt:           now().UTC().Format(time.RFC3339Nano),
		ExecutionEnvironment:  env,
		Plan:                  plan,
		Passed:                c.Passed,
		CertificationReady:    c.CertificationReady,
		StoppedAfterPhase:     out.StoppedAfter,
		Phases:                phases,
		CertificationBlockers: c.Blockers,
		StopReason:            out.StopReason,
		Machine:               &rec,
		TargetTLS:             opts.TLS.Record(),
	}
	eb, err := ev.Encode()
	if err != nil {
		return nil, err
	}
	if err := finishBundle(b, eb, out, c.Passed, now, opts.SignKey); err != nil {
		if errors.Is(err, ErrLimitsExceeded) {
			return ev, err
		}
		return nil, err
	}
	return ev, nil
}

// prepareDir creates dir, or accepts it when it exists and is empty.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil:
		if len(entries) > 0 {
			return fmt.Errorf("%w: %s holds %d entries (for example %s); write the evidence to a new directory or remove the old bundle",
				ErrOutputNotEmpty, dir, len(entries), entries[0].Name())
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: failed to create evidence directory %q: %w; choose a writable directory", ErrOutputNotWritable, dir, err)
		}
	default:
		return fmt.Errorf("%w: failed to create evidence directory %q: %w; choose a writable directory", ErrOutputNotWritable, dir, err)
	}
	// Find out now, not after the first phase has loaded the target, that nothing can be written.
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("%w: %s: %v; choose a writable directory", ErrOutputNotWritable, dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%w: %s: %v; choose a writable directory", ErrOutputNotWritable, dir, err)
	}
	return nil
}

// loadUsers reads the plan's users file; its errors are SafeErrors naming the cause without quoting
// the file's content.
func loadUsers(path string) ([]keycast.TestUser, error) {
	uf, err := keycast.ReadUsersFile(path)
	if err == nil {
		return uf.Users, nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &SafeError{Msg: fmt.Sprintf("users file %q does not exist; create it with the setup command", path), Err: err}
	case errors.Is(err, fs.ErrPermission):
		return nil, &SafeError{Msg: fmt.Sprintf("users file %q is not readable", path), Err: err}
	case errors.As(err, &se):
		return nil, &SafeError{Msg: fmt.Sprintf("users file %q is not valid JSON (error at byte %d)", path, se.Offset)}
	case errors.As(err, &te):
		return nil, &SafeError{Msg: fmt.Sprintf("users file %q does not have the setup format (field %s)", path, te.Field)}
	case strings.HasPrefix(err.Error(), "No users found"):
		return nil, &SafeError{Msg: "No users found in " + path}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, &SafeError{Msg: fmt.Sprintf("users file %q could not be read", path), Err: pe.Err}
	}
	return nil, &SafeError{Msg: fmt.Sprintf("users file %q is not a valid setup users file (run setup again)", path)}
}
