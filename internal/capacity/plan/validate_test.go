package plan

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
)

// The tests named after upstream's capacity.rs tests (a8d40c9; docs/protocol-keycast.md, Upstream
// tests used as a model) come first, under the same names in Go spelling.

func TestLocalCompletePlanIsValid(t *testing.T) {
	env, err := Validate(testPlan(), ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if env != EnvLocal {
		t.Fatalf("environment %q, want local", env)
	}
}

func TestNonLocalTargetRequiresExactAuthorization(t *testing.T) {
	p := testPlan()
	p.TargetURL = "https://staging.example.test"
	_, err := Validate(p, ValidateOptions{})
	if err == nil || !strings.Contains(err.Error(), "--allow-host staging.example.test") {
		t.Fatalf("error %v, want one naming --allow-host staging.example.test", err)
	}
	if err.Error() != "non-local target staging.example.test requires the exact --allow-host staging.example.test authorization" {
		t.Fatalf("message %q", err)
	}
	env, err := Validate(p, ValidateOptions{AllowHost: "staging.example.test"})
	if err != nil || env != EnvAuthorizedNonProduction {
		t.Fatalf("allowed: env %q err %v", env, err)
	}
	if _, err := Validate(p, ValidateOptions{AllowHost: "other.example.test"}); err == nil {
		t.Fatal("a different --allow-host authorized the target")
	}
	if _, err := Validate(p, ValidateOptions{AllowHost: "staging.example.test:443"}); err == nil {
		t.Fatal("--allow-host with a port authorized the target")
	}
}

func TestProductionTargetIsAlwaysRejected(t *testing.T) {
	for _, host := range []string{"login.divine.video", "keycast.divine.video", "LOGIN.Divine.Video", "login.divine.video."} {
		p := testPlan()
		p.TargetURL = "https://" + host
		_, err := Validate(p, ValidateOptions{AllowHost: host})
		if err == nil || !strings.Contains(err.Error(), "cannot target the production host") {
			t.Errorf("%s: error %v, want the production refusal", host, err)
		}
	}
}

func TestTargetURLCannotEmbedSensitiveComponents(t *testing.T) {
	for _, u := range []string{
		"http://user:password@localhost:3000?token=value",
		"http://user@localhost:3000",
		"http://@localhost:3000",
		"http://localhost:3000?",
		"http://localhost:3000/?a=b",
		"http://localhost:3000#frag",
		"http://localhost:3000#",
	} {
		p := testPlan()
		p.TargetURL = u
		_, err := Validate(p, ValidateOptions{})
		if err == nil || err.Error() != "target_url must not contain credentials, query parameters, or fragments" {
			t.Errorf("%s: error %v", u, err)
		}
	}
}

func TestEveryRequiredPhaseMustBePredeclaredInOrder(t *testing.T) {
	const msg = "capacity phases must appear exactly once in this order: ramp, spike, soak, recovery, rollout, scale-down"
	missing := testPlan()
	missing.Phases = slices.DeleteFunc(missing.Phases, func(p Phase) bool { return p.Kind == KindRecovery })
	reordered := testPlan()
	reordered.Phases[1], reordered.Phases[3] = reordered.Phases[3], reordered.Phases[1]
	reordered.Phases[1].SLOApplies, reordered.Phases[3].SLOApplies = true, false
	extra := testPlan()
	extra.Phases = append(extra.Phases, extra.Phases[0])
	extra.Phases[6].Name = "second ramp"
	empty := testPlan()
	empty.Phases = nil
	for name, p := range map[string]*Plan{"missing": missing, "reordered": reordered, "extra": extra, "empty": empty} {
		_, err := Validate(p, ValidateOptions{})
		if err == nil || !hasMessage(err, msg) {
			t.Errorf("%s: error %v, want %q", name, err, msg)
		}
	}
}

func TestAbsoluteStopLimitsAreIndependentFromPhaseLimits(t *testing.T) {
	p := testPlan()
	p.Phases[0].MaxErrorRate = 0.1 // above stop_conditions.max_error_rate 0.05
	p.Phases[0].MaxLatencyP95Ms = 5000
	if _, err := Validate(p, ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRegistrationIsExcludedFromSeededCapacityProfiles(t *testing.T) {
	p := testPlan()
	p.Phases[0].Method = keycast.MethodRegister
	_, err := Validate(p, ValidateOptions{})
	if err == nil || !strings.Contains(err.Error(), "non-deterministic registration") {
		t.Fatalf("error %v", err)
	}
}

func TestSpikeMayLeaveSheddingNotTested(t *testing.T) {
	p := testPlan()
	p.Phases[1].IntentionalShedding = nil
	if _, err := Validate(p, ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestSheddingContractIsFixedAndExplicit(t *testing.T) {
	p := testPlan()
	p.Phases[1].IntentionalShedding.ErrorCode = "database_unavailable"
	_, err := Validate(p, ValidateOptions{})
	if err == nil || !strings.Contains(err.Error(), "admission_rejected") {
		t.Fatalf("error %v", err)
	}
	p = testPlan()
	p.Phases[1].IntentionalShedding.Status = 429
	if _, err := Validate(p, ValidateOptions{}); err == nil || !hasMessage(err, "intentional shedding must use HTTP 503 with error code admission_rejected") {
		t.Fatalf("status 429: error %v", err)
	}
}

func TestRampUpMustBeShorterThanDuration(t *testing.T) {
	p := testPlan()
	p.Phases[0].RampUpSeconds = p.Phases[0].DurationSeconds
	_, err := Validate(p, ValidateOptions{})
	if err == nil || !strings.Contains(err.Error(), "ramp-up must be shorter") {
		t.Fatalf("error %v", err)
	}
	p.Phases[0].DurationSeconds, p.Phases[0].RampUpSeconds = 10, 9
	if _, err := Validate(p, ValidateOptions{}); err != nil {
		t.Fatalf("ramp-up 9 of 10: %v", err)
	}
}

func TestIPv6LoopbackIsLocal(t *testing.T) {
	for _, u := range []string{"http://[::1]:3000", "http://[0:0:0:0:0:0:0:1]:3000", "http://localhost", "http://127.0.0.1:1", "http://api.localhost:8080", "http://127.1:3000"} {
		p := testPlan()
		p.TargetURL = u
		env, err := Validate(p, ValidateOptions{})
		if err != nil || env != EnvLocal {
			t.Errorf("%s: env %q err %v, want local", u, env, err)
		}
	}
}

func TestEvidenceFileNamesAreSanitized(t *testing.T) {
	for in, want := range map[string]string{
		"ramp / cache warm": "ramp---cache-warm",
		"--spike--":         "spike",
		"soak_1":            "soak_1",
		"élan":              "lan",
		"../../etc/passwd":  "etc-passwd",
		"///":               "",
		"a\x00b":            "a-b",
	} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := PhaseFileName(0, "ramp / cache warm"); got != "phase-01-ramp---cache-warm.json" {
		t.Fatalf("PhaseFileName = %q", got)
	}
}

// hasMessage reports whether err holds a problem with exactly msg.
func hasMessage(err error, msg string) bool {
	for _, p := range Problems(err) {
		if p.Message == msg {
			return true
		}
	}
	return false
}

// TestValidationMessages checks every upstream validation rule's exact message, one broken field at
// a time.
func TestValidationMessages(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Plan)
		want   string
	}{
		{"blank profile_name", func(p *Plan) { p.ProfileName = "  " }, "profile_name must not be empty"},
		{"blank environment_parity", func(p *Plan) { p.EnvironmentParity = "" }, "environment_parity must not be empty"},
		{"blank revisions.code", func(p *Plan) { p.Revisions.Code = "\t" }, "revisions.code must not be empty"},
		{"blank revisions.image", func(p *Plan) { p.Revisions.Image = "" }, "revisions.image must not be empty"},
		{"blank revisions.infrastructure", func(p *Plan) { p.Revisions.Infrastructure = "" }, "revisions.infrastructure must not be empty"},
		{"availability above 100", func(p *Plan) { p.Objectives.AvailabilityPercent = 100.5 }, "objectives.availability_percent must be between 0 and 100"},
		{"availability negative", func(p *Plan) { p.Objectives.AvailabilityPercent = -1 }, "objectives.availability_percent must be between 0 and 100"},
		{"availability NaN", func(p *Plan) { p.Objectives.AvailabilityPercent = math.NaN() }, "objectives.availability_percent must be between 0 and 100"},
		{"objective p95 zero", func(p *Plan) { p.Objectives.LatencyP95Ms = 0 }, "objectives.latency_p95_ms must be greater than zero"},
		{"objective p95 inf", func(p *Plan) { p.Objectives.LatencyP95Ms = math.Inf(1) }, "objectives.latency_p95_ms must be greater than zero"},
		{"stop error rate above 1", func(p *Plan) { p.StopConditions.MaxErrorRate = 1.01 }, "stop_conditions.max_error_rate must be between 0 and 1"},
		{"stop p95 negative", func(p *Plan) { p.StopConditions.MaxLatencyP95Ms = -5 }, "stop_conditions.max_latency_p95_ms must be greater than zero"},
		{"relative url", func(p *Plan) { p.TargetURL = "/api" }, "target_url must be an absolute URL"},
		{"garbage url", func(p *Plan) { p.TargetURL = "http://local host:3000" }, "target_url must be an absolute URL"},
		{"port out of range", func(p *Plan) { p.TargetURL = "http://localhost:70000" }, "target_url must be an absolute URL (port 70000 is out of range 1-65535)"},
		{"no host", func(p *Plan) { p.TargetURL = "localhost:3000" }, "target_url must include a host"},
		{"empty host", func(p *Plan) { p.TargetURL = "http:///api" }, "target_url must include a host"},
		{"ftp scheme", func(p *Plan) { p.TargetURL = "ftp://localhost" }, `target_url scheme must be http or https (got "ftp")`},
		{"production host", func(p *Plan) { p.TargetURL = "https://keycast.divine.video" }, "capacity profiles cannot target the production host keycast.divine.video"},
		{"non-local", func(p *Plan) { p.TargetURL = "http://10.0.0.5:3000" }, "non-local target 10.0.0.5 requires the exact --allow-host 10.0.0.5 authorization"},
		{"blank phase name", func(p *Plan) { p.Phases[2].Name = " " }, "phases[].name must not be empty"},
		{"name sanitizes to nothing", func(p *Plan) { p.Phases[2].Name = "///" }, "phase names must produce unique non-empty evidence file names"},
		{"names collide", func(p *Plan) { p.Phases[2].Name = "ramp!" }, "phase names must produce unique non-empty evidence file names"},
		{"zero concurrency", func(p *Plan) { p.Phases[0].Concurrency = 0 }, `phase "ramp" must have non-zero concurrency and duration`},
		{"zero duration", func(p *Plan) { p.Phases[0].DurationSeconds = 0 }, `phase "ramp" must have non-zero concurrency and duration`},
		{"ramp-up equals duration", func(p *Plan) { p.Phases[0].DurationSeconds, p.Phases[0].RampUpSeconds = 5, 5 }, `phase "ramp" ramp-up must be shorter than its duration`},
		{"phase error rate above 1", func(p *Plan) { p.Phases[0].MaxErrorRate = 2 }, "phases[].max_error_rate must be between 0 and 1"},
		{"shedding outside spike", func(p *Plan) {
			p.Phases[2].IntentionalShedding = &Shedding{Status: 503, ErrorCode: "admission_rejected", MinRate: 0.1}
		}, "only the spike phase may declare intentional shedding"},
		{"shedding wrong status", func(p *Plan) { p.Phases[1].IntentionalShedding.Status = 500 }, "intentional shedding must use HTTP 503 with error code admission_rejected"},
		{"shedding min_rate above 1", func(p *Plan) { p.Phases[1].IntentionalShedding.MinRate = 1.5 }, "phases[].intentional_shedding.min_rate must be between 0 and 1"},
		{"shedding min_rate zero", func(p *Plan) { p.Phases[1].IntentionalShedding.MinRate = 0 }, "intentional shedding min_rate must be greater than zero"},
		{"phase p95 zero", func(p *Plan) { p.Phases[3].MaxLatencyP95Ms = 0 }, "phases[].max_latency_p95_ms must be greater than zero"},
		{"register method", func(p *Plan) { p.Phases[3].Method = keycast.MethodRegister }, "capacity profiles do not support non-deterministic registration phases"},
		{"slo opt-out outside spike", func(p *Plan) { p.Phases[4].SLOApplies = false }, "only the spike phase may opt out of profile SLO checks"},
		{"blank users_file", func(p *Plan) { p.UsersFile = "" }, "users_file must not be empty"},
		{"huge concurrency", func(p *Plan) { p.Phases[0].Concurrency = MaxPhaseConcurrency + 1 }, `phase "ramp" concurrency 100001 is above the 100000 loadproof runs from one process`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := testPlan()
			c.mutate(p)
			env, err := Validate(p, ValidateOptions{})
			if err == nil {
				t.Fatalf("valid (env %q), want %q", env, c.want)
			}
			if env != "" {
				t.Errorf("environment %q returned with an error", env)
			}
			if !hasMessage(err, c.want) {
				t.Fatalf("problems %q, want %q", err, c.want)
			}
		})
	}
}

func TestValidateReportsEveryProblemTogether(t *testing.T) {
	p := testPlan()
	p.ProfileName = ""
	p.Objectives.LatencyP95Ms = 0
	p.TargetURL = "https://prod.example.com"
	p.Phases[0].Concurrency = 0
	p.Phases[1].IntentionalShedding.ErrorCode = "nope"
	p.Phases[5].Method = keycast.MethodRegister
	_, err := Validate(p, ValidateOptions{})
	got := Problems(err)
	want := []string{
		"profile_name must not be empty",
		"objectives.latency_p95_ms must be greater than zero",
		"non-local target prod.example.com requires the exact --allow-host prod.example.com authorization",
		`phase "ramp" must have non-zero concurrency and duration`,
		"intentional shedding must use HTTP 503 with error code admission_rejected",
		"capacity profiles do not support non-deterministic registration phases",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems %q, want %d", len(got), err, len(want))
	}
	for i := range want {
		if got[i].Message != want[i] {
			t.Errorf("problem %d = %q, want %q", i, got[i].Message, want[i])
		}
	}
	if got[3].Path != "phases[0]" || got[5].Path != "phases[5]" || got[0].Path != "profile_name" {
		t.Errorf("paths %q %q %q", got[0].Path, got[3].Path, got[5].Path)
	}
	if strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Errorf("joined error is not one problem per line: %q", err)
	}
}

func TestHostRules(t *testing.T) {
	cases := []struct {
		url, allow string
		refuse     []string
		env        Environment
		problem    string
	}{
		{url: "http://LOCALHOST:3000", env: EnvLocal},
		{url: "http://foo.localhost", env: EnvLocal},
		{url: "http://localhost.", problem: "non-local target localhost. requires the exact --allow-host localhost. authorization"},
		{url: "http://127.0.0.2:3000", problem: "non-local target 127.0.0.2 requires the exact --allow-host 127.0.0.2 authorization"},
		{url: "http://127.0.0.2:3000", allow: "127.0.0.2", env: EnvAuthorizedNonProduction},
		{url: "http://0x7f.0.0.1:3000", env: EnvLocal},
		{url: "http://2130706433/", env: EnvLocal},
		{url: "http://127.0.0.256/", problem: "target_url must be an absolute URL (host \"127.0.0.256\" is not a valid IPv4 address)"},
		{url: "http://Staging.Example.Test", allow: "staging.example.test", env: EnvAuthorizedNonProduction},
		{url: "http://staging.example.test", allow: "STAGING.example.test", env: EnvAuthorizedNonProduction},
		{url: "http://[fd00::1]:3000", allow: "[fd00::1]", env: EnvAuthorizedNonProduction},
		{url: "http://[fd00::1]:3000", allow: "fd00::1", env: EnvAuthorizedNonProduction},
		{url: "http://[fd00:0::1]:3000", problem: "non-local target [fd00::1] requires the exact --allow-host [fd00::1] authorization"},
		{url: "http://staging.internal", allow: "staging.internal", refuse: []string{"Staging.Internal"}, problem: "capacity profiles cannot target the production host staging.internal"},
		{url: "http://10.1.2.3", allow: "10.1.2.3", refuse: []string{"10.1.2.3"}, problem: "capacity profiles cannot target the production host 10.1.2.3"},
		{url: "http://localhost:3000", refuse: []string{"localhost"}, problem: "capacity profiles cannot target the production host localhost"},
		{url: "http://bücher.example", allow: "bücher.example", problem: "target_url must be an absolute URL (host \"bücher.example\" is not ASCII; write its punycode (xn--) form)"},
	}
	for _, c := range cases {
		p := testPlan()
		p.TargetURL = c.url
		env, err := Validate(p, ValidateOptions{AllowHost: c.allow, RefuseHosts: c.refuse})
		if c.problem != "" {
			if !hasMessage(err, c.problem) {
				t.Errorf("%s (allow %q): problems %q, want %q", c.url, c.allow, err, c.problem)
			}
			continue
		}
		if err != nil || env != c.env {
			t.Errorf("%s (allow %q): env %q err %v, want %q", c.url, c.allow, env, err, c.env)
		}
	}
}
