package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/result"
)

func TestReportHTMLAndHGRM(t *testing.T) {
	dir := t.TempDir()
	a := kcPart(t, dir, "a.json", 100, 3, testRunID, result.Segment{Index: 0, Count: 2})
	b := kcPart(t, dir, "b.json", 50, 1, testRunID, result.Segment{Index: 1, Count: 2})
	run := func(args ...string) (int, string, string) {
		env, out, errb := kcToolEnv()
		code := Run(context.Background(), Loadproof, append([]string{"report"}, args...), env)
		return code, out.String(), errb.String()
	}
	page := filepath.Join(dir, "report.html")
	if code, _, errs := run("--format", "html", "-o", page, a, b); code != ExitOK {
		t.Fatalf("html: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `id="lp-data"`) || !strings.Contains(string(b), `"mode":"merged"`) {
		t.Fatalf("report.html: %v", err)
	}
	if code, _, errs := run("--format", "html", "--compare", "-o", filepath.Join(dir, "c.html"), a, b); code != ExitOK {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	code, out, errs := run("--format", "hgrm", a, b)
	if code != ExitOK || !strings.Contains(out, "Total count    =          150]") {
		t.Fatalf("hgrm: exit %d: %s\n%s", code, errs, out)
	}
	users := filepath.Join(dir, "users.json")
	os.WriteFile(users, []byte(`{"users":[]}`), 0o600)
	for _, args := range [][]string{{"--format", "html", "--compare", a}, {"--format", "html", users}, {"--format", "hgrm", "--kind", "nope", a}} {
		if code, _, errs := run(args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, ExitUsage, errs)
		}
	}
}
