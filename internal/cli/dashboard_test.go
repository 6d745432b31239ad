package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// TestRunDashboardFlag: `run --dashboard` serves the page on loopback during the run and sends the
// final report drawn from the results file at the end (the page itself is checked in a browser by
// internal/report/e2e).
func TestRunDashboardFlag(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if code, _, errs := kcRun(t, "setup", "--url", srv.URL, "--users", "2", "-c", "2", "-o", users); code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	if _, err := keycast.ReadUsersFile(users); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "2", "--ramp-up", "0", "-m", "get-public-key",
		"-c", "2", "-o", filepath.Join(dir, "r.json"), "--dashboard", ":0")
	if code != ExitOK {
		t.Fatalf("run exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "dashboard: http://127.0.0.1:") || !strings.Contains(errs, "dashboard: final report sent") {
		t.Errorf("stderr:\n%s", errs)
	}
	code, _, errs = kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "1", "--dashboard", "nonsense")
	if code != ExitUsage || !strings.Contains(errs, "--dashboard") {
		t.Errorf("a bad --dashboard address: exit %d: %s", code, errs)
	}
}
