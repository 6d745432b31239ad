package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/search"
)

func lpRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env, out, errb := kcToolEnv()
	code := Run(context.Background(), Loadproof, args, env)
	return code, out.String(), errb.String()
}

// TestSearchAgainstKeycast runs a real, tiny search against the Keycast reference server on
// loopback: every trial is a `keycast run` subprocess of this binary. The SLO caps throughput at
// 100 requests a second, so rates 20, 40 and 80 hold it and the knee lies between 80 and 160: the
// search must bisect to within --resolution, write a bundle that verifies, and a changed knee must
// fail verification.
func TestSearchAgainstKeycast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real trials (seconds)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if code, _, errs := kcRun(t, "setup", "--url", srv.URL, "--users", "2", "-c", "2", "-o", users); code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "search.json")
	pagePath := filepath.Join(dir, "search.html")
	start := time.Now()
	code, stdout, errs := lpRun(t, "search", "--vary", "rate", "--from", "20", "--to", "400", "--trials", "1", "--resolution", "50%",
		"--slo", "throughput<100/s,errors<1%", "--resamples", "100", "-o", out, "--html", pagePath,
		"--", "keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "1", "--ramp-up", "0", "-m", "get-public-key")
	if code != ExitOK {
		t.Fatalf("search exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errs)
	}
	t.Logf("search took %s:\n%s", time.Since(start).Round(time.Millisecond), stdout)
	res, err := search.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Knee == nil || res.FirstFail == nil {
		t.Fatalf("no bracket: knee %v, first fail %v", res.Knee, res.FirstFail)
	}
	if *res.Knee < 80 || *res.FirstFail > 160 || *res.FirstFail / *res.Knee > 1.5 {
		t.Fatalf("bracket %v–%v, want within [80, 160] and 50%% wide", res.Knee, res.FirstFail)
	}
	if !strings.Contains(strings.Join(res.BrokeFirst, ","), "throughput") {
		t.Fatalf("broke first %v, want throughput", res.BrokeFirst)
	}
	if !strings.Contains(stdout, "knee: rate ") || !strings.Contains(stdout, "confidence: ") {
		t.Fatalf("summary:\n%s", stdout)
	}
	bundle := filepath.Join(dir, "search-bundle")
	if code, vout, _ := lpRun(t, "verify", bundle); code != ExitOK || !strings.Contains(vout, "VERIFIED") {
		t.Fatalf("verify exit %d:\n%s", code, vout)
	}
	// search --html and report --format html of the file and of the bundle draw the knee.
	var sm report.SearchModel
	readPageData(t, pagePath, &sm)
	if float64(sm.Knee) != *res.Knee || len(sm.Points) != res.TrialCount || !strings.Contains(stdout, "search page: "+pagePath) {
		t.Fatalf("search --html: knee %v, %d points: want %v, %d", float64(sm.Knee), len(sm.Points), *res.Knee, res.TrialCount)
	}
	bundlePage := filepath.Join(dir, "bundle.html")
	if code, _, errs := lpRun(t, "report", "--format", "html", "-o", bundlePage, bundle); code != ExitOK {
		t.Fatalf("report of the bundle: exit %d: %s", code, errs)
	}
	if code, tout, errs := lpRun(t, "report", out); code != ExitOK || !strings.Contains(tout, "knee: rate ") {
		t.Fatalf("report of the search file: exit %d:\n%s%s", code, tout, errs)
	}
	if code, _, errs := lpRun(t, "report", out, bundle); code != ExitUsage || !strings.Contains(errs, "one search at a time") {
		t.Fatalf("report of a search and more: exit %d: %s", code, errs)
	}
	// A knee changed after the fact (manifest rewritten to match) fails the recomputation.
	var raw map[string]any
	b, _ := os.ReadFile(filepath.Join(bundle, search.File))
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["knee"] = *res.Knee * 2
	b, _ = json.Marshal(raw)
	if err := os.WriteFile(filepath.Join(bundle, search.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var files []string
	ents, _ := os.ReadDir(bundle)
	for _, e := range ents {
		if n := e.Name(); n != evidence.ManifestFile && n != evidence.SignatureFile {
			files = append(files, n)
		}
	}
	if err := evidence.WriteManifest(bundle, files, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, vout, _ := lpRun(t, "verify", bundle); code != ExitFailure || !strings.Contains(vout, "recomputed: knee") {
		t.Fatalf("tampered knee: verify exit %d:\n%s", code, vout)
	}
	// Its page says TAMPERED at the top, and report exits 1.
	if code, _, _ := lpRun(t, "report", "--format", "html", "-o", bundlePage, bundle); code != ExitFailure {
		t.Fatalf("report of the tampered bundle: exit %d, want 1", code)
	}
	if b, _ := os.ReadFile(bundlePage); !strings.Contains(string(b), `id="lp-tampered"`) {
		t.Fatal("the tampered bundle's page does not say TAMPERED")
	}
}

func TestSearchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "s.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "linkkeys", "connections"}, "has no --rate flag"},
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "keycast", "run", "--rate", "5"}, "sets --rate itself"},
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "keycast", "run", "-o", "x.json"}, "sets --output itself"},
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "keycast", "capacity"}, "not a client command"},
		{[]string{"--vary", "speed", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "keycast", "run"}, "rate, count or concurrency"},
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1", "-o", o, "--", "keycast", "run"}, "no duration"},
		{[]string{"--vary", "count", "--from", "1", "--to", "2", "--slo", "throughput>90%", "-o", o, "--", "linkkeys", "connections"}, "needs --vary rate"},
		{[]string{"--vary", "rate", "--from", "5", "--to", "2", "--slo", "p99<1ms", "-o", o, "--", "keycast", "run"}, "at least --from"},
		{[]string{"--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o, "keycast", "run"}, "after --"},
	} {
		code, _, errs := lpRun(t, append([]string{"search"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// A client that refuses its command line (a bad flag) ends the search with exit 2.
	code, _, errs := lpRun(t, "search", "--vary", "rate", "--from", "1", "--to", "2", "--slo", "p99<1ms", "-o", o,
		"--", "keycast", "run", "--url", "http://127.0.0.1:1", "-m", "no-such-method")
	if code != ExitUsage || !strings.Contains(errs, "refused its command line") {
		t.Fatalf("refused client: exit %d, %s", code, errs)
	}
}
