package capacity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/capacity/plan"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// LinkKeys plan types (package plan).
type (
	LinkKeysPlan            = plan.LinkKeysPlan
	LinkKeysPhase           = plan.LinkKeysPhase
	LinkKeysValidateOptions = plan.LinkKeysValidateOptions
	EnvironmentProfile      = plan.EnvironmentProfile
)

// ParseLinkKeysPlan decodes a LinkKeys plan strictly; see plan.ParseLinkKeysPlan.
func ParseLinkKeysPlan(b []byte) (*LinkKeysPlan, error) { return plan.ParseLinkKeysPlan(b) }

// ReadLinkKeysPlan reads and parses a LinkKeys plan file; see plan.ReadLinkKeysPlan.
func ReadLinkKeysPlan(path string) (*LinkKeysPlan, error) { return plan.ReadLinkKeysPlan(path) }

// ValidateLinkKeys applies every rule to a LinkKeys plan; see plan.ValidateLinkKeys.
func ValidateLinkKeys(p *LinkKeysPlan, opts LinkKeysValidateOptions) (Environment, error) {
	return plan.ValidateLinkKeys(p, opts)
}

// LinkKeysEvidence is evidence.json of a LinkKeys plan: the Keycast evidence's fields, in the same
// order and with the same meaning, with harness "linkkeys", the LinkKeys plan, and phases that carry
// their server's record and every named figure.
type LinkKeysEvidence struct {
	SchemaVersion         int                     `json:"schema_version"`
	EvidenceScope         string                  `json:"evidence_scope"`
	GeneratedAt           string                  `json:"generated_at"`
	ExecutionEnvironment  Environment             `json:"execution_environment"`
	Plan                  *LinkKeysPlan           `json:"plan"`
	Passed                bool                    `json:"passed"`
	CertificationReady    bool                    `json:"certification_ready"`
	StoppedAfterPhase     *string                 `json:"stopped_after_phase"`
	Phases                []LinkKeysPhaseEvidence `json:"phases"`
	CertificationBlockers []string                `json:"certification_blockers"`
	StopReason            string                  `json:"stop_reason,omitempty"`
	Machine               *machine.Record         `json:"machine,omitempty"`
	// Harness is "linkkeys": a reader tells a LinkKeys bundle from a Keycast one by it.
	Harness string `json:"harness"`
}

// LinkKeysPhaseEvidence is one phase's entry.
type LinkKeysPhaseEvidence struct {
	Name         string                 `json:"name"`
	Kind         string                 `json:"kind"`
	Passed       bool                   `json:"passed"`
	Checks       []Check                `json:"checks"`
	StopBreached bool                   `json:"stop_breached"`
	StopChecks   []Check                `json:"stop_checks"`
	Results      *linkkeysresult.Result `json:"results"`
	Error        *string                `json:"error"`
	ResultsFile  string                 `json:"results_file,omitempty"`
	LiveStop     *result.StopEvent      `json:"live_stop,omitempty"`
	Interrupted  bool                   `json:"interrupted,omitempty"`
	// GeneratorLimited says, host by host, why the load generator saturated during the phase
	// (absent when it did not); certification is then not ready.
	GeneratorLimited []string `json:"generator_limited,omitempty"`
	// Harness is the phase's harness ("linkkeys").
	Harness string `json:"harness"`
	// Server is the phase's server: the declared profile and what the server was verified to run.
	Server *ServerRecord `json:"server"`
	// Metrics are every named figure of the phase (what checks may read), NaN written as null.
	Metrics map[string]Number `json:"metrics,omitempty"`
	// PlannedSecs is the phase's planned duration (duration_seconds), ElapsedSecs how long its
	// load ran past its held population's ramp (linkkeysresult.Result.PlannedPartSecs; 0 when it
	// produced no results); Overran says ElapsedSecs > 2 × PlannedSecs, a
	// certification blocker.
	PlannedSecs float64 `json:"planned_secs"`
	ElapsedSecs float64 `json:"elapsed_secs"`
	Overran     bool    `json:"overran"`
}

// Encode returns the evidence as pretty JSON.
func (e *LinkKeysEvidence) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("capacity: encoding evidence: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadLinkKeysEvidence decodes a LinkKeys evidence.json.
func ReadLinkKeysEvidence(b []byte) (*LinkKeysEvidence, error) {
	var e LinkKeysEvidence
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("capacity: not an evidence file: %w", err)
	}
	if e.Harness != plan.HarnessLinkKeys {
		return nil, fmt.Errorf("capacity: evidence harness %q is not %q", e.Harness, plan.HarnessLinkKeys)
	}
	return &e, nil
}

// LinkKeysPhaseRun is what a LinkKeys phase runner is asked to do.
type LinkKeysPhaseRun struct {
	Index   int
	Phase   *LinkKeysPhase
	Profile EnvironmentProfile
	// Config is the phase's workload as the combined command's configuration (without its target).
	Config linkkeysload.CombinedConfig
	// Server is the phase's server record, filled in by the runner as it verifies the server.
	Server *ServerRecord
	// Stop is the live stop condition on the server's samples.
	Stop func(elapsed time.Duration, sample map[string]float64) *result.StopEvent
}

// LinkKeysRunner runs one LinkKeys phase: reach (or start) the phase's server, verify it into
// run.Server, run the workload and return the combined result, with the server log's bytes when
// the bundle should keep them. LinkKeysOptions.Runner replaces it in tests.
type LinkKeysRunner func(ctx context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error)

// LinkKeysOptions configure ExecuteLinkKeys.
type LinkKeysOptions struct {
	// SignKey, when set, signs the bundle: evidence.sig holds the Ed25519 signature of the manifest
	// (docs/capacity.md, Signed evidence).
	SignKey ed25519.PrivateKey
	// OutputDir is the evidence directory; default DefaultOutputDir. It must be absent or empty.
	OutputDir string
	// Validate checks the profiles as the reference server reads them; its ServerConfigLine is
	// required, as the expected config: line of every profile comes from it.
	Validate LinkKeysValidateOptions
	// Server starts the reference servers (target mode start).
	Server ServerLauncher
	// Clients are the client worker processes a large workload fans out to.
	Clients linkkeysload.Launcher
	// Runner runs each phase; nil runs the real one (Server, Clients).
	Runner LinkKeysRunner
	// PricePhase, when set, records the cost of each phase's result (--cost-per-hour) before it is
	// checked and written.
	PricePhase func(res *linkkeysresult.Result) error
	// Environ reads a server process's TCP_*/PUBLIC_READ_* variables; nil reads /proc.
	Environ func(pid uint32) (map[string]string, error)
	// SettleWait bounds the wait for the server's quiet readings; 0 means 15 s.
	SettleWait time.Duration
	// Progress receives progress lines and the streams' lines; nil discards.
	Progress io.Writer
	// Logger receives the full errors the evidence summarises; nil discards.
	Logger  *slog.Logger
	Machine *machine.Record
	Now     func() time.Time
}

// ExecuteLinkKeys runs a LinkKeys capacity plan as Execute runs a Keycast one: it validates the
// plan before touching the output directory, runs every phase in order (each against a fresh
// reference server started with its environment profile, or against the running server once it
// is verified to run that profile), records each phase's checks, continues past ordinary misses,
// stops at a stop breach, a phase error or ctx's end, and writes the bundle: a results file per
// phase (a LinkKeys combined result, which `loadproof report` reads), the server log of each
// phase, evidence.json and manifest.json. Errors are Execute's.
func ExecuteLinkKeys(ctx context.Context, pl *LinkKeysPlan, opts LinkKeysOptions) (*LinkKeysEvidence, error) {
	if opts.Validate.ServerConfigLine == nil {
		return nil, fmt.Errorf("%w: no way to compute the server's expected config: line (LinkKeysOptions.Validate.ServerConfigLine)", ErrInvalidPlan)
	}
	env, err := ValidateLinkKeys(pl, opts.Validate)
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
		rec = machine.Collect("TCP_", "PUBLIC_READ_")
	}
	rec.Target = "linkkeys " + pl.Target.Mode
	rec = scrubMachine(rec)
	runner := opts.Runner
	if runner == nil {
		runner = realLinkKeysRunner(pl, opts, progress, logger)
	}

	b := &bundle{dir: dir}
	servers := make([]*ServerRecord, len(pl.Phases))
	logs := make([][]byte, len(pl.Phases))
	shedding := make([]map[string]bool, len(pl.Phases))
	h := Harness[*linkkeysresult.Result]{
		Run: func(ctx context.Context, i int) (*PhaseResult[*linkkeysresult.Result], error) {
			ph := &pl.Phases[i]
			cfg := CombinedConfig(ph)
			prof := phaseProfile(pl, ph, cfg)
			line, err := opts.Validate.ServerConfigLine(prof.Variables)
			if err != nil {
				return nil, &SafeError{Msg: "computing the expected config: line", Err: err}
			}
			srec := &ServerRecord{Mode: "started", EnvironmentProfile: ph.EnvironmentProfile, Declared: prof.Variables,
				Processes: max(prof.Processes, 1), ExpectedConfigLine: line, Mismatches: []string{},
				SourcePrefixes: prof.Variables[plan.SourcePrefixesVariable]}
			switch pl.Target.Mode {
			case plan.TargetRunning:
				srec.Mode, srec.SourcePrefixes = "running", cfg.SourcePrefixes()
			case plan.TargetRemote:
				srec.Mode, srec.SourcePrefixes = "remote", cfg.SourcePrefixes()
			}
			if srec.Declared == nil {
				srec.Declared = map[string]string{}
			}
			servers[i] = srec
			res, log, err := runner(ctx, LinkKeysPhaseRun{Index: i, Phase: ph, Profile: prof, Config: cfg, Server: srec,
				Stop: liveStop(pl.StopConditions)})
			logs[i] = log
			if err != nil || res == nil {
				return nil, err
			}
			if opts.PricePhase != nil {
				if err := opts.PricePhase(res); err != nil {
					return nil, &SafeError{Msg: "pricing the phase", Err: err}
				}
			}
			m := LinkKeysPhaseMetrics(res)
			return &PhaseResult[*linkkeysresult.Result]{Results: res, Envelope: &res.Envelope, Metrics: m, Stop: res.Stop,
				ElapsedSecs: res.PlannedPartSecs(), Summary: linkKeysSummary(res, m)}, nil
		},
		Checks: func(i int) ([]CheckSpec, []CheckSpec) {
			checks, stop, shed := linkKeysCheckSpecs(pl, &pl.Phases[i])
			shedding[i] = shed
			return checks, stop
		},
		Scrub: scrubLinkKeysResult,
		Extra: func(i int) map[string][]byte {
			if len(logs[i]) == 0 {
				return nil
			}
			name := strings.TrimSuffix(PhaseFileName(i, pl.Phases[i].Name), ".json") + ".server.log"
			if servers[i] != nil {
				servers[i].Log = name
			}
			return map[string][]byte{name: logs[i]}
		},
	}
	for i := range pl.Phases {
		ph := &pl.Phases[i]
		h.Phases = append(h.Phases, PhasePlan{Name: ph.Name, Kind: ph.Kind(), DurationSeconds: ph.DurationSeconds, Describe: describeLinkKeysPhase(ph)})
	}
	out := execute(ctx, h, b, progress, logger)

	// A phase error after the server was reached (a server running other limits) keeps its log.
	if n := len(out.Phases); n > 0 && !out.Phases[n-1].HasResults && len(logs[n-1]) > 0 {
		name := strings.TrimSuffix(PhaseFileName(n-1, pl.Phases[n-1].Name), ".json") + ".server.log"
		if b.write(name, logs[n-1]) == nil && servers[n-1] != nil {
			servers[n-1].Log = name
		}
	}
	phases := make([]LinkKeysPhaseEvidence, 0, len(out.Phases))
	vs := make([]verdictPhase, 0, len(out.Phases))
	for i, r := range out.Phases {
		pe := LinkKeysPhaseEvidence{Name: r.Name, Kind: r.Kind, Passed: r.Passed, Checks: r.Checks, StopBreached: r.StopBreached,
			StopChecks: r.StopChecks, Error: r.Error, ResultsFile: r.ResultsFile, LiveStop: r.LiveStop, Interrupted: r.Interrupted,
			Harness: plan.HarnessLinkKeys, Server: servers[i], GeneratorLimited: r.GeneratorLimited,
			PlannedSecs: r.PlannedSecs, ElapsedSecs: r.ElapsedSecs, Overran: r.Overran}
		if r.HasResults {
			pe.Results = r.Results
			pe.Metrics = map[string]Number{}
			for k, v := range r.Metrics {
				pe.Metrics[k] = Number(v)
			}
		}
		phases = append(phases, pe)
		vs = append(vs, r.verdict())
	}
	var unverified []string
	for i, r := range out.Phases {
		if b := unverifiedServer(r.Name, servers[i], r.HasResults); b != "" {
			unverified = append(unverified, b)
		}
	}
	c := linkKeysConclude(pl, vs, out.StopReason, shedding, unverified)
	ev := &LinkKeysEvidence{
		SchemaVersion: SchemaVersion, EvidenceScope: EvidenceScope, GeneratedAt: now().UTC().Format(time.RFC3339Nano),
		ExecutionEnvironment: env, Plan: pl, Passed: c.Passed, CertificationReady: c.CertificationReady,
		StoppedAfterPhase: out.StoppedAfter, Phases: phases, CertificationBlockers: c.Blockers, StopReason: out.StopReason,
		Machine: &rec, Harness: plan.HarnessLinkKeys,
	}
	eb, err := ev.Encode()
	if err != nil {
		return nil, err
	}
	if err := finishBundle(b, eb, out, c.Passed, now, opts.SignKey); err != nil {
		if isLimits(err) {
			return ev, err
		}
		return nil, err
	}
	return ev, nil
}

// phaseProfile is the environment a phase's server runs with: the phase's profile and, for a
// server the harness starts, TCP_SOURCE_PREFIXES naming every stream's source range after the
// stream, so the server counts each stream's accounting apart (the combined command attributes it
// per stream). A running server is read with whatever prefixes it counts; the declared variables
// are the profile's alone.
func phaseProfile(pl *LinkKeysPlan, ph *LinkKeysPhase, cfg linkkeysload.CombinedConfig) EnvironmentProfile {
	prof := pl.EnvironmentProfiles[ph.EnvironmentProfile]
	prefixes := cfg.SourcePrefixes()
	if pl.Target.Mode == plan.TargetRunning || prefixes == "" || len(cfg.SourceRanges()) > linkKeysMaxSourcePrefixes {
		return prof
	}
	vars := make(map[string]string, len(prof.Variables)+1)
	for k, v := range prof.Variables {
		vars[k] = v
	}
	vars[plan.SourcePrefixesVariable] = prefixes
	prof.Variables = vars
	return prof
}

// linkKeysMaxSourcePrefixes is the most source prefixes the reference server counts
// (linkkeysserver.MaxSourcePrefixes); a phase of more streams is attributed by elimination.
const linkKeysMaxSourcePrefixes = 16

func isLimits(err error) bool {
	_, inc := err.(*incompleteError)
	return inc || err == ErrLimitsExceeded
}

func describeLinkKeysPhase(ph *LinkKeysPhase) string {
	w := &ph.Workload
	var parts []string
	if h := w.Held; h != nil {
		parts = append(parts, fmt.Sprintf("held %d", h.Count))
	}
	if h := w.Handshakes; h != nil {
		if h.Rate > 0 {
			parts = append(parts, fmt.Sprintf("handshakes %g/s", h.Rate))
		} else {
			parts = append(parts, fmt.Sprintf("handshakes ×%d", h.Concurrency))
		}
	}
	if r := w.Requests; r != nil {
		parts = append(parts, fmt.Sprintf("requests %s over %d", r.Op, r.Connections))
	}
	for i, d := range w.DDoS {
		parts = append(parts, fmt.Sprintf("%s %d sources at %gs", w.WaveName(i), d.Sources, d.StartSecs))
	}
	return fmt.Sprintf("%s, profile %s, %d s: %s", ph.Kind(), ph.EnvironmentProfile, ph.DurationSeconds, strings.Join(parts, ", "))
}

// CombinedConfig turns a phase's workload into the combined command's configuration (the target
// is the runner's to fill).
func CombinedConfig(ph *LinkKeysPhase) linkkeysload.CombinedConfig {
	w := &ph.Workload
	ip := func(s string) linkkeysload.IPv4 {
		a, _ := linkkeysload.ParseIPv4("client_ip_base", s) // validated
		return a
	}
	dur := func(d uint64) uint64 {
		if d == 0 {
			return ph.DurationSeconds
		}
		return d
	}
	cfg := linkkeysload.CombinedConfig{
		AttemptTimeout: time.Duration(cmpU(w.AttemptTimeoutSecs, linkkeysload.DefaultAttemptTimeoutSecs)) * time.Second,
		DDoSTimeout:    time.Duration(cmpU(w.DDoSAttemptTimeoutSecs, linkkeysload.DefaultDDoSTimeoutSecs)) * time.Second,
	}
	if h := w.Held; h != nil {
		cfg.Held = &linkkeysload.HeldStream{Count: h.Count, Concurrency: h.Concurrency, Rate: h.Rate, HoldSecs: dur(h.HoldSecs), StartSecs: h.StartSecs,
			Sources: linkkeysload.SourceAddrs{Base: ip(h.ClientIPBase), Count: h.ClientIPCount}}
	}
	if h := w.Handshakes; h != nil {
		cfg.Handshakes = &linkkeysload.HandshakeStream{Concurrency: h.Concurrency, Rate: h.Rate, Resume: h.Resume, StartSecs: h.StartSecs,
			DurationSecs: dur(h.DurationSecs), Sources: linkkeysload.SourceAddrs{Base: ip(h.ClientIPBase), Count: h.ClientIPCount}}
	}
	if r := w.Requests; r != nil {
		cfg.Requests = &linkkeysload.RequestStream{Connections: r.Connections, Pipeline: r.Pipeline, Rate: r.Rate, Op: r.Op, StartSecs: r.StartSecs,
			DurationSecs: dur(r.DurationSecs), Sources: linkkeysload.SourceAddrs{Base: ip(r.ClientIPBase), Count: r.ClientIPCount}}
	}
	for i, d := range w.DDoS {
		cfg.DDoS = append(cfg.DDoS, linkkeysload.DDoSWave{Name: w.WaveName(i), StartSecs: d.StartSecs, Sources: d.Sources, Concurrency: d.Concurrency,
			Base: ip(d.ClientIPBase)})
	}
	return cfg
}

func cmpU(v uint64, def int) uint64 {
	if v == 0 {
		return uint64(def)
	}
	return v
}

// Stop check metric names of a LinkKeys phase.
const (
	MetricStopServerRSS            = "stop_server_rss_bytes"
	MetricStopHandshakeFailures    = "stop_handshake_failure_rate"
	MetricStopRequestErrors        = "stop_request_error_rate"
	MetricLiveServerRSS            = "server.rss_bytes"
	linkKeysShedMetricPrefix       = "shed_"
	linkKeysAccountingGapFigure    = "accounting_gap"
	linkKeysRSSPeakMetric          = "server.rss_peak_bytes"
	linkKeysHandshakeFailureRate   = "handshakes.failure_rate"
	linkKeysRequestErrorRateFigure = "requests.error_rate"
)

// linkKeysCheckSpecs are a phase's declared checks, then its expected shedding's (one at-least-1
// check per reason, and the accounting gap at most 0 when the accounting must be exact), and its
// stop checks; shed names the shedding checks (for certification).
func linkKeysCheckSpecs(pl *LinkKeysPlan, ph *LinkKeysPhase) (checks, stop []CheckSpec, shed map[string]bool) {
	for _, c := range ph.Checks {
		cmp := AtLeast
		if c.Comparison == string(AtMost) {
			cmp = AtMost
		}
		checks = append(checks, CheckSpec{Metric: c.Metric, Comparison: cmp, Limit: c.Limit})
	}
	shed = map[string]bool{}
	if es := ph.ExpectedShedding; es != nil {
		for _, r := range es.Reasons {
			m := es.Stream + "." + linkKeysShedMetricPrefix + r
			checks = append(checks, CheckSpec{Metric: m, Comparison: AtLeast, Limit: 1})
			shed[m] = true
		}
		if es.ExactAccounting {
			m := es.Stream + "." + linkKeysAccountingGapFigure
			checks = append(checks, CheckSpec{Metric: m, Comparison: AtMost, Limit: 0})
			shed[m] = true
		}
	}
	s := pl.StopConditions
	stop = []CheckSpec{{Metric: MetricStopServerRSS, From: linkKeysRSSPeakMetric, Comparison: AtMost, Limit: float64(s.MaxServerRSSBytes)}}
	if ph.Workload.Handshakes != nil {
		stop = append(stop, CheckSpec{Metric: MetricStopHandshakeFailures, From: linkKeysHandshakeFailureRate, Comparison: AtMost, Limit: s.MaxHandshakeFailureRate})
	}
	if ph.Workload.Requests != nil {
		stop = append(stop, CheckSpec{Metric: MetricStopRequestErrors, From: linkKeysRequestErrorRateFigure, Comparison: AtMost, Limit: s.MaxRequestErrorRate})
	}
	return checks, stop, shed
}

// liveStop is the live stop condition: the server's RSS above the plan's limit in any sample.
func liveStop(s plan.LinkKeysStopConditions) func(time.Duration, map[string]float64) *result.StopEvent {
	return func(_ time.Duration, m map[string]float64) *result.StopEvent {
		if rss, ok := m["process_rss_bytes"]; ok && rss > float64(s.MaxServerRSSBytes) {
			return &result.StopEvent{Reason: StopReasonStopCondition, Metric: MetricLiveServerRSS, Observed: rss, Limit: float64(s.MaxServerRSSBytes)}
		}
		return nil
	}
}

func linkKeysSummary(res *linkkeysresult.Result, m Metrics) string {
	var parts []string
	add := func(format string, keys ...string) {
		args := make([]any, len(keys))
		for i, k := range keys {
			v, ok := m[k]
			if !ok {
				return
			}
			args[i] = v
		}
		parts = append(parts, fmt.Sprintf(format, args...))
	}
	add("held %.0f established, %.2f%% survived", "held.established", "held.survival_percent")
	add("handshakes %.1f/s, p99 %.1f ms", "handshakes.rate", "handshakes.p99_ms")
	add("requests %.1f/s, p99 %.2f ms", "requests.rate", "requests.p99_ms")
	if c := res.Combined; c != nil {
		for _, s := range c.Streams {
			if s.Kind == linkkeysload.CmdDDoS {
				add(s.Name+" %.0f attempts, %.0f admitted", s.Name+".attempted", s.Name+".admitted")
			}
		}
	}
	add("server accounting gap %.0f, RSS peak %.0f bytes", "server.accounting_gap", "server.rss_peak_bytes")
	add("server host %.0f listen overflows, %.0f listen drops, %.0f retransmitted segments, %.0f syncookies",
		"server.host_tcp_listen_overflows", "server.host_tcp_listen_drops", "server.host_tcp_retrans_segs", "server.host_tcp_syncookies_sent")
	return strings.Join(parts, "; ")
}

// scrubLinkKeysResult makes a phase's result safe for the bundle: cause names that are not plain
// identifiers are counted under other_unclassified, server sample names kept only when they are
// metric names, secret-looking machine settings redacted.
func scrubLinkKeysResult(r *linkkeysresult.Result) {
	if r == nil {
		return
	}
	scrubEnv := func(e *result.Envelope) {
		e.Causes = scrubCauses(e.Causes)
		for i := range e.Intervals {
			iv := &e.Intervals[i]
			iv.Causes = scrubCauses(iv.Causes)
			for k := range iv.Server {
				if !prometheusName().MatchString(k) {
					delete(iv.Server, k)
				}
			}
		}
		for i := range e.Machines {
			e.Machines[i] = scrubMachine(e.Machines[i])
		}
	}
	scrubEnv(&r.Envelope)
	if r.Combined != nil {
		for i := range r.Combined.Streams {
			if s := r.Combined.Streams[i].Result; s != nil {
				scrubEnv(&s.Envelope)
				if s.Attempts != nil {
					s.Attempts.Reasons = scrubCauses(s.Attempts.Reasons)
				}
			}
		}
	}
	if r.Attempts != nil {
		r.Attempts.Reasons = scrubCauses(r.Attempts.Reasons)
	}
	if r.Server != nil {
		// The source is a log in a temporary directory (or a running server's log path, which
		// the plan names); the note is loadproof's own text about a reading that failed.
		r.Server.Source = filepath.Base(r.Server.Source)
	}
	if r.Stop != nil && !safeKey().MatchString(r.Stop.Metric) && r.Stop.Metric != "" {
		r.Stop.Metric = "unnamed"
	}
}

// realLinkKeysRunner is the runner that starts (or reaches) the server and runs the workload with
// linkkeysload.Combined.
func realLinkKeysRunner(pl *LinkKeysPlan, opts LinkKeysOptions, progress io.Writer, logger *slog.Logger) LinkKeysRunner {
	return func(ctx context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		var srv *phaseServer
		var err error
		var work string
		var remoteMetrics *linkkeysload.MetricsSource
		switch pl.Target.Mode {
		case plan.TargetRunning:
			srv, err = running(pl.Target)
		case plan.TargetRemote:
			srv, remoteMetrics, err = remote(ctx, pl.Target, opts.Validate.Rules)
		default:
			work, err = os.MkdirTemp("", "loadproof-lkcap-*")
			if err != nil {
				return nil, nil, &SafeError{Msg: "making the server's work directory", Err: err}
			}
			defer os.RemoveAll(work)
			srv, err = opts.Server.start(ctx, run.Profile, work)
		}
		if err != nil {
			var log []byte
			if work != "" {
				log, _ = readFrom(filepath.Join(work, "server.log"), 0, 16<<20)
			}
			return nil, log, err
		}
		defer srv.stop()
		// A started server's log is the phase's whole; a running server's is its last config: line
		// (printed when it started, maybe long ago) and what it wrote during the phase.
		keepLog := func() []byte {
			if pl.Target.Mode == plan.TargetRemote {
				return nil // its log is on its machine; the evidence keeps its config: line
			}
			if pl.Target.Mode != plan.TargetRunning {
				full, _ := readFrom(srv.logPath, 0, 64<<20)
				return full
			}
			b, _ := readFrom(srv.logPath, srv.logFrom, 64<<20)
			if line := run.Server.ConfigLine; line != "" && !bytes.Contains(b, []byte(line)) {
				b = append([]byte(line+"\n"), b...)
			}
			return b
		}
		metrics := &linkkeysload.MetricsSource{Location: srv.logPath}
		if pl.Target.Mode == plan.TargetRemote {
			if err := verifyRemote(ctx, srv, remoteMetrics, run.Server); err != nil {
				return nil, nil, err
			}
			metrics = remoteMetrics
			// Sources are this machine's own addresses toward another host: prove they bind.
			warnings, err := linkkeysload.CheckSources(srv.target.Addr, run.Config.SourceUses(), nil)
			for _, w := range warnings {
				logger.Warn(w)
			}
			if err != nil {
				return nil, nil, &SafeError{Msg: "the phase's source addresses", Err: err}
			}
		} else if err := verify(ctx, srv, run.Server, opts.Environ); err != nil {
			return nil, keepLog(), err
		}
		cfg := run.Config
		cfg.Target = srv.target
		workers := run.Phase.Workload.ClientWorkers
		if workers == 0 {
			soft, err := machine.RaiseNofile()
			if err != nil || soft == 0 {
				soft = 1024
			}
			workers = linkkeysload.DefaultWorkers(cfg.Sockets(), soft)
		}
		r := linkkeysload.Run{Stdout: progress, Stderr: progress, Workers: workers, Launcher: opts.Clients,
			Metrics: metrics, SettleWait: opts.SettleWait, Log: logger, Stop: run.Stop,
			StreamProcesses: true} // the request stream apart from the handshakes (linkkeysload.Run.StreamProcesses)
		res, err := linkkeysload.Combined(ctx, cfg, r)
		srv.stop()
		if err != nil {
			return nil, keepLog(), &SafeError{Msg: "the LinkKeys load could not run the workload", Err: err}
		}
		return &res, keepLog(), nil
	}
}

// LinkKeysPhaseMetrics computes a phase's named figures from its combined result alone: every
// stream's ("held.established", "handshakes.p99_ms", "ddos.shed_overflow", …) and the server's
// ("server.accounting_gap", "server.rss_bytes_per_connection", …). docs/capacity.md lists them. A
// figure that cannot be known is left out, so a check of it fails.
func LinkKeysPhaseMetrics(res *linkkeysresult.Result) Metrics {
	m := Metrics{}
	c := res.Combined
	if c == nil {
		return m
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var held int64 = -1
	failing := 0
	for _, s := range c.Streams {
		if s.Result != nil && s.Result.Attempts != nil && s.Result.Attempts.Failed > 0 {
			failing++
		}
	}
	acc := res.Server
	verified := acc != nil && len(acc.Checks) > 0
	for _, s := range c.Streams {
		r := s.Result
		if r == nil {
			continue
		}
		a := r.Attempts
		if a == nil {
			a = linkkeysresult.NewAttempts()
		}
		p := s.Name + "."
		switch s.Kind {
		case linkkeysresult.CmdConnections:
			m[p+"attempted"], m[p+"established"], m[p+"failed"] = float64(a.Attempted), float64(a.Succeeded), float64(a.Failed)
			held = a.Succeeded
			if a.Latency.Count() > 0 {
				m[p+"connect_p50_ms"], m[p+"connect_p99_ms"] = ms(a.Latency.Quantile(0.5)), ms(a.Latency.Quantile(0.99))
			}
			if sv := s.Survival; sv != nil {
				m[p+"survival_percent"], m[p+"lost"] = sv.Percent, float64(sv.Lost)
			}
			if h := r.Hold; h != nil {
				m[p+"ramp_secs"] = time.Duration(h.RampTime).Seconds()
			}
		case linkkeysresult.CmdHandshakeBench:
			h := r.Handshakes
			if h == nil {
				h = &linkkeysresult.Handshakes{}
			}
			m[p+"attempted"], m[p+"completed"], m[p+"failed"] = float64(a.Attempted), float64(h.Completed), float64(h.Failed)
			m[p+"failure_rate"] = ratio(h.Failed, a.Attempted)
			m[p+"rate"], m[p+"full"], m[p+"resumed"] = h.Rate, float64(h.Full), float64(h.Resumed)
			if a.Latency.Count() > 0 {
				m[p+"p50_ms"], m[p+"p99_ms"] = ms(a.Latency.Quantile(0.5)), ms(a.Latency.Quantile(0.99))
			}
		case linkkeysresult.CmdRequestBench:
			q := r.Requests
			if q == nil {
				q = &linkkeysresult.Requests{}
			}
			m[p+"connections"], m[p+"completed"], m[p+"errors"] = float64(q.Connections), float64(q.Completed), float64(q.Errors)
			m[p+"error_rate"] = ratio(q.Errors, q.Completed+q.Errors)
			m[p+"rate"], m[p+"rate_limited"], m[p+"late_sends"] = q.Rate, float64(q.Statuses["Unavailable"]), float64(q.LateSends)
			if q.Latency != nil && q.Latency.Count() > 0 {
				m[p+"p50_ms"], m[p+"p99_ms"] = ms(q.Latency.Quantile(0.5)), ms(q.Latency.Quantile(0.99))
			}
			if q.Uncorrected != nil && q.Uncorrected.Count() > 0 {
				m[p+"uncorrected_p99_ms"] = ms(q.Uncorrected.Quantile(0.99))
			}
		case linkkeysresult.CmdDDoS:
			m[p+"attempted"], m[p+"allowed"], m[p+"denied"] = float64(a.Attempted), float64(a.Succeeded), float64(a.Failed)
			if a.Latency.Count() > 0 {
				m[p+"connect_p99_ms"] = ms(a.Latency.Quantile(0.99))
			}
		}
		streamServerFigures(m, p, s, a, acc, verified, failing)
	}
	if !verified {
		return m
	}
	d := acc.Delta
	m["server.accepted"], m["server.admitted"], m["server.shed"] = float64(d.Accepted), float64(d.Admitted), float64(d.Shed())
	m["server.shed_per_source"], m["server.shed_overflow"] = float64(d.ShedPerSource), float64(d.ShedOverflow)
	m["server.shed_global"], m["server.shed_connection_limit"] = float64(d.ShedGlobal), float64(d.ShedConnectionLimit)
	m["server.handshake_rejections"], m["server.handshake_timeouts"] = float64(d.HandshakeRejections), float64(d.HandshakeTimeouts)
	if d.HasCompleted {
		m["server.handshakes_completed"] = float64(d.HandshakesCompleted)
	}
	var gap int64
	for _, ch := range acc.Checks {
		gap += abs64(ch.Client - ch.Server)
	}
	m["server.accounting_gap"] = float64(gap)
	m["server.established_after"] = float64(acc.After.EstablishedConnections)
	m["server.open_after"] = float64(acc.After.OpenConnections)
	m["server.frame_buffer_bytes_idle"] = float64(acc.After.FrameBufferBytes)
	peak, fbPeak := -1.0, -1.0
	for _, iv := range res.Intervals {
		if v, ok := iv.Server["process_rss_bytes"]; ok {
			peak = max(peak, v)
		}
		if v, ok := iv.Server["frame_buffer_bytes"]; ok {
			fbPeak = max(fbPeak, v)
		}
	}
	if acc.After.ProcessRSSBytes != nil {
		peak = max(peak, float64(*acc.After.ProcessRSSBytes))
	}
	if fbPeak >= 0 {
		m["server.frame_buffer_bytes_peak"] = fbPeak
	}
	if peak >= 0 {
		m["server.rss_peak_bytes"] = peak
	}
	if acc.Before.ProcessRSSBytes != nil {
		base := float64(*acc.Before.ProcessRSSBytes)
		m["server.rss_baseline_bytes"] = base
		if peak >= 0 && held > 0 {
			m["server.rss_bytes_per_connection"] = (peak - base) / float64(held)
		}
	}
	// The server host's TCP counters over the phase (server.host_tcp_listen_overflows, …), where
	// the server reports them.
	if g, ok := acc.After.HostTCPGrowth(acc.Before); ok {
		for i, name := range linkkeys.HostTCPFields {
			m["server."+name] = float64(g[i])
		}
	}
	return m
}

// streamServerFigures adds a stream's server-side figures (plan.StreamServerFigures): from the
// server's counters of its source prefix when it reports them (every stream of a phase whose server
// the harness started, which names each stream's range in TCP_SOURCE_PREFIXES); otherwise by
// elimination, where that is exact: a stream with no client-observed failure had nothing shed
// (every shed connection fails at the client), and when only one stream of the phase saw failures,
// every shed of the phase is that stream's. With two or more failing streams and no per-prefix
// counters the figures are unknown (their checks fail).
func streamServerFigures(m Metrics, p string, s linkkeysresult.Stream, a *linkkeysresult.Attempts, acc *linkkeysresult.ServerAccounting, verified bool, failing int) {
	if ss := s.Server; ss != nil {
		var closed int64
		closedSeen := false
		for k, v := range ss.Delta {
			switch {
			case strings.HasPrefix(k, "shed_handshake_"):
				m[p+"shed_"+strings.TrimPrefix(k, "shed_handshake_")] = float64(v)
			case k == "shed_connection_limit", k == "admitted", k == "accepted", k == "handshake_rejections", k == "handshake_timeouts":
				m[p+k] = float64(v)
			case k == "established":
				m[p+"handshakes_completed"] = float64(v)
			case k == "rate_limited_responses":
				m[p+"server_rate_limited"] = float64(v)
			case strings.HasPrefix(k, "closed_"):
				closed += v
				closedSeen = true
			}
		}
		if closedSeen {
			m[p+"server_closed"] = float64(closed)
		}
		m[p+"shed"] = float64(ss.Shed())
		var gap int64
		for _, ch := range ss.Checks {
			gap += abs64(ch.Client - ch.Server)
		}
		m[p+linkKeysAccountingGapFigure] = float64(gap)
		return
	}
	if !verified {
		return
	}
	switch {
	case a.Failed == 0:
		for _, r := range plan.ShedReasons {
			m[p+"shed_"+r] = 0
		}
		m[p+"shed"], m[p+"admitted"] = 0, float64(a.Attempted)
	case failing == 1:
		d := acc.Delta
		m[p+"shed_per_source"], m[p+"shed_overflow"] = float64(d.ShedPerSource), float64(d.ShedOverflow)
		m[p+"shed_global"], m[p+"shed_connection_limit"] = float64(d.ShedGlobal), float64(d.ShedConnectionLimit)
		m[p+"shed"] = float64(d.Shed())
		m[p+"admitted"] = float64(a.Attempted - d.Shed() - d.HandshakeRejections - d.HandshakeTimeouts)
	default:
		return // not attributable: the accounting gap stays unknown
	}
	// By elimination the stream's accounting is the whole run's.
	var gap int64
	for _, ch := range acc.Checks {
		gap += abs64(ch.Client - ch.Server)
	}
	m[p+linkKeysAccountingGapFigure] = float64(gap)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// linkKeysConclude is the LinkKeys verdict: conclude with shedding declared by expected_shedding and
// judged by the shedding checks (shedding holds each phase's, from linkKeysCheckSpecs).
// unverifiedServer is the certification blocker of a phase that ran against a remote server whose
// limits were not verified (no metrics URL, or no readable config: line): such a phase cannot
// certify anything about that server. It is "" for every other phase.
func unverifiedServer(phase string, srec *ServerRecord, hasResults bool) string {
	if srec == nil || srec.Mode != plan.TargetRemote || !hasResults || srec.ServerVerified {
		return ""
	}
	return fmt.Sprintf("phase %q: the server side was not verified: %s", phase, srec.VerificationNote)
}

func linkKeysConclude(pl *LinkKeysPlan, vs []verdictPhase, stopReason string, shedding []map[string]bool, unverified []string) Conclusion {
	planned := make([]string, len(pl.Phases))
	declared := false
	for i, ph := range pl.Phases {
		planned[i] = ph.Name
		if ph.ExpectedShedding != nil {
			declared = true
		}
	}
	c := conclude(planned, vs, stopReason, certification{
		Declared: declared,
		IsShedding: func(ch Check) bool {
			for _, s := range shedding {
				if s[ch.Metric] {
					return true
				}
			}
			return false
		},
		NotDeclared: "no phase declares expected_shedding, so shedding was not tested; declare it on a ddos phase " +
			"(stream, the reasons it must be shed by, exact_accounting) against a server whose limits shed",
	})
	if len(unverified) > 0 {
		c.CertificationReady = false
		c.Blockers = append(c.Blockers, unverified...)
	}
	return c
}
