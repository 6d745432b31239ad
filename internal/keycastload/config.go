package keycastload

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/result"
)

// Defaults of the run flags (docs/protocol-keycast.md, run) and of loadproof's additions.
const (
	DefaultURL            = "http://localhost:3000"
	DefaultConcurrency    = 10
	DefaultDuration       = 60 * time.Second
	DefaultRampUp         = 5 * time.Second
	DefaultReportInterval = 5 * time.Second
	DefaultHTTPTimeout    = 30 * time.Second
	DefaultStopWindow     = 5 * time.Second
	DefaultStopMinimum    = 20
	// DefaultDrain is how long requests in flight at the end of the duration may take before they
	// are cut off (RunConfig.Drain).
	DefaultDrain = 5 * time.Second
	// LateThreshold is how far behind its intended time an open-model send may start before it
	// counts as late. One millisecond is well above the scheduler's wake-up jitter on an idle
	// machine and well below any latency worth reporting.
	LateThreshold = time.Millisecond
)

// RunConfig mirrors `run`'s flags (docs/protocol-keycast.md, run) plus loadproof's additions. The zero
// value of each field means the documented default.
type RunConfig struct {
	// Flags holds the command line's flags as given, recorded in the results (optional).
	Flags map[string]string
	// URL is the target base URL; a trailing "/" is trimmed. Empty means DefaultURL.
	URL string
	// Concurrency is the number of workers (closed model) or the most requests in flight (open
	// model). 0 means DefaultConcurrency.
	Concurrency int
	// Requests caps the number of requests; 0 means unlimited. With Duration 0 the run lasts until
	// exactly Requests requests are done.
	Requests int64
	// Duration is the run length. 0 with Requests > 0 means "until the requests are done"; 0 with
	// Requests 0 is an error (the run would never end). Callers wanting upstream's 60 s default set it.
	Duration time.Duration
	// RampUp spreads worker starts (closed model) or ramps the arrival rate from RateFrom to Rate
	// (open model) over this long. 0 means no ramp.
	RampUp time.Duration
	// Scenario selects users (see SelectUser). Empty means mixed.
	Scenario keycast.Scenario
	// Method is the RPC to send, or register. Empty means sign-event.
	Method keycast.Method
	// Users are the prepared users (loaded by the caller from the users file). Required unless
	// Method is register.
	Users []keycast.TestUser
	// UsersFile names the users file in messages only.
	UsersFile string
	// ReportInterval is the progress and timeline interval; values below 1 s are clamped to 1 s.
	// 0 means DefaultReportInterval.
	ReportInterval time.Duration
	// Seed offsets the deterministic user schedule (see SelectUser).
	Seed uint64
	// Rate > 0 selects the open model: requests arrive at Rate per second regardless of responses.
	Rate float64
	// RateFrom is the open model's starting rate; the rate ramps linearly from RateFrom to Rate over
	// RampUp. 0 with RampUp > 0 ramps from zero.
	RateFrom float64
	// Stop holds live stop conditions (capacity); nil means none.
	Stop *StopConditions
	// Segment is this process's share of a split run; the zero value is the whole run. Requests,
	// Concurrency and Rate are divided with Segment.Share and Segment.Rate, and request numbers are
	// interleaved (local n is global n·Count+Index), so the segments of a split run together send
	// exactly what one whole run would.
	Segment engine.Segment
	// RunID names the run in the results file (result.Envelope.RunID), so a report merges only the
	// segments of one run; empty writes none.
	RunID string
	// Start, when set, is the instant the load starts (a coordinated start across machines); the
	// engine waits for it after the target has answered its probe.
	Start time.Time
	// NoServerSample turns off the per-interval /api/metrics samples (Interval.Server): in a run
	// spread over machines one segment samples the target, so merged samples are not counted twice.
	NoServerSample bool
	// Progress receives progress lines (the upstream "Progress: …" line); nil discards them.
	Progress io.Writer
	// Logger receives log records; nil discards them.
	Logger *slog.Logger
	// HTTPTimeout bounds each request (connect, write and read). 0 means DefaultHTTPTimeout.
	HTTPTimeout time.Duration
	// Drain bounds how long the requests in flight when Duration ends may take to finish: then they
	// are cut off and counted in summary cut_off_requests, so a run ends at most Duration + Drain
	// after its workers start, whatever the server does. 0 means DefaultDrain; it is never longer
	// than HTTPTimeout. A run limited by Requests alone (Duration 0) has no drain: each request is
	// bounded by HTTPTimeout.
	Drain time.Duration
	// TLS says how an https target's certificate is verified; recorded in metadata.tls.
	TLS TLSOptions
	// HTTPClient is the client that sends the requests: HTTPClientFast (the hand-written one) or
	// HTTPClientStd (net/http); recorded in metadata.http_client. Empty means HTTPClientFast.
	HTTPClient string
}

// StopConditions are evaluated every second over a sliding window; a breach ends the run early.
// A limit is breached when the observed value is above it.
type StopConditions struct {
	// MaxUnintentionalErrorRate limits (failed − intentional shedding)/total over the window. Zero is
	// a real limit (any unintentional failure breaches); to disable it, set it to 1.
	MaxUnintentionalErrorRate float64
	// MaxLatencyP95Ms limits the window's 95th percentile latency; 0 disables it.
	MaxLatencyP95Ms float64
	// Window is the sliding window; 0 means DefaultStopWindow. It is rounded up to whole seconds.
	Window time.Duration
	// MinRequests is the fewest requests a window needs to be judged; 0 means DefaultStopMinimum.
	MinRequests int64
}

// ErrNoUsers is returned when an RPC method is run without users.
var ErrNoUsers = errors.New("keycastload: no users to send requests as; create them with `setup` and pass the users file")

// UsageError is a configuration that its caller, a command line, got wrong: every problem at once,
// found before anything is sent. The cli exits 2 with it. Each problem speaks in the flags' terms
// (--concurrency, --duration, …) without this package's prefix; Error puts "keycastload: " before
// each, one per line.
type UsageError struct{ Problems []error }

func (e *UsageError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "keycastload: " + p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems (errors.Is(err, ErrNoUsers) holds through a *UsageError).
func (e *UsageError) Unwrap() []error { return e.Problems }

// problem is err without this package's prefix (a *UsageError adds it), still unwrapping to err.
type problem struct{ err error }

func (p problem) Error() string { return strings.TrimPrefix(p.err.Error(), "keycastload: ") }
func (p problem) Unwrap() error { return p.err }

func usage(problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	for i, p := range problems {
		problems[i] = problem{p}
	}
	return &UsageError{Problems: problems}
}

// Validate is the one check of a run's settings (the cli's run and profile call it before they do
// anything, Run before it sends anything): it reports every problem at once as a *UsageError. It
// checks c as given and fills no default, except that an empty URL, Scenario, Method or HTTPClient
// stands for its default; a Concurrency below 1 is a problem here (a command line gives the one it
// means), while Run reads 0 as DefaultConcurrency. Users are not looked at: they come from a file
// read after the flags are checked, and Run checks them (CheckUsers) before anything is sent.
func (c RunConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.HTTPClient != "" && c.HTTPClient != HTTPClientFast && c.HTTPClient != HTTPClientStd {
		bad("--http-client %q: want fast or std", c.HTTPClient)
	}
	if c.Concurrency < 1 {
		bad("--concurrency %d must be at least 1", c.Concurrency)
	}
	if c.Requests < 0 {
		bad("--requests %d must be 0 (unlimited) or more", c.Requests)
	}
	if c.Duration < 0 {
		bad("--duration %v must be 0 or more", c.Duration)
	}
	if c.Duration == 0 && c.Requests <= 0 {
		bad("--duration 0 runs until the requests are done, so it needs --requests N > 0")
	}
	if c.RampUp < 0 {
		bad("--ramp-up %v must be 0 or more", c.RampUp)
	}
	if c.Scenario != "" {
		if _, err := keycast.ParseScenario(string(c.Scenario)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Method != "" {
		if _, err := keycast.ParseMethod(string(c.Method)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Rate != 0 {
		if err := engine.ValidateRate("rate", c.Rate); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RateFrom != 0 {
		if c.Rate == 0 {
			bad("rate-from needs --rate (the open model)")
		} else if math.IsNaN(c.RateFrom) || math.IsInf(c.RateFrom, 0) || c.RateFrom < 0 {
			bad("rate-from %v must be a finite rate of 0 or more", c.RateFrom)
		}
	}
	if err := c.Segment.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := result.ValidateRunID(c.RunID); err != nil {
		errs = append(errs, err)
	}
	if err := c.TLS.Check(cmp.Or(c.URL, DefaultURL)); err != nil {
		errs = append(errs, err)
	}
	if s := c.Stop; s != nil {
		if math.IsNaN(s.MaxUnintentionalErrorRate) || s.MaxUnintentionalErrorRate < 0 || s.MaxUnintentionalErrorRate > 1 {
			bad("stop condition max unintentional error rate %v must be between 0 and 1", s.MaxUnintentionalErrorRate)
		}
		if math.IsNaN(s.MaxLatencyP95Ms) || s.MaxLatencyP95Ms < 0 {
			bad("stop condition max p95 latency %v ms must be 0 (off) or more", s.MaxLatencyP95Ms)
		}
		if s.Window < 0 || s.MinRequests < 0 {
			bad("stop condition window and minimum requests must not be negative")
		}
	}
	return usage(errs)
}

// userProblems are the problems of c.Users for a method that needs users: none, or one that
// CheckUsers refuses.
func (c RunConfig) userProblems() []error {
	if c.Method == keycast.MethodRegister {
		return nil
	}
	if len(c.Users) == 0 {
		if c.UsersFile != "" {
			return []error{fmt.Errorf("no users found in %s; create them with `setup`", c.UsersFile)}
		}
		return []error{ErrNoUsers}
	}
	// Every token goes into a request head verbatim: check them all before anything is sent.
	if err := CheckUsers(c.Users, c.UsersFile); err != nil {
		return []error{err}
	}
	return nil
}

// normalize fills the documented defaults and checks the configuration (Validate, then the users):
// a problem is a *UsageError. It returns a copy.
func (c RunConfig) normalize() (RunConfig, error) {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.HTTPClient = cmp.Or(c.HTTPClient, HTTPClientFast)
	if c.Scenario == "" {
		c.Scenario = keycast.ScenarioMixed
	}
	if c.Method == "" {
		c.Method = keycast.MethodSignEvent
	}
	c.ReportInterval = cmp.Or(c.ReportInterval, DefaultReportInterval)
	c.ReportInterval = max(c.ReportInterval, time.Second)
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = DefaultHTTPTimeout
	}
	if c.Drain <= 0 {
		c.Drain = DefaultDrain
	}
	c.Drain = min(c.Drain, c.HTTPTimeout)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var problems []error
	var ue *UsageError
	if err := c.Validate(); errors.As(err, &ue) {
		problems = append(problems, ue.Problems...)
	}
	problems = append(problems, c.userProblems()...)
	if s := c.Stop; s != nil {
		sc := *s
		sc.Window = cmp.Or(sc.Window, DefaultStopWindow)
		sc.MinRequests = cmp.Or(sc.MinRequests, DefaultStopMinimum)
		c.Stop = &sc
	}
	if err := usage(problems); err != nil {
		return c, err
	}
	return c, nil
}
