package report

import (
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/profiling"
)

// TestPageCSP (issue 27, finding 9): a static report forbids form submission, <base> and any
// connection; only the live dashboard's page may connect to its own origin; the flame graph pages
// carry the static policy.
func TestPageCSP(t *testing.T) {
	policy := func(m *Model) string {
		page, err := Page(m)
		if err != nil {
			t.Fatal(err)
		}
		s := string(page)
		i := strings.Index(s, `http-equiv="Content-Security-Policy" content="`)
		if i < 0 {
			t.Fatal("page without a CSP")
		}
		s = s[i+len(`http-equiv="Content-Security-Policy" content="`):]
		return s[:strings.IndexByte(s, '"')]
	}
	static := policy(&Model{Title: "static"})
	for _, need := range []string{"default-src 'none'", "form-action 'none'", "base-uri 'none'"} {
		if !strings.Contains(static, need) {
			t.Errorf("static policy %q lacks %q", static, need)
		}
	}
	if strings.Contains(static, "connect-src") {
		t.Errorf("static policy %q allows connections", static)
	}
	live := policy(&Model{Title: "live", Live: &LiveView{}})
	if !strings.Contains(live, "connect-src 'self'") || !strings.Contains(live, "form-action 'none'") {
		t.Errorf("live policy %q: want connect-src 'self' and form-action 'none'", live)
	}
	if profiling.FlameCSP != StaticCSP {
		t.Errorf("flame graph policy %q differs from the report's %q", profiling.FlameCSP, StaticCSP)
	}
}
