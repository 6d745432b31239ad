package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// e2ePlan is the rehearsal profile with one-second phases and a spike of 24 concurrent signers,
// with the seed set apart from the default so the test sees it carried into every phase.
func e2ePlan(url, users string, shedding bool) *capacity.Plan {
	p := capacity.RehearsalPlan(capacity.RehearsalOptions{Name: "e2e-reference-server", URL: url, UsersFile: users,
		PhaseSeconds: 1, SpikeConcurrency: 24, DeclareShedding: shedding})
	p.Seed = 7
	return p
}

// TestCapacityEndToEnd runs the whole profile twice against the reference server configured to shed
// (one CPU slot, no wait queue): once with the spike declaring shedding (certification ready) and
// once without (not ready, and the evidence says why). Users are made through the real HTTP API.
func TestCapacityEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run of about 15 s")
	}
	srv := kctest.Start(t, keycastserver.Config{CPUSlots: 1, CPUQueue: -1})
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	ctx := context.Background()
	setup, err := keycastload.Setup(ctx, keycastload.SetupConfig{URL: srv.URL, Users: 6, Concurrency: 1, Mode: keycastload.ModeHTTP})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := keycast.WriteUsersFile(usersPath, setup.File); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var progress io.Writer = io.Discard
	if testing.Verbose() {
		progress = tLog{t}
	}

	t.Run("shedding declared", func(t *testing.T) {
		out := filepath.Join(dir, "declared")
		ev, err := capacity.Execute(ctx, e2ePlan(srv.URL, usersPath, true), capacity.Options{OutputDir: out, Progress: progress, Logger: logger})
		if err != nil {
			t.Fatalf("%v\nblockers: %q", err, blockers(ev))
		}
		if !ev.Passed || !ev.CertificationReady || len(ev.CertificationBlockers) != 0 || len(ev.Phases) != 6 {
			t.Fatalf("passed %v ready %v blockers %q", ev.Passed, ev.CertificationReady, ev.CertificationBlockers)
		}
		spike := ev.Phases[1]
		shed := find(t, spike.Checks, capacity.MetricIntentionalRejectionRate)
		if shed.Outcome != capacity.Passed || shed.Observed < 0.01 || spike.Results.Summary.IntentionalRejections == 0 {
			t.Fatalf("spike shedding check %+v", shed)
		}
		for i, ph := range ev.Phases {
			r := ph.Results
			if r == nil || r.Summary.TotalRequests == 0 || r.Metadata.Seed != 7 {
				t.Fatalf("phase %d results %+v", i, r)
			}
			if i != 1 && r.Summary.IntentionalRejections != 0 {
				t.Errorf("phase %d (concurrency 1) was shed %d times", i, r.Summary.IntentionalRejections)
			}
		}
		verifyWhole(t, out)
		scanBundle(t, out, setup.File.Users)
	})

	t.Run("signal", func(t *testing.T) {
		out := filepath.Join(dir, "signal")
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := &cancelOnSecondPhase{cancel: cancel}
		ev, err := capacity.Execute(sctx, e2ePlan(srv.URL, usersPath, true), capacity.Options{OutputDir: out, Progress: w, Logger: logger})
		if !errors.Is(err, capacity.ErrIncomplete) || ev == nil {
			t.Fatalf("error %v", err)
		}
		if ev.StopReason != capacity.StopReasonSignal || len(ev.Phases) != 2 || !ev.Phases[1].Interrupted || ev.Passed || ev.CertificationReady {
			t.Fatalf("reason %q phases %d passed %v", ev.StopReason, len(ev.Phases), ev.Passed)
		}
		if r := ev.Phases[1].Results; r == nil || r.Stop == nil || r.Stop.Reason != "signal" {
			t.Fatalf("interrupted phase results %+v", r)
		}
		verifyWhole(t, out)
	})

	t.Run("shedding not declared", func(t *testing.T) {
		out := filepath.Join(dir, "undeclared")
		ev, err := capacity.Execute(ctx, e2ePlan(srv.URL, usersPath, false), capacity.Options{OutputDir: out, Progress: progress, Logger: logger})
		if err != nil && !errors.Is(err, capacity.ErrLimitsExceeded) {
			t.Fatal(err)
		}
		if ev == nil || ev.CertificationReady {
			t.Fatalf("certification ready without declared shedding: %+v", ev)
		}
		shed := find(t, ev.Phases[1].Checks, capacity.MetricIntentionalRejectionRate)
		if shed.Outcome != capacity.NotTested || shed.Limit != 0 || shed.Observed <= 0 {
			t.Fatalf("undeclared spike check %+v (the server shed, so the observed rate is above 0)", shed)
		}
		found := false
		for _, b := range ev.CertificationBlockers {
			if strings.Contains(b, "no phase declares intentional_shedding") {
				found = true
			}
		}
		if !found {
			t.Fatalf("blockers %q do not say shedding was not declared", ev.CertificationBlockers)
		}
		verifyWhole(t, out)
		scanBundle(t, out, setup.File.Users)
	})
}

// cancelOnSecondPhase cancels when the engine reports its first progress line of phase 2, so the
// signal arrives while phase 2 is running.
type cancelOnSecondPhase struct {
	mu      sync.Mutex
	inPhase bool
	cancel  context.CancelFunc
}

func (w *cancelOnSecondPhase) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := string(p)
	if strings.Contains(s, "capacity: phase 2/6") {
		w.inPhase = true
	} else if w.inPhase && strings.HasPrefix(s, "Progress:") {
		w.cancel()
	}
	return len(p), nil
}

func find(t *testing.T, checks []capacity.Check, metric string) capacity.Check {
	t.Helper()
	for _, c := range checks {
		if c.Metric == metric {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", metric, checks)
	return capacity.Check{}
}

func blockers(ev *capacity.Evidence) []string {
	if ev == nil {
		return nil
	}
	return ev.CertificationBlockers
}

type tLog struct{ t *testing.T }

func (w tLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// passwordish matches strings that look like credentials in JSON text.
var passwordish = regexp.MustCompile(`(?i)(password|passwd|"?nsec1[0-9a-z]+|ucan_token|bearer )`)

// scanBundle fails when any file of the bundle holds a user's token (whole, or any of its three
// parts), an email, or a password-ish string.
func scanBundle(t *testing.T, dir string, users []keycast.TestUser) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 {
		t.Fatalf("bundle holds %d files", len(entries))
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			needles := append([]string{u.UcanToken, u.Email}, strings.Split(u.UcanToken, ".")...)
			for _, n := range needles {
				if len(n) >= 8 && bytes.Contains(b, []byte(n)) {
					t.Errorf("%s holds a secret of user %s: %.24q…", e.Name(), u.Pubkey[:8], n)
				}
			}
		}
		if m := passwordish.Find(b); m != nil {
			t.Errorf("%s holds a password-ish string %q", e.Name(), m)
		}
	}
}

// verifyWhole checks a bundle as `loadproof verify` does: the manifest, and every check and the
// verdict recomputed from the real phase results.
func verifyWhole(t *testing.T, out string) {
	t.Helper()
	if f := evidence.Verify(out, evidence.VerifyOptions{Recompute: capacity.Recompute}); !f.OK() {
		t.Fatalf("bundle does not verify:\n%s", strings.Join(f.Problems, "\n"))
	}
}
