package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// capacityFixture writes a users file and the documented example plan, rewritten to point at it.
func capacityFixture(t *testing.T) (dir, plan string) {
	t.Helper()
	dir = t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{Users: []keycast.TestUser{{Pubkey: strings.Repeat("ab", 32), Email: "a@test.local", UcanToken: "tok"}}}); err != nil {
		t.Fatal(err)
	}
	p, err := capacity.ReadPlan("../../docs/capacity-plan.example.json")
	if err != nil {
		t.Fatal(err)
	}
	p.UsersFile = users
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	plan = filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, plan
}

// cannedRunner returns healthy results (5% shedding in the spike) and fails or misses where told.
func cannedRunner(errAt, missAt int) capacity.Runner {
	return func(_ context.Context, run capacity.PhaseRun) (*keycastresult.Results, error) {
		if run.Index == errAt {
			return nil, &capacity.SafeError{Msg: "the target cannot be reached"}
		}
		h := hist.New()
		lat := time.Millisecond
		if run.Index == missAt {
			lat = 300 * time.Millisecond // above the phase's 250 ms p95, below the 1500 ms stop
		}
		for range 100 {
			h.Record(lat)
		}
		c := keycastresult.Counts{Total: 100, Success: 100}
		if run.Phase.IntentionalShedding != nil {
			c = keycastresult.Counts{Total: 100, Success: 95, Failed: 5, Intentional: 5}
		}
		return &keycastresult.Results{Summary: keycastresult.Summarize(c, h, time.Second), Timeline: []keycastresult.TimelinePoint{}, Envelope: keycastresult.NewEnvelope("http://x", h, nil, nil)}, nil
	}
}

func runCapacity(t *testing.T, runner capacity.Runner, args ...string) (int, string, string) {
	t.Helper()
	capacityRunner = runner
	t.Cleanup(func() { capacityRunner = nil })
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)}
	code := Run(context.Background(), Keycast, append([]string{"capacity"}, args...), env)
	return code, out.String(), errb.String()
}

func TestCapacityCommandExitCodes(t *testing.T) {
	cases := []struct {
		name   string
		runner capacity.Runner
		args   func(dir, plan string) []string
		code   int
		stdout []string
		stderr []string
	}{
		{"passed", cannedRunner(-1, -1), func(d, p string) []string { return []string{"-p", p, "-o", filepath.Join(d, "ev")} },
			ExitOK, []string{"passed: true  certification_ready: true"}, nil},
		{"check failed", cannedRunner(-1, 0), func(d, p string) []string { return []string{"-p", p, "-o", filepath.Join(d, "ev")} },
			ExitFailure, []string{"Certification is not ready:", `phase "warm-up-ramp" failed check latency_p95_ms`}, []string{"one or more capacity phases exceeded their predeclared limits"}},
		{"phase error", cannedRunner(2, -1), func(d, p string) []string { return []string{"--plan", p, "--output", filepath.Join(d, "ev")} },
			ExitCouldNotRun, []string{"  - phase \"steady-soak\" could not run: the target cannot be reached\n"}, []string{"could not run to completion"}},
		{"no plan flag", nil, func(d, p string) []string { return nil }, ExitUsage, nil, []string{"--plan is required"}},
		{"absent plan", nil, func(d, p string) []string { return []string{"-p", filepath.Join(d, "nope.json")} }, ExitUsage, nil, []string{"failed to read capacity plan"}},
		{"bad allow-host", nil, func(d, p string) []string { return []string{"-p", p, "--allow-host", "example.com:443"} }, ExitUsage, nil, []string{"must not carry a port"}},
		{"not allowed", nil, func(d, p string) []string {
			return []string{"-p", p, "--refuse-host", "127.0.0.1", "-o", filepath.Join(d, "ev")}
		}, ExitUsage, nil, []string{"target_url: capacity profiles cannot target the production host 127.0.0.1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, plan := capacityFixture(t)
			code, stdout, stderr := runCapacity(t, c.runner, c.args(dir, plan)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout, stderr)
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if c.code == ExitOK || c.code == ExitFailure || c.code == ExitCouldNotRun {
				if !strings.Contains(stdout, "Capacity evidence saved to "+filepath.Join(dir, "ev")+"/evidence.json") {
					t.Errorf("no saved line:\n%s", stdout)
				}
				if err := capacity.VerifyBundle(filepath.Join(dir, "ev")); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestCapacityCommandListsEveryProblem(t *testing.T) {
	dir, planPath := capacityFixture(t)
	p, err := capacity.ReadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	p.TargetURL = "https://staging.example.test"
	p.Phases[0].RampUpSeconds = p.Phases[0].DurationSeconds
	p.Phases[3].SLOApplies = false
	b, _ := p.Encode()
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ev")
	code, _, stderr := runCapacity(t, cannedRunner(-1, -1), "-p", planPath, "-o", out)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{
		"is invalid (3 problems):",
		"  - target_url: non-local target staging.example.test requires the exact --allow-host staging.example.test authorization",
		`  - phases[0]: phase "warm-up-ramp" ramp-up must be shorter than its duration`,
		"  - phases[3]: only the spike phase may opt out of profile SLO checks",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("output directory created for an invalid plan")
	}
}
