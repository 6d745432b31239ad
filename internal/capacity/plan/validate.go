package plan

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/keycast"
)

// Environment is where a validated plan runs: derived from its target host, recorded in the evidence.
type Environment string

// The two execution environments.
const (
	EnvLocal                   Environment = "local"
	EnvAuthorizedNonProduction Environment = "authorized-non-production"
)

// RefusedProductionHosts are upstream's production Keycast hosts (hostrule.RefusedProductionHosts).
// Validate always refuses them, even when --allow-host names them; ValidateOptions.RefuseHosts adds more.
var RefusedProductionHosts = hostrule.RefusedProductionHosts

// MaxPhaseConcurrency bounds a phase's concurrency (a loadproof rule: upstream has no bound, and a typo
// such as 5000000 would otherwise start that many workers).
const MaxPhaseConcurrency = 100_000

// ValidateOptions are the operator's host authorizations.
type ValidateOptions struct {
	// AllowHost authorizes one non-local target host. It must equal the plan's target host exactly
	// (after the URL parser's normalisation: DNS names lowercased, IP literals in canonical form,
	// IPv6 in brackets). Empty authorizes none.
	AllowHost string
	// RefuseHosts are refused in addition to RefusedProductionHosts.
	RefuseHosts []string
}

// Problem is one validation finding. Its Error is exactly upstream's message (docs/protocol-keycast.md,
// Validation) or, for loadproof's own rules, a message in the same style; Path says where it applies.
type Problem struct {
	// Path locates the problem: a plan field ("target_url", "objectives.latency_p95_ms") or a phase
	// ("phases[2]"). Empty for plan-wide rules.
	Path string
	// Message is the text reported.
	Message string
}

func (p *Problem) Error() string { return p.Message }

// Problems returns the individual problems in an error returned by Validate, in the order found.
func Problems(err error) []*Problem {
	var out []*Problem
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if p, ok := e.(*Problem); ok {
			out = append(out, p)
			return
		}
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range m.Unwrap() {
				walk(c)
			}
			return
		}
		walk(errors.Unwrap(e))
	}
	walk(err)
	return out
}

type validator struct {
	problems []error
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, &Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) nonEmpty(field, value string) {
	if strings.TrimSpace(value) == "" {
		v.add(field, "%s must not be empty", field)
	}
}

func (v *validator) rate(path, field string, value float64) {
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 || value > 1 {
		v.add(path, "%s must be between 0 and 1", field)
	}
}

func (v *validator) percentage(path, field string, value float64) {
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 || value > 100 {
		v.add(path, "%s must be between 0 and 100", field)
	}
}

func (v *validator) positive(path, field string, value float64) {
	if math.IsNaN(value) || math.IsInf(value, 0) || value <= 0 {
		v.add(path, "%s must be greater than zero", field)
	}
}

// Validate applies every upstream validation rule (newest; docs/protocol-keycast.md, Validation) to
// plan and returns the execution environment. Unlike upstream, which stops at the first problem, it
// reports every problem together: the error is an errors.Join of *Problem values (see Problems),
// each carrying upstream's exact message. loadproof adds a few rules of its own (target scheme http
// or https, a valid port, an ASCII host, a non-empty users_file, concurrency at most
// MaxPhaseConcurrency), documented in docs/capacity.md. Validate touches no file: a missing users
// file is a phase error at run time, as upstream.
func Validate(plan *Plan, opts ValidateOptions) (Environment, error) {
	if plan == nil {
		return "", errors.Join(&Problem{Message: "capacity: no plan to validate"})
	}
	v := &validator{}
	v.nonEmpty("profile_name", plan.ProfileName)
	v.nonEmpty("environment_parity", plan.EnvironmentParity)
	v.nonEmpty("revisions.code", plan.Revisions.Code)
	v.nonEmpty("revisions.image", plan.Revisions.Image)
	v.nonEmpty("revisions.infrastructure", plan.Revisions.Infrastructure)
	v.percentage("objectives.availability_percent", "objectives.availability_percent", plan.Objectives.AvailabilityPercent)
	v.positive("objectives.latency_p95_ms", "objectives.latency_p95_ms", plan.Objectives.LatencyP95Ms)
	v.rate("stop_conditions.max_error_rate", "stop_conditions.max_error_rate", plan.StopConditions.MaxErrorRate)
	v.positive("stop_conditions.max_latency_p95_ms", "stop_conditions.max_latency_p95_ms", plan.StopConditions.MaxLatencyP95Ms)
	if !slices.Contains(Platforms, plan.ProfilePlatform) {
		v.add("profile_platform", "profile_platform must be one of cloud-run, gke (got %q)", string(plan.ProfilePlatform))
	}
	if strings.TrimSpace(plan.UsersFile) == "" {
		v.add("users_file", "users_file must not be empty")
	}

	env := v.target(plan.TargetURL, opts)

	kinds := make([]Kind, len(plan.Phases))
	for i, ph := range plan.Phases {
		kinds[i] = ph.Kind
	}
	if !slices.Equal(kinds, RequiredKinds) {
		v.add("phases", "capacity phases must appear exactly once in this order: ramp, spike, soak, recovery, rollout, scale-down")
	}
	seen := map[string]bool{}
	for i := range plan.Phases {
		v.phase(i, &plan.Phases[i], seen)
	}
	if len(v.problems) > 0 {
		return "", errors.Join(v.problems...)
	}
	return env, nil
}

func (v *validator) phase(i int, ph *Phase, seen map[string]bool) {
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
	if ph.Concurrency <= 0 || ph.DurationSeconds == 0 {
		v.add(path, "phase %q must have non-zero concurrency and duration", ph.Name)
	}
	if ph.Concurrency > MaxPhaseConcurrency {
		v.add(path, "phase %q concurrency %d is above the %d loadproof runs from one process", ph.Name, ph.Concurrency, MaxPhaseConcurrency)
	}
	if ph.RampUpSeconds != 0 && ph.RampUpSeconds >= ph.DurationSeconds {
		v.add(path, "phase %q ramp-up must be shorter than its duration", ph.Name)
	}
	v.rate(path, "phases[].max_error_rate", ph.MaxErrorRate)
	if s := ph.IntentionalShedding; s != nil {
		if ph.Kind != KindSpike {
			v.add(path, "only the spike phase may declare intentional shedding")
		}
		if s.Status != 503 || s.ErrorCode != keycast.CodeAdmissionRejected {
			v.add(path, "intentional shedding must use HTTP 503 with error code admission_rejected")
		}
		v.rate(path, "phases[].intentional_shedding.min_rate", s.MinRate)
		if s.MinRate <= 0 {
			v.add(path, "intentional shedding min_rate must be greater than zero")
		}
	}
	v.positive(path, "phases[].max_latency_p95_ms", ph.MaxLatencyP95Ms)
	if ph.Method == keycast.MethodRegister {
		v.add(path, "capacity profiles do not support non-deterministic registration phases")
	}
	if ph.Kind != KindSpike && !ph.SLOApplies {
		v.add(path, "only the spike phase may opt out of profile SLO checks")
	}
	if !slices.Contains(RequiredKinds, ph.Kind) {
		v.add(path, "phase %q has unknown kind %q", ph.Name, string(ph.Kind))
	}
	if ph.Method != keycast.MethodRegister && !slices.Contains(keycast.Methods, ph.Method) {
		v.add(path, "phase %q has unknown method %q", ph.Name, string(ph.Method))
	}
	if !slices.Contains(keycast.Scenarios, ph.Scenario) {
		v.add(path, "phase %q has unknown scenario %q", ph.Name, string(ph.Scenario))
	}
}

// target checks target_url and the host rules and returns the environment.
func (v *validator) target(raw string, opts ValidateOptions) Environment {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		v.add("target_url", "target_url must be an absolute URL")
		return ""
	}
	if u.Host == "" {
		v.add("target_url", "target_url must include a host")
		return ""
	}
	if u.User != nil || u.ForceQuery || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#") {
		v.add("target_url", "target_url must not contain credentials, query parameters, or fragments")
		return ""
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		v.add("target_url", "target_url scheme must be http or https (got %q)", u.Scheme)
		return ""
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			v.add("target_url", "target_url must be an absolute URL (port %s is out of range 1-65535)", p)
			return ""
		}
	}
	host, err := hostrule.CanonicalHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if err != nil {
		v.add("target_url", "target_url must be an absolute URL (%v)", err)
		return ""
	}
	if hostrule.IsRefusedHost(host, opts.RefuseHosts) {
		v.add("target_url", "capacity profiles cannot target the production host %s", host)
		return ""
	}
	if hostrule.IsLocalHost(host) {
		return EnvLocal
	}
	allowed, err := hostrule.CanonicalHostFlag(opts.AllowHost)
	if opts.AllowHost == "" || err != nil || allowed != host {
		v.add("target_url", "non-local target %s requires the exact --allow-host %s authorization", host, host)
		return ""
	}
	return EnvAuthorizedNonProduction
}

// SanitizeName turns a phase name into a file-name component as upstream does: every character other
// than an ASCII letter, digit, '-' or '_' becomes '-', leading and trailing '-' are trimmed, and runs
// of dashes are kept ("ramp / cache warm" → "ramp---cache-warm").
func SanitizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 0x80 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// PhaseFileName is the per-phase results file of phase index i (0-based): phase-{i+1:02}-{name}.json.
func PhaseFileName(i int, name string) string {
	return fmt.Sprintf("phase-%02d-%s.json", i+1, SanitizeName(name))
}
