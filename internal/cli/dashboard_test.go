package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// TestRunDashboardFlag: `run --dashboard` serves the page on loopback during the run and sends the
// final report drawn from the results file at the end (the page itself is checked in a browser by
// internal/report/e2e).
func TestRunDashboardFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a live dashboard through a run (-short)")
	}
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
	// With a token: the URL printed on stderr carries it, the results file does not.
	const token = "d7e1a9c3b5f20846"
	out := filepath.Join(dir, "r2.json")
	code, stdout, errs := kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "1", "--ramp-up", "0", "-m", "get-public-key",
		"-c", "2", "-o", out, "--dashboard", ":0", "--dashboard-token", token)
	if code != ExitOK {
		t.Fatalf("run with a token exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "/?token="+token) || strings.Count(errs, token) != 1 || strings.Contains(stdout, token) {
		t.Errorf("the token URL is not on stderr once:\nstdout:\n%s\nstderr:\n%s", stdout, errs)
	}
	if b, err := os.ReadFile(out); err != nil || strings.Contains(string(b), token) || !strings.Contains(string(b), `"dashboard-token": "(redacted)"`) {
		t.Errorf("the results file holds the token or no redacted flag (%v)", err)
	}
	for _, args := range [][]string{{"--dashboard", ":0", "--dashboard-token", "has space"}, {"--dashboard-token", token}} {
		code, _, errs = kcRun(t, append([]string{"run", "--url", srv.URL, "--users-file", users, "-d", "1"}, args...)...)
		if code != ExitUsage || !strings.Contains(errs, "--dashboard") {
			t.Errorf("%q: exit %d: %s", args, code, errs)
		}
	}
	code, _, errs = kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "1", "--dashboard", "nonsense")
	if code != ExitUsage || !strings.Contains(errs, "--dashboard") {
		t.Errorf("a bad --dashboard address: exit %d: %s", code, errs)
	}
}

// TestTokenFromEnv: the token flag wins; without it the environment variable is read (keeping the
// token out of argv), and either is checked.
func TestTokenFromEnv(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     string
		want    string
		wantErr bool
	}{
		{nil, "", "", false},
		{nil, "from-env", "from-env", false},
		{[]string{"--dashboard-token", "from-flag"}, "from-env", "from-flag", false},
		{nil, "bad token", "", true},
	} {
		c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		c.Flags().String("dashboard-token", "", "")
		if err := c.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		env := &Env{Getenv: func(k string) string {
			if k == dashboardTokenEnv {
				return tc.env
			}
			return ""
		}}
		got, err := flagOrEnvToken(c, env, "dashboard-token", dashboardTokenEnv)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("args %q env %q: %q, %v; want %q (error %v)", tc.args, tc.env, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), dashboardTokenEnv) {
			t.Errorf("the error does not name the variable: %v", err)
		}
	}
}
