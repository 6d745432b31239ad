package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/report"
)

// TestCompareRealRuns: request-bench runs against a real server, at 2,000 requests/s (A) and at
// 400 (B, the "slower build"): compare says B's throughput is worse and a gate on it exits 1; the
// A runs against themselves pass it; a gate naming a metric the runs lack, or a missing side, exits 2.
func TestCompareRealRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real load several times (-short)")
	}
	lim := map[string]string{"TCP_HANDSHAKE_BURST": "1000000", "TCP_HANDSHAKE_GLOBAL_BURST": "1000000",
		"PUBLIC_READ_BURST": "1000000000", "PUBLIC_READ_GLOBAL_BURST": "1000000000"}
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return lim[k] })
	if err != nil {
		t.Fatal(err)
	}
	info, dir := lkInfoServer(t, linkkeysserver.TestServerOptions{Config: cfg})
	run := func(name, rate string) string {
		p := filepath.Join(dir, name+".json")
		env, out, errOut := lkTestEnv()
		if code := Run(context.Background(), LinkKeys, []string{"request-bench", "--info-file", info, "--connections", "2",
			"--duration", "2s", "--rate", rate, "--json", p}, env); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
		return p
	}
	a1, a2, b1, b2 := run("a1", "2000"), run("a2", "2000"), run("b1", "400"), run("b2", "400")
	cmp := func(args ...string) (int, string, string) {
		env, out, errOut := lkTestEnv()
		code := Run(context.Background(), Loadproof, append([]string{"compare", "--seed", "3", "--iterations", "500"}, args...), env)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := cmp("--gate", "throughput>-3%", a1, a2, "--vs", b1, b2)
	if code != ExitGateFailed || !strings.Contains(out, "gate: FAILED: throughput changed") {
		t.Fatalf("slower B: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "throughput") || !strings.Contains(out, "worse") {
		t.Errorf("slower B: no worse throughput row:\n%s", out)
	}
	jsonPath := filepath.Join(dir, "cmp.json")
	code, out, errOut = cmp("--gate", "throughput>-50%", "-o", jsonPath, a1, "--vs", a2)
	if code != ExitOK || !strings.Contains(out, "gate: passed") || !strings.Contains(out, "note: one run on a side") {
		t.Fatalf("A against A: exit %d\n%s%s", code, out, errOut)
	}
	var doc struct {
		Metrics []struct {
			Name    string `json:"name"`
			Verdict string `json:"verdict"`
		} `json:"metrics"`
	}
	if b, err := os.ReadFile(jsonPath); err != nil || json.Unmarshal(b, &doc) != nil || len(doc.Metrics) < 3 {
		t.Fatalf("json %v %s", err, b)
	}
	// The page: the same verdicts as the text, the gate's outcome, exit 1 on a failed gate.
	pagePath := filepath.Join(dir, "cmp.html")
	code, out, errOut = cmp("--format", "html", "-o", pagePath, "--gate", "throughput>-3%", a1, a2, "--vs", b1, b2)
	if code != ExitGateFailed || !strings.Contains(out, "gate: FAILED") || !strings.Contains(errOut, "wrote "+pagePath) {
		t.Fatalf("html: exit %d\n%s%s", code, out, errOut)
	}
	var pm report.CompareModel
	readPageData(t, pagePath, &pm)
	if pm.Metrics[0].Name != "throughput" || pm.Metrics[0].Verdict != "worse" || pm.Gate == nil || pm.Gate.Passed || pm.RunsA != 2 || pm.Seed != "3" {
		t.Errorf("page: %+v, gate %+v", pm.Metrics[0], pm.Gate)
	}
	// report --compare A --vs B draws the same comparison; with no seed given, one derived from the
	// files, so the page is a function of them.
	r1, r2 := filepath.Join(dir, "r1.html"), filepath.Join(dir, "r2.html")
	for _, o := range []string{r1, r2} {
		env, out, errOut := lkTestEnv()
		if code := Run(context.Background(), Loadproof, []string{"report", "--format", "html", "--iterations", "500", "--compare", a1, a2, "--vs", b1, b2, "-o", o}, env); code != ExitOK {
			t.Fatalf("report --vs: exit %d\n%s%s", code, out, errOut)
		}
	}
	p1, _ := os.ReadFile(r1)
	p2, _ := os.ReadFile(r2)
	if len(p1) == 0 || string(p1) != string(p2) {
		t.Error("report --compare --vs drew two different pages from the same files")
	}
	var rm report.CompareModel
	readPageData(t, r1, &rm)
	if rm.Metrics[0].Verdict != "worse" || rm.RunsB != 2 || rm.Gate != nil {
		t.Errorf("report page: %+v", rm.Metrics[0])
	}
	// Without --seed, compare derives the seed from the files: the same files give the same output.
	plain := func() string {
		env, out, errOut := lkTestEnv()
		if code := Run(context.Background(), Loadproof, []string{"compare", "--iterations", "300", "--format", "json", a1, a2, "--vs", b1, b2}, env); code != ExitOK {
			t.Fatalf("compare without --seed: exit %d\n%s%s", code, out, errOut)
		}
		return out.String()
	}
	if x, y := plain(), plain(); x != y || x == "" {
		t.Error("compare without --seed gave two different answers for the same files")
	}
	// A comparison that cannot be made still writes its page, saying why, and exits 2.
	refused := filepath.Join(dir, "refused.html")
	if code, out, errOut := cmp("--format", "html", "-o", refused, a1, "--vs", info); code != ExitUsage {
		t.Errorf("refused: exit %d\n%s%s", code, out, errOut)
	}
	var fm report.CompareModel
	readPageData(t, refused, &fm)
	if !strings.Contains(fm.Refused, "info.json") || len(fm.Metrics) != 0 {
		t.Errorf("refused page: %+v", fm)
	}
	for _, args := range [][]string{{"report", "--gate", "p99<+5%", a1}, {"report", "--compare", a1, "--vs"}, {"report", "--format", "csv", "--compare", a1, "--vs", b1}} {
		env, out, errOut := lkTestEnv()
		if code := Run(context.Background(), Loadproof, args, env); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gate", "p99:nosuch<5%", a1, "--vs", b1}, "no metric \"p99:nosuch\""},
		{[]string{a1, b1}, "then --vs"},
		{[]string{a1, "--vs"}, "at least one result file on each side"},
		{[]string{"--gate", "throughput>3", a1, "--vs", b1}, "needs a % sign"},
	} {
		if code, out, errOut := cmp(c.args...); code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s%s", c.args, code, ExitUsage, c.want, out, errOut)
		}
	}
	_ = fmt.Sprint()
}

// readPageData decodes the data a comparison or search page carries.
func readPageData(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	const open = `<script id="lp-data" type="application/json">`
	i := strings.Index(s, open)
	j := strings.Index(s[max(i, 0):], "</script>")
	if i < 0 || j < 0 {
		t.Fatalf("%s has no page data", path)
	}
	if err := json.Unmarshal([]byte(s[i+len(open):i+j]), into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
