package capacity

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// testPlan is upstream's test fixture plan: six phases of one second, every non-spike phase under the
// SLO, the spike declaring shedding at 1%.
func testPlan() *Plan {
	p := &Plan{
		ProfileName:       "local-cloud-run",
		ProfilePlatform:   PlatformCloudRun,
		TargetURL:         "http://localhost:3000",
		UsersFile:         "users.json",
		Seed:              371,
		Revisions:         Revisions{Code: "abc123", Image: "sha256:example", Infrastructure: "local-compose-v1"},
		EnvironmentParity: "Local rehearsal only",
		Objectives:        Objectives{AvailabilityPercent: 99.9, LatencyP95Ms: 500},
		StopConditions:    StopConditions{MaxErrorRate: 0.05, MaxLatencyP95Ms: 1000},
	}
	for _, k := range RequiredKinds {
		ph := Phase{
			Name: string(k), Kind: k, Method: keycast.MethodGetPublicKey, Scenario: keycast.ScenarioMixed,
			Concurrency: 1, DurationSeconds: 1, MaxErrorRate: 0.01, MaxLatencyP95Ms: 500, SLOApplies: k != KindSpike,
		}
		if k == KindSpike {
			ph.IntentionalShedding = &Shedding{Status: 503, ErrorCode: "admission_rejected", MinRate: 0.01}
		}
		p.Phases = append(p.Phases, ph)
	}
	return p
}

// results builds results with the given counts and a histogram whose every sample is latency.
func results(total, failed, intentional uint64, latency time.Duration) *keycastresult.Results {
	h := hist.New()
	for range total {
		h.Record(latency)
	}
	c := keycastresult.Counts{Total: total, Success: total - failed, Failed: failed, Intentional: intentional, Server: failed - intentional}
	return &keycastresult.Results{
		Metadata: keycastresult.Metadata{URL: "http://localhost:3000", Scenario: "Mixed", Method: "GetPublicKey", Concurrency: 1, DurationSecs: 1, UserCount: 1, Timestamp: "2025-12-10T12:00:00Z", Seed: 371},
		Summary:  keycastresult.Summarize(c, h, time.Second),
		Timeline: []keycastresult.TimelinePoint{},
		Envelope: keycastresult.NewEnvelope("http://localhost:3000", h, nil, nil),
	}
}

// fakeRunner serves canned results per phase index and records what it was asked.
type fakeRunner struct {
	mu   sync.Mutex
	runs []PhaseRun
	// per phase index: results or error; phases not listed get healthy results.
	results map[int]*keycastresult.Results
	errs    map[int]error
	// hook runs before returning (e.g. to cancel a context).
	hook func(ctx context.Context, run PhaseRun)
}

func (f *fakeRunner) run(ctx context.Context, run PhaseRun) (*keycastresult.Results, error) {
	f.mu.Lock()
	f.runs = append(f.runs, run)
	f.mu.Unlock()
	if f.hook != nil {
		f.hook(ctx, run)
	}
	if err := f.errs[run.Index]; err != nil {
		return nil, err
	}
	if r, ok := f.results[run.Index]; ok {
		return r, nil
	}
	if run.Phase.IntentionalShedding != nil {
		return results(1000, 50, 50, 2*time.Millisecond), nil
	}
	return results(1000, 0, 0, 2*time.Millisecond), nil
}

func fixedClock() time.Time { return time.Date(2025, 12, 10, 12, 0, 0, 0, time.UTC) }

func testMachine() *machine.Record {
	return &machine.Record{OS: "linux", Arch: "amd64", Cores: 2, GOMAXPROCS: 2, GoVersion: "go1.26.8", LoadproofVersion: "test",
		Settings:    map[string]string{"KEYCAST_CPU_SLOTS": "1", "KEYCAST_TEST_DATABASE_URL": "postgres://u:pw@h/db", "KEYCAST_ADMIN_TOKEN": "tok"},
		CollectedAt: fixedClock()}
}

// writeUsers writes a users file with n users whose tokens are distinctive strings.
func writeUsers(t *testing.T, path string, n int) []keycast.TestUser {
	t.Helper()
	uf := &keycast.UsersFile{URL: "http://localhost:3000", CreatedAt: "2025-12-10T12:00:00Z"}
	for i := range n {
		uf.Users = append(uf.Users, keycast.TestUser{
			Pubkey:    fmt.Sprintf("%064x", i+1),
			Email:     fmt.Sprintf("lt-%d@test.local", i),
			UcanToken: fmt.Sprintf("eyJhbGciOiJTY2hub3JyU2VjcDI1NmsxIn0.secret-token-%d.sig", i),
		})
	}
	if err := keycast.WriteUsersFile(path, uf); err != nil {
		t.Fatal(err)
	}
	return uf.Users
}

func readUsers(t *testing.T, path string) []keycast.TestUser {
	t.Helper()
	uf, err := keycast.ReadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return uf.Users
}

// passwordish matches strings that look like credentials in JSON text.
var passwordish = regexp.MustCompile(`(?i)(password|passwd|hunter2|"?nsec1[0-9a-z]+|ucan_token|bearer )`)

// scanBundle fails when any file of the bundle holds a user's token (or a recognisable part of it),
// an email, or a password-ish string.
func scanBundle(t *testing.T, dir string, users []keycast.TestUser) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("empty bundle")
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			parts := strings.Split(u.UcanToken, ".")
			needles := append([]string{u.UcanToken, u.Email}, parts...)
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
