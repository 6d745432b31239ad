package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// TestDemoKeycastPart runs the demo's Keycast half (setup, run, capacity profile on the embedded
// server) with one-second phases; the LinkKeys half is the smoke run, which scripts/test.sh runs.
func TestDemoKeycastPart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short Keycast profile (about 10 s)")
	}
	env, out, errb := kcToolEnv()
	dir := filepath.Join(t.TempDir(), "demo")
	code := Run(context.Background(), Loadproof, []string{"demo", "--skip-linkkeys", "--output", dir,
		"--users", "3", "--run-secs", "1", "--phase-secs", "1"}, env)
	if code != ExitOK {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
	res, err := keycastresult.Read(filepath.Join(dir, "keycast-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.TotalRequests == 0 || res.Latency() == nil || len(res.Machines) == 0 {
		t.Fatalf("results without requests, histogram or machine record: %+v", res.Summary)
	}
	if err := capacity.VerifyBundle(filepath.Join(dir, "capacity-evidence")); err != nil {
		t.Fatalf("evidence bundle: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keycast-users.json")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || fi.Size() < 100_000 {
		t.Errorf("report.html: %v", err)
	}
	for _, want := range []string{"== What the demo measured", "Keycast get_public_key", "Keycast capacity profile: passed=", dir,
		"works offline): " + filepath.Join(dir, "report.html") + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// A second run into the same directory is refused rather than mixing two runs.
	if code := Run(context.Background(), Loadproof, []string{"demo", "--skip-linkkeys", "--output", dir}, env); code != ExitUsage {
		t.Fatalf("demo into a used directory: exit %d, want %d", code, ExitUsage)
	}
}
