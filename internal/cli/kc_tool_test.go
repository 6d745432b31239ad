package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/machine"
)

func kcToolEnv() (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{
		Stdout: &out, Stderr: &errb,
		Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, &out, &errb
}

func kcRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env, out, errb := kcToolEnv()
	code := Run(context.Background(), Keycast, args, env)
	return code, out.String(), errb.String()
}

func TestKeycastSetupRunReport(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	code, _, errs := kcRun(t, "setup", "--url", srv.URL, "--users", "3", "-c", "2", "-o", users)
	if code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	fi, err := os.Stat(users)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file %v %v", fi, err)
	}
	uf, err := keycast.ReadUsersFile(users)
	if err != nil || len(uf.Users) != 3 || uf.URL != srv.URL {
		t.Fatalf("users file %+v %v", uf, err)
	}

	results := filepath.Join(dir, "results.json")
	code, out, errs := kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "50",
		"-m", "get-public-key", "-s", "cold-start", "-c", "4", "--seed", "3", "-o", results)
	if code != ExitOK {
		t.Fatalf("run exit %d: %s", code, errs)
	}
	for _, want := range []string{"\n=== Server-Side Cache Metrics ===\nCache hits:   ", "\n\nKeycast Load Test Results\n", "  Requests:      50\n", "Success Rate:  100.0%"} {
		if !strings.Contains(out, want) {
			t.Fatalf("run output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "Progress: ") {
		t.Fatalf("no progress on stderr:\n%s", errs)
	}
	r, err := keycastresult.Read(results)
	if err != nil || r.Summary.TotalRequests != 50 || r.Metadata.Seed != 3 || r.ServerMetrics == nil || r.Envelope == nil || len(r.Machines) == 0 || len(r.Intervals) == 0 {
		t.Fatalf("results %+v %v", r, err)
	}

	code, out, _ = kcRun(t, "report", "-i", results, "-f", "csv")
	if code != ExitOK || !strings.HasPrefix(out, "url,scenario,method,concurrency,duration_secs,users,total_requests,rps,success_rate,p50_ms,p95_ms,p99_ms\n"+srv.URL+",ColdStart,GetPublicKey,4,") {
		t.Fatalf("report csv %d:\n%s", code, out)
	}
	code, out, _ = kcRun(t, "report", "-i", results, "--compare", results)
	if code != ExitOK || !strings.Contains(out, "\n\nComparison\n==========\n") || !strings.Contains(out, "+0.0%") {
		t.Fatalf("report compare %d:\n%s", code, out)
	}
	code, out, _ = kcRun(t, "report", "-i", results, "-f", "json")
	if code != ExitOK || !strings.Contains(out, `"histograms"`) || !strings.Contains(out, `"intervals"`) {
		t.Fatalf("report json %d", code)
	}
}

func TestKeycastToolUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "-d", "0"}, ExitUsage, "needs --requests"},
		{[]string{"run", "-m", "sign"}, ExitUsage, "unknown method"},
		{[]string{"run", "-s", "hot"}, ExitUsage, "unknown scenario"},
		{[]string{"run", "--users-file", filepath.Join(dir, "none.json")}, ExitUsage, "create it with the setup command"},
		{[]string{"report", "-f", "xml"}, ExitUsage, "want text, json or csv"},
		{[]string{"report", "-i", filepath.Join(dir, "none.json")}, ExitFailure, "reading results"},
		{[]string{"setup", "--mode", "sql"}, ExitUsage, "want db or http"},
		{[]string{"setup", "--mode", "db"}, ExitUsage, "--database-url"},
		{[]string{"profile", "--url", "http://127.0.0.1:1"}, ExitUsage, "--pprof-url"},
		{[]string{"profile", "--method", "register"}, ExitUsage, "want get-public-key"},
		{[]string{"run", "--bogus"}, ExitUsage, "unknown flag"},
		{[]string{"run", "--http-client", "curl"}, ExitUsage, "want fast or std"},
		// keycastload's Validate is the one check; the cli names the command and exits 2.
		{[]string{"run", "-c", "0"}, ExitUsage, "run: --concurrency 0 must be at least 1"},
		{[]string{"run", "-c", "0", "-s", "hot"}, ExitUsage, "run: --concurrency 0 must be at least 1\nrun: keycast: unknown scenario \"hot\""},
		{[]string{"run", "--rate", "-1"}, ExitUsage, "run: engine: rate -1 must be"},
		{[]string{"run", "--rate-from", "5"}, ExitUsage, "run: rate-from needs --rate"},
		{[]string{"setup", "--users", "0"}, ExitUsage, "setup: --users and --concurrency must be at least 1"},
		{[]string{"profile", "--concurrency", "0"}, ExitUsage, "profile: --concurrency 0 must be at least 1"},
		{[]string{"profile", "--duration", "0"}, ExitUsage, "profile: --users and --duration must be at least 1"},
	} {
		code, _, errs := kcRun(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", tc.args, code, tc.code, errs, tc.want)
		}
	}
}

func TestKeycastRunAgainstNothingCouldNotRun(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{URL: "x", Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "t"}}}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kcRun(t, "run", "--url", "http://127.0.0.1:1", "--users-file", users, "-d", "1", "-o", filepath.Join(dir, "r.json"))
	if code != ExitCouldNotRun || !strings.Contains(errs, "cannot be reached") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestKeycastProfileAgainstARunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("profiles a running server (-short)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	// The test process stands in for the server's pprof endpoint: it profiles itself, server included.
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pp := httptest.NewServer(mux)
	defer pp.Close()
	out := filepath.Join(t.TempDir(), "prof")
	code, stdout, errs := kcRun(t, "profile", "--url", srv.URL, "--pprof-url", pp.URL, "--users", "2", "--concurrency", "2",
		"--duration", "1", "--output", out)
	if code != ExitOK {
		t.Fatalf("profile exit %d: %s", code, errs)
	}
	for _, pattern := range []string{"keycast-cpu-*.pprof", "keycast-heap-*.pprof", "flamegraph-results-*.json", "flamegraph-users.json"} {
		m, _ := filepath.Glob(filepath.Join(out, pattern))
		if len(m) != 1 {
			t.Fatalf("%s: %v", pattern, m)
		}
		if fi, err := os.Stat(m[0]); err != nil || fi.Size() == 0 {
			t.Fatalf("%s is empty", m[0])
		}
	}
	if !strings.Contains(stdout, "=== Results ===\nKeycast Load Test Results") || !strings.Contains(stdout, "go tool pprof -http=:8080 ") {
		t.Fatalf("profile output:\n%s", stdout)
	}
	// A second run reuses the users with --skip-setup.
	code, _, errs = kcRun(t, "profile", "--url", srv.URL, "--pprof-url", pp.URL, "--users", "2", "--concurrency", "2",
		"--duration", "1", "--output", out, "--skip-setup")
	if code != ExitOK {
		t.Fatalf("second profile exit %d: %s", code, errs)
	}
}

// TestKeycastRunRefusesAUsersFileThatWouldInjectHeaders is issue 13 item 1 at the command line:
// a token with CR/LF is a usage error naming the user, and nothing reaches the target.
func TestKeycastRunRefusesAUsersFileThatWouldInjectHeaders(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	uf := &keycast.UsersFile{URL: srv.URL, Users: []keycast.TestUser{
		{Pubkey: strings.Repeat("a", 64), UcanToken: "good"},
		{Pubkey: strings.Repeat("b", 64), UcanToken: "evil\r\nX-Injected: 1"},
	}}
	if err := keycast.WriteUsersFile(users, uf); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kcRun(t, "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "4", "-o", filepath.Join(dir, "r.json"))
	if code != ExitUsage || !strings.Contains(errs, "user 1 (ucan_token): contains a carriage return (CR) at byte 4") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the target", hits.Load())
	}
}

// TestKeycastReportRejectsFilesThatAreNotResults is issue 13 item 2: `report` printed any JSON
// object as a results file ({} gave "Success Rate: 100.0%" and exit 0). Each file the tools write,
// and an unknown object, is now refused with what it is.
func TestKeycastReportRejectsFilesThatAreNotResults(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{URL: "http://x", Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "t"}}}); err != nil {
		t.Fatal(err)
	}
	good := kcSegment(t, dir, "good.json", 10, 0)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{write("empty-object.json", `{}`), `is an unknown JSON object missing "metadata" and "summary"`},
		{write("other.json", `{"metadata":{"url":"x"}}`), `missing "summary"`},
		{users, "is a users file written by setup"},
		{write("evidence.json", `{"schema_version":1,"evidence_scope":"s","phases":[]}`), "is a capacity evidence file"},
		{write("lk.json", `{"format":"x","command":"ddos"}`), "is a LinkKeys client result"},
		{write("hollow.json", `{"metadata":{},"summary":{}}`), "lacks metadata.url"},
		{write("list.json", `[1]`), "not an object"},
	} {
		for _, args := range [][]string{{"report", "-i", tc.path}, {"report", "-i", good, "--compare", tc.path}} {
			code, out, errs := kcRun(t, args...)
			if code != ExitUsage || !strings.Contains(errs, tc.want) || strings.Contains(out, "Success Rate") {
				t.Errorf("%v: exit %d, stderr %q (want %q), stdout %q", args, code, errs, tc.want, out)
			}
		}
	}
}

// TestKeycastRunExitStatusReflectsFailure is issue 13 item 3: `run` exited 0 at a 78% error rate and
// when every request was a 401. A run with no successful request exits ExitNoSuccess; with
// --max-error-rate (off by default, as upstream) a higher error rate exits 1. The results are
// written either way.
func TestKeycastRunExitStatusReflectsFailure(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/api/nostr":
			w.WriteHeader(404)
		case strings.HasSuffix(r.Header.Get("Authorization"), "revoked"):
			w.WriteHeader(401)
			io.WriteString(w, `{"error":"Invalid or expired token. Please log in again."}`)
		case n.Add(1)%4 != 0:
			w.WriteHeader(500)
			io.WriteString(w, `{"error":"boom"}`)
		default:
			io.WriteString(w, `{"result":"x"}`)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	usersFile := func(name, token string) string {
		p := filepath.Join(dir, name)
		uf := &keycast.UsersFile{Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: token}}}
		if err := keycast.WriteUsersFile(p, uf); err != nil {
			t.Fatal(err)
		}
		return p
	}
	revoked, flaky := usersFile("revoked.json", "revoked"), usersFile("flaky.json", "ok")
	for _, tc := range []struct {
		name  string
		users string
		extra []string
		code  int
		want  string
	}{
		{"all 401", revoked, nil, ExitNoSuccess, "no request succeeded (20 requests, 20 failed: 20 auth"},
		{"75% errors, no limit", flaky, nil, ExitOK, ""},
		{"75% errors over the limit", flaky, []string{"--max-error-rate", "0.5"}, ExitFailure, "error rate 75.0% is above --max-error-rate 50.0%"},
		{"75% errors under the limit", flaky, []string{"--max-error-rate", "0.8"}, ExitOK, ""},
		{"over net/http", flaky, []string{"--http-client", "std", "--max-error-rate", "0.5"}, ExitFailure, "error rate 75.0% is above --max-error-rate 50.0%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			out := filepath.Join(dir, tc.name+".json")
			args := append([]string{"run", "--url", srv.URL, "--users-file", tc.users, "-d", "0", "-n", "20", "-c", "1", "-o", out}, tc.extra...)
			code, _, errs := kcRun(t, args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant %q", code, tc.code, errs, tc.want)
			}
			res, err := keycastresult.Read(out)
			if err != nil {
				t.Fatalf("results not written: %v", err)
			}
			client := "fast"
			if slices.Contains(tc.extra, "std") {
				client = "std"
			}
			if res.Metadata.HTTPClient != client || res.Envelope == nil || res.Envelope.Flags["http-client"] != client {
				t.Fatalf("http client recorded as %q (flags %v), want %q", res.Metadata.HTTPClient, res.Envelope.Flags, client)
			}
		})
	}
	if code, _, errs := kcRun(t, "run", "--max-error-rate", "1.5"); code != ExitUsage || !strings.Contains(errs, "between 0 and 1") {
		t.Fatalf("bad --max-error-rate: exit %d %s", code, errs)
	}
}

// unwritable returns a path below which nothing can be created: below a regular file, so the test
// does not depend on permissions (it runs as root too).
func unwritable(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f, "sub")
}

// TestKeycastOutputsAreCheckedBeforeAnyLoad is issue 13 item 4: `run` sent its whole load before
// failing on an output it could not write, and `setup` created accounts and then lost their tokens.
// Both now check that they can write their output before the first request.
func TestKeycastOutputsAreCheckedBeforeAnyLoad(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != keycast.PathMetrics {
			hits.Add(1)
		}
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "t"}}}); err != nil {
		t.Fatal(err)
	}
	bad := unwritable(t)
	for _, args := range [][]string{
		{"run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "50", "-o", filepath.Join(bad, "r.json")},
		{"run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "50", "-o", dir},
		{"setup", "--url", srv.URL, "--mode", "http", "-n", "3", "-o", filepath.Join(bad, "users.json")},
	} {
		hits.Store(0)
		code, _, errs := kcRun(t, args...)
		if code != ExitUsage || !strings.Contains(errs, "--output") || hits.Load() != 0 {
			t.Errorf("%v: exit %d after %d requests, stderr %q; want exit 2 before any request", args[:1], code, hits.Load(), errs)
		}
	}
}

// TestKeycastVersionFlag is issue 13 item 5: upstream's clap command has `-V`/`--version`, printing
// "keycast-loadtest <version>"; ours had only cobra's --version, in cobra's own format.
func TestKeycastVersionFlag(t *testing.T) {
	for _, flag := range []string{"-V", "--version"} {
		code, out, errs := kcRun(t, flag)
		if want := "keycast-loadtest " + machine.LoadproofVersion() + "\n"; code != ExitOK || out != want {
			t.Errorf("%s: exit %d, stdout %q (want %q), stderr %q", flag, code, out, want, errs)
		}
	}
}
