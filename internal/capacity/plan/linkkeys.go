package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/hostrule"
)

// HarnessLinkKeys is the harness name of a LinkKeys phase (and of its evidence).
const HarnessLinkKeys = "linkkeys"

// LinkKeysPlan is a capacity plan for the LinkKeys TCP harness (docs/capacity.md, LinkKeys plans):
// ordered phases, each naming its harness, the environment profile its server must run with and a
// workload of the LinkKeys streams (a held population, a handshake stream, a request stream, ddos
// waves), with the checks that judge it; stop conditions for every phase; and the profiles, each
// the TCP_* and PUBLIC_READ_* values a server must run with. It is in the spirit of the Keycast
// plan: declared before anything runs, parsed strictly, every problem reported at once.
type LinkKeysPlan struct {
	ProfileName       string    `json:"profile_name"`
	Revisions         Revisions `json:"revisions"`
	EnvironmentParity string    `json:"environment_parity"`
	// Target says which server the phases run against.
	Target LinkKeysTarget `json:"target"`
	// EnvironmentProfiles are the server settings phases name, by profile name.
	EnvironmentProfiles map[string]EnvironmentProfile `json:"environment_profiles"`
	StopConditions      LinkKeysStopConditions        `json:"stop_conditions"`
	Phases              []LinkKeysPhase               `json:"phases"`
	// CostPerHour and ServerCostPerHour, optional, price the load machine and the server's machine
	// per hour, as --cost-per-hour and --server-cost-per-hour do (which override them): each
	// phase's results then record its cost (docs/cost.md).
	CostPerHour       cost.Price `json:"cost_per_hour,omitzero"`
	ServerCostPerHour cost.Price `json:"server_cost_per_hour,omitzero"`
}

// Target modes.
const (
	// TargetStart: the capacity command starts a fresh reference server for every phase, with the
	// phase's environment profile, on loopback.
	TargetStart = "start"
	// TargetRunning: the phases run against a server that is already running (its info file and
	// the log of its stdout given), whose config: line and environment are verified against each
	// phase's profile before the phase runs.
	TargetRunning = "running"
	// TargetRemote: the phases run against a server already running anywhere (on another host
	// too), named by its address, fingerprint and domain; its config: line and METRICS are read
	// from its metrics URL (the reference server serves the line at /config beside /metrics). A
	// remote target without metrics_url runs, but its server side is not verified, so the
	// evidence cannot be certification-ready.
	TargetRemote = "remote"
)

// LinkKeysTarget is the server the phases run against.
type LinkKeysTarget struct {
	Mode string `json:"mode"`
	// InfoFile is the running server's info file (running mode only).
	InfoFile string `json:"info_file,omitempty"`
	// ServerLog is the file the running server's stdout goes to: its config: line and METRICS lines
	// (running mode only).
	ServerLog string `json:"server_log,omitempty"`
	// Addr is the remote server's HOST:PORT (remote mode only); a non-loopback host needs the
	// capacity command's exact --allow-host.
	Addr string `json:"addr,omitempty"`
	// Fingerprint is the remote server key's SHA-256, 64 hex characters (remote mode only).
	Fingerprint string `json:"fingerprint,omitempty"`
	// Domain is the remote server's domain (remote mode only).
	Domain string `json:"domain,omitempty"`
	// MetricsURL is the remote server's http(s)://HOST:PORT/metrics (remote mode, optional): its
	// METRICS for the accounting, and its config: line at /config on the same host for the
	// verification.
	MetricsURL string `json:"metrics_url,omitempty"`
}

// EnvironmentProfile is the settings a server must run with.
type EnvironmentProfile struct {
	Description string `json:"description,omitempty"`
	// Processes is the server's --processes (0 or absent: 1); the limits are divided among them.
	Processes int `json:"processes,omitempty"`
	// Variables are the TCP_* and PUBLIC_READ_* variables, by name; every other one of them is
	// unset (its default).
	Variables map[string]string `json:"variables"`
}

// LinkKeysStopConditions are absolute abort limits, judged on every phase: the server's RSS live
// (every server sample) and on the phase's peak; the handshake stream's failure rate and the
// request stream's error rate on the phase's totals. A breach stops the run.
type LinkKeysStopConditions struct {
	MaxServerRSSBytes       uint64  `json:"max_server_rss_bytes"`
	MaxHandshakeFailureRate float64 `json:"max_handshake_failure_rate"`
	MaxRequestErrorRate     float64 `json:"max_request_error_rate"`
}

// LinkKeysPhase is one predeclared phase.
type LinkKeysPhase struct {
	Name string `json:"name"`
	// Harness is "linkkeys".
	Harness string `json:"harness"`
	// EnvironmentProfile names the profile the phase's server runs with.
	EnvironmentProfile string `json:"environment_profile"`
	// DurationSeconds is the handshake and request streams' duration unless they give their own,
	// and the held population's least hold unless it gives its own.
	DurationSeconds uint64   `json:"duration_seconds"`
	Workload        Workload `json:"workload"`
	// Checks judge the phase, by metric name (see LinkKeysMetrics).
	Checks []CheckDecl `json:"checks"`
	// ExpectedShedding, when set, declares that a stream must be shed, by which reasons, and
	// whether its accounting must be exact; certification needs at least one phase to declare it.
	ExpectedShedding *ExpectedShedding `json:"expected_shedding"`
	// Notes are free text recorded with the phase (what it reproduces).
	Notes string `json:"notes,omitempty"`
}

// Workload is a phase's streams. At least one is required; each binds its own source range
// inside 127.0.0.0/8, and no two ranges overlap.
type Workload struct {
	// AttemptTimeoutSecs bounds one connect + TLS handshake (0: 10 s).
	AttemptTimeoutSecs uint64 `json:"attempt_timeout_secs,omitempty"`
	// DDoSAttemptTimeoutSecs bounds one ddos attempt (0: 5 s).
	DDoSAttemptTimeoutSecs uint64 `json:"ddos_attempt_timeout_secs,omitempty"`
	// ClientWorkers is the number of client processes (0: enough to stay under the open-file limit).
	ClientWorkers int                `json:"client_workers,omitempty"`
	Held          *HeldWorkload      `json:"held,omitempty"`
	Handshakes    *HandshakeWorkload `json:"handshakes,omitempty"`
	Requests      *RequestWorkload   `json:"requests,omitempty"`
	DDoS          []DDoSWorkload     `json:"ddos,omitempty"`
}

// HeldWorkload is the held population: Count connections, Concurrency attempts in flight (paced
// at Rate per second when above 0), held idle until the phase's other streams have ended and at
// least HoldSecs (0: the phase's duration) have passed.
type HeldWorkload struct {
	Count         uint32  `json:"count"`
	Concurrency   uint32  `json:"concurrency"`
	Rate          float64 `json:"rate,omitempty"`
	HoldSecs      uint64  `json:"hold_secs,omitempty"`
	StartSecs     float64 `json:"start_secs,omitempty"`
	ClientIPBase  string  `json:"client_ip_base"`
	ClientIPCount uint32  `json:"client_ip_count"`
}

// HandshakeWorkload is the connect-handshake-close stream: Concurrency loops back to back, or
// paced at Rate per second with at most Concurrency in flight; full or resumed.
type HandshakeWorkload struct {
	Concurrency   uint32  `json:"concurrency"`
	Rate          float64 `json:"rate,omitempty"`
	Resume        bool    `json:"resume,omitempty"`
	StartSecs     float64 `json:"start_secs,omitempty"`
	DurationSecs  uint64  `json:"duration_secs,omitempty"`
	ClientIPBase  string  `json:"client_ip_base"`
	ClientIPCount uint32  `json:"client_ip_count"`
}

// RequestWorkload is the request stream over Connections persistent connections: one at a time,
// Pipeline in flight, or at Rate per second in total; Op is domain-keys or hello.
type RequestWorkload struct {
	Connections   uint32  `json:"connections"`
	Pipeline      uint32  `json:"pipeline,omitempty"`
	Rate          float64 `json:"rate,omitempty"`
	Op            string  `json:"op"`
	StartSecs     float64 `json:"start_secs,omitempty"`
	DurationSecs  uint64  `json:"duration_secs,omitempty"`
	ClientIPBase  string  `json:"client_ip_base"`
	ClientIPCount uint32  `json:"client_ip_count"`
}

// DDoSWorkload is one ddos wave: one attempt from each of Sources addresses from ClientIPBase,
// Concurrency in flight, StartSecs into the phase. Name names its stream ("ddos-<n>" when empty).
type DDoSWorkload struct {
	Name         string  `json:"name,omitempty"`
	StartSecs    float64 `json:"start_secs,omitempty"`
	Sources      uint32  `json:"sources"`
	Concurrency  uint32  `json:"concurrency"`
	ClientIPBase string  `json:"client_ip_base"`
}

// CheckDecl is one declared check: a metric (stream.figure or server.figure), a comparison
// (at-least or at-most) and an inclusive limit.
type CheckDecl struct {
	Metric     string  `json:"metric"`
	Comparison string  `json:"comparison"`
	Limit      float64 `json:"limit"`
}

// ExpectedShedding declares a phase's expected shedding: the stream (any stream of the phase, or
// "server" for the whole phase) must be shed through each of Reasons (per_source, overflow, global,
// connection_limit) and, with ExactAccounting, the server must account for every one of its
// attempts as admitted or shed (attempts = admitted + shed, exactly).
type ExpectedShedding struct {
	Stream          string   `json:"stream"`
	Reasons         []string `json:"reasons"`
	ExactAccounting bool     `json:"exact_accounting"`
}

// ShedReasons are the server's shed reasons, as expected_shedding names them.
var ShedReasons = []string{"per_source", "overflow", "global", "connection_limit"}

// Stream kinds, as metric vocabularies are chosen.
const (
	StreamKindHeld      = "held"
	StreamKindHandshake = "handshakes"
	StreamKindRequest   = "requests"
	StreamKindDDoS      = "ddos"
	StreamKindServer    = "server"
)

// StreamServerFigures are the server's figures of one stream, which every stream kind has: from
// the server's counters of the stream's source prefix (TCP_SOURCE_PREFIXES, which the harness sets
// from the phase's streams), or by elimination from the whole run's where that is exact (see
// docs/capacity.md). server_closed and server_rate_limited are the prefix's closed_* and
// rate_limited_responses counters (per prefix only).
var StreamServerFigures = []string{"accepted", "admitted", "shed", "shed_per_source", "shed_overflow", "shed_global",
	"shed_connection_limit", "handshake_rejections", "handshake_timeouts", "handshakes_completed", "server_closed",
	"server_rate_limited", "accounting_gap"}

// LinkKeysMetrics lists, by stream kind, the figures a check may name as "<stream>.<figure>"
// (held, handshakes, requests, a ddos wave's name, or server): each kind's own client figures,
// then StreamServerFigures. docs/capacity.md says what each is.
var LinkKeysMetrics = map[string][]string{
	StreamKindHeld: append([]string{"attempted", "established", "failed", "survival_percent", "lost", "connect_p50_ms", "connect_p99_ms",
		"ramp_secs"}, StreamServerFigures...),
	StreamKindHandshake: append([]string{"attempted", "completed", "failed", "failure_rate", "rate", "full", "resumed", "p50_ms", "p99_ms"},
		StreamServerFigures...),
	StreamKindRequest: append([]string{"connections", "completed", "errors", "error_rate", "rate", "rate_limited", "p50_ms", "p99_ms",
		"uncorrected_p99_ms", "late_sends"}, StreamServerFigures...),
	StreamKindDDoS: append([]string{"attempted", "allowed", "denied", "connect_p99_ms"}, StreamServerFigures...),
	StreamKindServer: {"accepted", "admitted", "shed", "shed_per_source", "shed_overflow", "shed_global", "shed_connection_limit",
		"handshake_rejections", "handshake_timeouts", "handshakes_completed", "accounting_gap", "rss_baseline_bytes",
		"rss_peak_bytes", "rss_bytes_per_connection", "frame_buffer_bytes_peak", "frame_buffer_bytes_idle",
		"established_after", "open_after"},
}

// SourcePrefixesVariable is the server variable the harness sets for every phase it starts a
// server for: each stream's source range under the stream's name, so the server's accounting is
// attributed per stream. A profile cannot set it.
const SourcePrefixesVariable = "TCP_SOURCE_PREFIXES"

// LinkKeysVariables are the server variables an environment profile may set: every TCP_* and
// PUBLIC_READ_* variable the reference server reads, except TCP_PORT (the harness picks the port)
// and TCP_SOURCE_PREFIXES (the harness sets it from each phase's streams).
var LinkKeysVariables = []string{
	"TCP_MAX_CONNECTIONS", "TCP_HANDSHAKE_TIMEOUT_SECONDS", "TCP_HANDSHAKE_CONCURRENCY",
	"TCP_IDLE_TIMEOUT_SECONDS", "TCP_IO_TIMEOUT_SECONDS", "TCP_MAX_INFLIGHT_FRAMES", "TCP_WRITE_QUEUE_BOUND",
	"TCP_LISTEN_BACKLOG", "TCP_MAX_INFLIGHT_FRAME_BYTES", "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND",
	"TCP_FRAME_BODY_GRACE_SECONDS",
	"TCP_HANDSHAKE_RATE_PER_MINUTE", "TCP_HANDSHAKE_BURST", "TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND",
	"TCP_HANDSHAKE_GLOBAL_BURST", "TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND", "TCP_HANDSHAKE_OVERFLOW_BURST",
	"TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD", "TCP_HANDSHAKE_WINDOW_SECONDS", "TCP_HANDSHAKE_IPV6_PREFIX",
	"PUBLIC_READ_RATE_PER_MINUTE", "PUBLIC_READ_BURST", "PUBLIC_READ_GLOBAL_RATE_PER_SECOND",
	"PUBLIC_READ_GLOBAL_BURST", "PUBLIC_READ_OVERFLOW_RATE_PER_SECOND", "PUBLIC_READ_OVERFLOW_BURST",
	"PUBLIC_READ_DISTINCT_SOURCE_THRESHOLD", "PUBLIC_READ_WINDOW_SECONDS", "PUBLIC_READ_IPV6_PREFIX",
	"PUBLIC_READ_TRUSTED_PROXIES",
}

// MaxServerProcesses bounds a profile's server processes.
const MaxServerProcesses = 64

// MaxClientWorkers bounds a workload's client processes.
const MaxClientWorkers = 256

// Streams returns the phase's stream names and kinds, in order: held, handshakes, requests, then
// the ddos waves.
func (w *Workload) Streams() (names, kinds []string) {
	if w.Held != nil {
		names, kinds = append(names, StreamKindHeld), append(kinds, StreamKindHeld)
	}
	if w.Handshakes != nil {
		names, kinds = append(names, StreamKindHandshake), append(kinds, StreamKindHandshake)
	}
	if w.Requests != nil {
		names, kinds = append(names, StreamKindRequest), append(kinds, StreamKindRequest)
	}
	for i := range w.DDoS {
		names, kinds = append(names, w.WaveName(i)), append(kinds, StreamKindDDoS)
	}
	return names, kinds
}

// WaveName returns the stream name of ddos wave i.
func (w *Workload) WaveName(i int) string {
	if n := w.DDoS[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("ddos-%d", i+1)
}

// Kind is the phase's kind as its evidence records it: the one stream's kind, or "combined".
func (ph *LinkKeysPhase) Kind() string {
	_, kinds := ph.Workload.Streams()
	if len(kinds) == 1 {
		return kinds[0]
	}
	return "combined"
}

// ReadLinkKeysPlan reads and parses a LinkKeys plan file (it does not validate it).
func ReadLinkKeysPlan(path string) (*LinkKeysPlan, error) {
	return readPlanFile(path, ParseLinkKeysPlan)
}

// ParseLinkKeysPlan decodes a LinkKeys plan as strictly as ParsePlan decodes a Keycast one: unknown,
// duplicate or differently-cased field names, missing required fields, wrong types, out-of-range
// integers and trailing data are rejected, all problems together in a *ParseError. Optional fields
// (omitempty above, and expected_shedding, which may be null) may be left out.
func ParseLinkKeysPlan(b []byte) (*LinkKeysPlan, error) {
	if len(b) > MaxPlanSize {
		return nil, &ParseError{Problems: []error{fmt.Errorf("the plan is larger than %d bytes", MaxPlanSize)}}
	}
	if !utf8.Valid(b) {
		return nil, &ParseError{Problems: []error{errors.New("the plan is not valid UTF-8")}}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, &ParseError{Problems: []error{syntaxProblem(b, err)}}
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		line, col := lineCol(b, int64(len(b)-len(rest)))
		return nil, &ParseError{Problems: []error{fmt.Errorf("trailing data after the plan object at line %d column %d", line, col)}}
	}
	p := &parser{}
	pl := p.linkKeysPlan(raw)
	if len(p.problems) > 0 {
		return nil, &ParseError{Problems: p.problems}
	}
	return pl, nil
}

var (
	lkPlanFields     = []string{"profile_name", "revisions", "environment_parity", "target", "environment_profiles", "stop_conditions", "phases", "cost_per_hour", "server_cost_per_hour"}
	lkTargetFields   = []string{"mode", "info_file", "server_log", "addr", "fingerprint", "domain", "metrics_url"}
	lkProfileFields  = []string{"description", "processes", "variables"}
	lkStopFields     = []string{"max_server_rss_bytes", "max_handshake_failure_rate", "max_request_error_rate"}
	lkPhaseFields    = []string{"name", "harness", "environment_profile", "duration_seconds", "workload", "checks", "expected_shedding", "notes"}
	lkWorkloadFields = []string{"attempt_timeout_secs", "ddos_attempt_timeout_secs", "client_workers", "held", "handshakes", "requests", "ddos"}
	lkHeldFields     = []string{"count", "concurrency", "rate", "hold_secs", "start_secs", "client_ip_base", "client_ip_count"}
	lkHSFields       = []string{"concurrency", "rate", "resume", "start_secs", "duration_secs", "client_ip_base", "client_ip_count"}
	lkReqFields      = []string{"connections", "pipeline", "rate", "op", "start_secs", "duration_secs", "client_ip_base", "client_ip_count"}
	lkDDoSFields     = []string{"name", "start_secs", "sources", "concurrency", "client_ip_base"}
	lkCheckFields    = []string{"metric", "comparison", "limit"}
	lkShedFields     = []string{"stream", "reasons", "exact_accounting"}
	maxU32           = uint64(math.MaxUint32)
)

// members splits an object whose member names are data (a map), reporting duplicates.
func (p *parser) members(raw json.RawMessage, path string) map[string]json.RawMessage {
	if jsonKind(raw) != "an object" {
		p.fail(path, "expected an object, found %s", jsonKind(raw))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		p.fail(path, "malformed object: %v", err)
		return nil
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.fail(path, "malformed object: %v", err)
			return nil
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.fail(path, "malformed object: %v", err)
			return nil
		}
		if _, dup := out[name]; dup {
			p.fail(join(path, name), "duplicate key %q", name)
			continue
		}
		out[name] = v
	}
	return out
}

// strValue reads a JSON string that is an array element.
func (p *parser) strValue(raw json.RawMessage, path string) string {
	var s string
	if jsonKind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		p.fail(path, "expected a string, found %s", jsonKind(raw))
		return ""
	}
	return s
}

func (p *parser) array(raw json.RawMessage, path string) []json.RawMessage {
	if jsonKind(raw) != "an array" {
		p.fail(path, "expected an array, found %s", jsonKind(raw))
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(path, "malformed array: %v", err)
		return nil
	}
	return items
}

// present reports whether an optional member is there and not null.
func present(obj map[string]json.RawMessage, name string) bool {
	raw, ok := obj[name]
	return ok && string(raw) != "null"
}

func (p *parser) linkKeysPlan(raw json.RawMessage) *LinkKeysPlan {
	obj := p.object(raw, "", lkPlanFields, priceFields...)
	if obj == nil {
		return nil
	}
	pl := &LinkKeysPlan{
		CostPerHour:       p.price(obj, "", "cost_per_hour"),
		ServerCostPerHour: p.price(obj, "", "server_cost_per_hour"),
		ProfileName:       p.str(obj, "", "profile_name"),
		EnvironmentParity: p.str(obj, "", "environment_parity"),
	}
	if r, ok := obj["revisions"]; ok {
		if o := p.object(r, "revisions", revisionFields); o != nil {
			pl.Revisions = Revisions{Code: p.str(o, "revisions", "code"), Image: p.str(o, "revisions", "image"),
				Infrastructure: p.str(o, "revisions", "infrastructure")}
		}
	}
	if r, ok := obj["target"]; ok {
		if o := p.object(r, "target", lkTargetFields, "info_file", "server_log", "addr", "fingerprint", "domain", "metrics_url"); o != nil {
			pl.Target = LinkKeysTarget{Mode: p.str(o, "target", "mode"), InfoFile: p.str(o, "target", "info_file"),
				ServerLog: p.str(o, "target", "server_log"), Addr: p.str(o, "target", "addr"), Fingerprint: p.str(o, "target", "fingerprint"),
				Domain: p.str(o, "target", "domain"), MetricsURL: p.str(o, "target", "metrics_url")}
		}
	}
	if r, ok := obj["environment_profiles"]; ok {
		if m := p.members(r, "environment_profiles"); m != nil {
			pl.EnvironmentProfiles = map[string]EnvironmentProfile{}
			for name, v := range m {
				path := "environment_profiles." + name
				o := p.object(v, path, lkProfileFields, "description", "processes")
				if o == nil {
					continue
				}
				prof := EnvironmentProfile{Description: p.str(o, path, "description"), Processes: int(p.uint(o, path, "processes", MaxServerProcesses))}
				if vr, ok := o["variables"]; ok {
					if vm := p.members(vr, path+".variables"); vm != nil {
						prof.Variables = map[string]string{}
						for k := range vm {
							prof.Variables[k] = p.str(vm, path+".variables", k)
						}
					}
				}
				pl.EnvironmentProfiles[name] = prof
			}
		}
	}
	if r, ok := obj["stop_conditions"]; ok {
		if o := p.object(r, "stop_conditions", lkStopFields); o != nil {
			pl.StopConditions = LinkKeysStopConditions{
				MaxServerRSSBytes:       p.uint(o, "stop_conditions", "max_server_rss_bytes", math.MaxUint64),
				MaxHandshakeFailureRate: p.float(o, "stop_conditions", "max_handshake_failure_rate"),
				MaxRequestErrorRate:     p.float(o, "stop_conditions", "max_request_error_rate"),
			}
		}
	}
	if r, ok := obj["phases"]; ok {
		items := p.array(r, "phases")
		pl.Phases = make([]LinkKeysPhase, 0, len(items))
		for i, item := range items {
			pl.Phases = append(pl.Phases, p.linkKeysPhase(item, fmt.Sprintf("phases[%d]", i)))
		}
	}
	return pl
}

func (p *parser) linkKeysPhase(raw json.RawMessage, path string) LinkKeysPhase {
	o := p.object(raw, path, lkPhaseFields, "expected_shedding", "notes")
	if o == nil {
		return LinkKeysPhase{}
	}
	ph := LinkKeysPhase{
		Name:               p.str(o, path, "name"),
		Harness:            p.str(o, path, "harness"),
		EnvironmentProfile: p.str(o, path, "environment_profile"),
		DurationSeconds:    p.uint(o, path, "duration_seconds", maxDurationSecs),
		Notes:              p.str(o, path, "notes"),
		Checks:             []CheckDecl{},
	}
	if r, ok := o["workload"]; ok {
		ph.Workload = p.workload(r, path+".workload")
	}
	if r, ok := o["checks"]; ok {
		for i, item := range p.array(r, path+".checks") {
			cp := fmt.Sprintf("%s.checks[%d]", path, i)
			if c := p.object(item, cp, lkCheckFields); c != nil {
				ph.Checks = append(ph.Checks, CheckDecl{Metric: p.str(c, cp, "metric"), Comparison: p.str(c, cp, "comparison"), Limit: p.float(c, cp, "limit")})
			} else {
				ph.Checks = append(ph.Checks, CheckDecl{})
			}
		}
	}
	if present(o, "expected_shedding") {
		sp := path + ".expected_shedding"
		if s := p.object(o["expected_shedding"], sp, lkShedFields); s != nil {
			es := &ExpectedShedding{Stream: p.str(s, sp, "stream"), ExactAccounting: p.boolean(s, sp, "exact_accounting"), Reasons: []string{}}
			if r, ok := s["reasons"]; ok {
				for i, item := range p.array(r, sp+".reasons") {
					es.Reasons = append(es.Reasons, p.strValue(item, fmt.Sprintf("%s.reasons[%d]", sp, i)))
				}
			}
			ph.ExpectedShedding = es
		}
	}
	return ph
}

func (p *parser) workload(raw json.RawMessage, path string) Workload {
	o := p.object(raw, path, lkWorkloadFields, lkWorkloadFields...)
	if o == nil {
		return Workload{}
	}
	w := Workload{
		AttemptTimeoutSecs:     p.uint(o, path, "attempt_timeout_secs", 3600),
		DDoSAttemptTimeoutSecs: p.uint(o, path, "ddos_attempt_timeout_secs", 3600),
		ClientWorkers:          int(p.uint(o, path, "client_workers", MaxClientWorkers)),
	}
	if present(o, "held") {
		hp := path + ".held"
		if h := p.object(o["held"], hp, lkHeldFields, "rate", "hold_secs", "start_secs"); h != nil {
			w.Held = &HeldWorkload{Count: uint32(p.uint(h, hp, "count", maxU32)), Concurrency: uint32(p.uint(h, hp, "concurrency", maxU32)),
				Rate: p.float(h, hp, "rate"), HoldSecs: p.uint(h, hp, "hold_secs", maxDurationSecs), StartSecs: p.float(h, hp, "start_secs"),
				ClientIPBase: p.str(h, hp, "client_ip_base"), ClientIPCount: uint32(p.uint(h, hp, "client_ip_count", maxU32))}
		}
	}
	if present(o, "handshakes") {
		hp := path + ".handshakes"
		if h := p.object(o["handshakes"], hp, lkHSFields, "rate", "resume", "start_secs", "duration_secs"); h != nil {
			w.Handshakes = &HandshakeWorkload{Concurrency: uint32(p.uint(h, hp, "concurrency", maxU32)), Rate: p.float(h, hp, "rate"),
				Resume: p.boolean(h, hp, "resume"), StartSecs: p.float(h, hp, "start_secs"), DurationSecs: p.uint(h, hp, "duration_secs", maxDurationSecs),
				ClientIPBase: p.str(h, hp, "client_ip_base"), ClientIPCount: uint32(p.uint(h, hp, "client_ip_count", maxU32))}
		}
	}
	if present(o, "requests") {
		rp := path + ".requests"
		if r := p.object(o["requests"], rp, lkReqFields, "pipeline", "rate", "start_secs", "duration_secs"); r != nil {
			w.Requests = &RequestWorkload{Connections: uint32(p.uint(r, rp, "connections", maxU32)), Pipeline: uint32(p.uint(r, rp, "pipeline", maxU32)),
				Rate: p.float(r, rp, "rate"), Op: p.str(r, rp, "op"), StartSecs: p.float(r, rp, "start_secs"),
				DurationSecs: p.uint(r, rp, "duration_secs", maxDurationSecs), ClientIPBase: p.str(r, rp, "client_ip_base"),
				ClientIPCount: uint32(p.uint(r, rp, "client_ip_count", maxU32))}
		}
	}
	if present(o, "ddos") {
		for i, item := range p.array(o["ddos"], path+".ddos") {
			dp := fmt.Sprintf("%s.ddos[%d]", path, i)
			d := p.object(item, dp, lkDDoSFields, "name", "start_secs")
			if d == nil {
				w.DDoS = append(w.DDoS, DDoSWorkload{})
				continue
			}
			w.DDoS = append(w.DDoS, DDoSWorkload{Name: p.str(d, dp, "name"), StartSecs: p.float(d, dp, "start_secs"),
				Sources: uint32(p.uint(d, dp, "sources", maxU32)), Concurrency: uint32(p.uint(d, dp, "concurrency", maxU32)),
				ClientIPBase: p.str(d, dp, "client_ip_base")})
		}
	}
	return w
}

// Encode returns the plan as indented JSON, in the field order and spellings ParseLinkKeysPlan
// reads.
func (pl *LinkKeysPlan) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(pl, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("capacity: encoding plan: %w", err)
	}
	return append(b, '\n'), nil
}

// LinkKeysValidateOptions are what validation needs beyond the plan.
type LinkKeysValidateOptions struct {
	// ServerConfigLine, when set, checks a profile's variables as the reference server reads them
	// and returns the server's config: line for them; its error names every bad variable.
	ServerConfigLine func(vars map[string]string) (string, error)
	// Rules authorize a remote target's host and metrics URL (hostrule: loopback passes, any other
	// host needs the exact --allow-host; production hosts never pass).
	Rules hostrule.Rules
}

// Compiled on first use, not at start-up (see capacity's safeKey).
var (
	profileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
	waveName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })
)

// ValidateLinkKeys applies every rule to a LinkKeys plan and reports every problem together (an
// errors.Join of *Problem values, see Problems). It returns the execution environment, always
// "local": the load runs from this machine (against a server it starts, a running one, or a remote
// one the host rules allow). It touches no file: a missing info file or server log is a phase
// error at run time, as are source addresses this machine cannot bind.
func ValidateLinkKeys(pl *LinkKeysPlan, opts LinkKeysValidateOptions) (Environment, error) {
	if pl == nil {
		return "", errors.Join(&Problem{Message: "capacity: no plan to validate"})
	}
	v := &validator{}
	v.nonEmpty("profile_name", pl.ProfileName)
	v.nonEmpty("environment_parity", pl.EnvironmentParity)
	v.nonEmpty("revisions.code", pl.Revisions.Code)
	v.nonEmpty("revisions.image", pl.Revisions.Image)
	v.nonEmpty("revisions.infrastructure", pl.Revisions.Infrastructure)
	t := pl.Target
	remoteFields := t.Addr != "" || t.Fingerprint != "" || t.Domain != "" || t.MetricsURL != ""
	switch t.Mode {
	case TargetStart:
		if t.InfoFile != "" || t.ServerLog != "" || remoteFields {
			v.add("target", "target mode start takes no info_file, server_log, addr, fingerprint, domain or metrics_url: the capacity command starts the servers itself")
		}
	case TargetRunning:
		if strings.TrimSpace(t.InfoFile) == "" || strings.TrimSpace(t.ServerLog) == "" {
			v.add("target", "target mode running needs info_file (the server's info file) and server_log (the file its stdout goes to, for its config: and METRICS lines)")
		}
		if remoteFields {
			v.add("target", "target mode running takes no addr, fingerprint, domain or metrics_url (its info file names the server); use mode remote for a server named by its address")
		}
	case TargetRemote:
		v.remoteTarget(t, opts.Rules)
	default:
		v.add("target.mode", "target.mode must be start, running or remote (got %q)", t.Mode)
	}
	if len(pl.EnvironmentProfiles) == 0 {
		v.add("environment_profiles", "environment_profiles must name at least one profile")
	}
	names := make([]string, 0, len(pl.EnvironmentProfiles))
	for name := range pl.EnvironmentProfiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v.profile(name, pl.EnvironmentProfiles[name], opts)
	}
	s := pl.StopConditions
	if s.MaxServerRSSBytes == 0 {
		v.add("stop_conditions.max_server_rss_bytes", "stop_conditions.max_server_rss_bytes must be greater than zero")
	}
	v.rate("stop_conditions.max_handshake_failure_rate", "stop_conditions.max_handshake_failure_rate", s.MaxHandshakeFailureRate)
	v.rate("stop_conditions.max_request_error_rate", "stop_conditions.max_request_error_rate", s.MaxRequestErrorRate)
	if len(pl.Phases) == 0 {
		v.add("phases", "phases must hold at least one phase")
	}
	seen := map[string]bool{}
	for i := range pl.Phases {
		v.linkKeysPhase(i, &pl.Phases[i], pl, seen)
	}
	if len(v.problems) > 0 {
		return "", errors.Join(v.problems...)
	}
	return EnvLocal, nil
}

// remoteTarget checks a remote target: its address, pinned key and domain, an optional metrics
// URL, and the host rules on both.
func (v *validator) remoteTarget(t LinkKeysTarget, rules hostrule.Rules) {
	if t.InfoFile != "" || t.ServerLog != "" {
		v.add("target", "target mode remote takes no info_file or server_log: it names the server by addr, fingerprint, domain and metrics_url")
	}
	host, port, err := net.SplitHostPort(t.Addr)
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil || n == 0 {
		v.add("target.addr", "target.addr %q must be HOST:PORT (an IPv4 address or a name, and a port from 1 to 65535)", t.Addr)
	} else if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && !a.Unmap().Is4() {
		v.add("target.addr", "target.addr %q is IPv6: the LinkKeys clients bind IPv4 source addresses; give the server's IPv4 address", t.Addr)
	} else if err := rules.AuthorizeAddr(t.Addr); err != nil {
		v.add("target.addr", "target.addr %s: %v", t.Addr, err)
	}
	if !isLowerHex64(t.Fingerprint) {
		v.add("target.fingerprint", "target.fingerprint must be the server key's SHA-256 as 64 lowercase hex characters (its info file's fingerprint)")
	}
	if strings.TrimSpace(t.Domain) == "" || strings.ContainsAny(t.Domain, " \t\r\n/") {
		v.add("target.domain", "target.domain %q must be the server's domain name", t.Domain)
	}
	if t.MetricsURL != "" {
		u, err := url.Parse(t.MetricsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			v.add("target.metrics_url", "target.metrics_url %q must be an http(s)://HOST:PORT/metrics URL without credentials, query or fragment", t.MetricsURL)
		} else if err := rules.AuthorizeURL(t.MetricsURL); err != nil {
			v.add("target.metrics_url", "target.metrics_url %s: %v", t.MetricsURL, err)
		}
	}
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (v *validator) profile(name string, prof EnvironmentProfile, opts LinkKeysValidateOptions) {
	path := "environment_profiles." + name
	if !profileName().MatchString(name) {
		v.add(path, "environment profile name %q must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	if prof.Processes > MaxServerProcesses {
		v.add(path+".processes", "processes %d is above %d", prof.Processes, MaxServerProcesses)
	}
	vars := make([]string, 0, len(prof.Variables))
	for k := range prof.Variables {
		vars = append(vars, k)
	}
	sort.Strings(vars)
	bad := false
	for _, k := range vars {
		val := prof.Variables[k]
		switch {
		case k == "TCP_PORT":
			v.add(path+".variables."+k, "TCP_PORT cannot be set in a profile: the harness starts the server on a free loopback port (a running server's port is in its info file)")
			bad = true
		case k == SourcePrefixesVariable:
			v.add(path+".variables."+k, "%s cannot be set in a profile: the harness sets it for each phase, naming every stream's source range (a running server is read with whatever prefixes it counts)", k)
			bad = true
		case !slices.Contains(LinkKeysVariables, k):
			v.add(path+".variables."+k, "unknown variable %q: a profile sets TCP_* and PUBLIC_READ_* variables the reference server reads (%s)", k, strings.Join(LinkKeysVariables, ", "))
			bad = true
		case strings.TrimSpace(val) == "" || strings.ContainsFunc(val, func(r rune) bool { return r < '!' || r > '~' }):
			v.add(path+".variables."+k, "%s must be a non-empty value of printable ASCII without spaces (got %q); leave the variable out for its default", k, val)
			bad = true
		}
	}
	if !bad && opts.ServerConfigLine != nil {
		if _, err := opts.ServerConfigLine(prof.Variables); err != nil {
			v.add(path+".variables", "the reference server refuses these variables: %v", err)
		}
	}
}

func (v *validator) linkKeysPhase(i int, ph *LinkKeysPhase, pl *LinkKeysPlan, seen map[string]bool) {
	path := fmt.Sprintf("phases[%d]", i)
	if strings.TrimSpace(ph.Name) == "" {
		v.add(path, "phases[].name must not be empty")
	} else {
		c := SanitizeName(ph.Name)
		if c == "" || seen[c] {
			v.add(path, "phase names must produce unique non-empty evidence file names")
		}
		seen[c] = true
	}
	if ph.Harness != HarnessLinkKeys {
		v.add(path+".harness", "phase %q names harness %q; this plan's phases run the %s harness", ph.Name, ph.Harness, HarnessLinkKeys)
	}
	if _, ok := pl.EnvironmentProfiles[ph.EnvironmentProfile]; !ok {
		v.add(path+".environment_profile", "phase %q names environment profile %q, which environment_profiles does not define", ph.Name, ph.EnvironmentProfile)
	}
	if ph.DurationSeconds == 0 {
		v.add(path+".duration_seconds", "phase %q must have a non-zero duration", ph.Name)
	}
	names, kinds := v.workload(path+".workload", ph, pl)
	kindOf := map[string]string{StreamKindServer: StreamKindServer}
	for j, n := range names {
		if _, taken := kindOf[n]; !taken { // a wave named like another stream is reported by workload
			kindOf[n] = kinds[j]
		}
	}
	for j, c := range ph.Checks {
		cp := fmt.Sprintf("%s.checks[%d]", path, j)
		stream, figure, ok := strings.Cut(c.Metric, ".")
		kind, known := kindOf[stream]
		switch {
		case !ok || !known:
			v.add(cp, "check metric %q must be <stream>.<figure> with a stream of this phase (%s) or server", c.Metric, strings.Join(names, ", "))
		case !slices.Contains(LinkKeysMetrics[kind], figure):
			v.add(cp, "check metric %q: a %s stream has no figure %q; it has %s", c.Metric, kind, figure, strings.Join(LinkKeysMetrics[kind], ", "))
		}
		if c.Comparison != "at-least" && c.Comparison != "at-most" {
			v.add(cp, "check comparison must be at-least or at-most (got %q)", c.Comparison)
		}
		if math.IsNaN(c.Limit) || math.IsInf(c.Limit, 0) {
			v.add(cp, "check limit must be a finite number")
		}
	}
	if es := ph.ExpectedShedding; es != nil {
		sp := path + ".expected_shedding"
		if _, ok := kindOf[es.Stream]; !ok {
			v.add(sp, "expected_shedding.stream %q must be a stream of this phase (%s) or server", es.Stream, strings.Join(names, ", "))
		}
		if len(es.Reasons) == 0 {
			v.add(sp, "expected_shedding.reasons must name at least one of %s", strings.Join(ShedReasons, ", "))
		}
		dup := map[string]bool{}
		for _, r := range es.Reasons {
			if !slices.Contains(ShedReasons, r) || dup[r] {
				v.add(sp, "expected_shedding.reasons: %q is not one of %s, or is given twice", r, strings.Join(ShedReasons, ", "))
			}
			dup[r] = true
		}
	}
}

// workload checks a phase's streams and returns their names and kinds. Source ranges are inside
// 127.0.0.0/8 unless the target is remote (then any of this machine's addresses, checked at run
// time).
func (v *validator) workload(path string, ph *LinkKeysPhase, pl *LinkKeysPlan) (names, kinds []string) {
	w := &ph.Workload
	names, kinds = w.Streams()
	if len(names) == 0 {
		v.add(path, "phase %q has no stream: give at least one of held, handshakes, requests or ddos", ph.Name)
	}
	type rng struct {
		name        string
		first, last uint32
	}
	var ranges []rng
	addRange := func(p, name, base string, count uint32) {
		a, err := netip.ParseAddr(base)
		if err != nil || !a.Is4() || a.String() != base {
			v.add(p+".client_ip_base", "client_ip_base %q must be an IPv4 address in dotted decimal", base)
			return
		}
		b := a.As4()
		first := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		n := max(count, 1)
		if b[0] != 127 && pl.Target.Mode != TargetRemote {
			v.add(p+".client_ip_base", "client_ip_base %s is outside 127.0.0.0/8, which the harness binds on loopback (a remote target may use this machine's own addresses)", base)
			return
		}
		if uint64(first&0xFFFFFF)+uint64(n) > 1<<24 {
			v.add(p, "%d source addresses from %s run past %d.255.255.255", n, base, b[0])
			return
		}
		ranges = append(ranges, rng{name, first, first + n - 1})
	}
	offset := func(p string, s float64) {
		if math.IsNaN(s) || s < 0 || s > 86400 {
			v.add(p+".start_secs", "start_secs must be between 0 and 86400")
		}
	}
	rate := func(p string, r float64) {
		if math.IsNaN(r) || r < 0 || r > 1e9 {
			v.add(p+".rate", "rate must be between 0 (unpaced) and 1e9 per second")
		}
	}
	if h := w.Held; h != nil {
		p := path + ".held"
		if h.Count == 0 || h.Concurrency == 0 {
			v.add(p, "held count and concurrency must be at least 1")
		}
		rate(p, h.Rate)
		offset(p, h.StartSecs)
		addRange(p, StreamKindHeld, h.ClientIPBase, h.ClientIPCount)
	}
	if h := w.Handshakes; h != nil {
		p := path + ".handshakes"
		if h.Concurrency == 0 {
			v.add(p, "handshakes concurrency must be at least 1 (with a rate, it bounds the handshakes in flight)")
		}
		rate(p, h.Rate)
		offset(p, h.StartSecs)
		addRange(p, StreamKindHandshake, h.ClientIPBase, h.ClientIPCount)
	}
	if r := w.Requests; r != nil {
		p := path + ".requests"
		if r.Connections == 0 {
			v.add(p, "requests connections must be at least 1")
		}
		if r.Op != "domain-keys" && r.Op != "hello" {
			v.add(p+".op", "requests op must be domain-keys or hello (got %q)", r.Op)
		}
		rate(p, r.Rate)
		offset(p, r.StartSecs)
		addRange(p, StreamKindRequest, r.ClientIPBase, r.ClientIPCount)
	}
	waves := map[string]bool{}
	for i, d := range w.DDoS {
		p := fmt.Sprintf("%s.ddos[%d]", path, i)
		n := w.WaveName(i)
		if !waveName().MatchString(n) || n == StreamKindHeld || n == StreamKindHandshake || n == StreamKindRequest || n == StreamKindServer || waves[n] {
			v.add(p+".name", "ddos wave name %q must be unique, 1 to 32 lower-case letters, digits, '-' or '_' starting with a letter, and not held, handshakes, requests or server", n)
		}
		waves[n] = true
		if d.Sources == 0 || d.Concurrency == 0 {
			v.add(p, "ddos sources and concurrency must be at least 1")
		}
		offset(p, d.StartSecs)
		addRange(p, n, d.ClientIPBase, d.Sources)
	}
	for i := range ranges {
		for j := i + 1; j < len(ranges); j++ {
			a, b := ranges[i], ranges[j]
			if a.first <= b.last && b.first <= a.last {
				v.add(path, "streams %s and %s share source addresses; give each stream its own range inside 127.0.0.0/8", a.name, b.name)
			}
		}
	}
	if w.ClientWorkers < 0 || w.ClientWorkers > MaxClientWorkers {
		v.add(path+".client_workers", "client_workers must be between 0 (automatic) and %d", MaxClientWorkers)
	}
	return names, kinds
}
