package keycast

import (
	"strings"
	"testing"
)

// FuzzParseMethodScenario: the --method and --scenario flag parsers accept exactly the kebab-case
// names (each with a Debug name), and name the bad value otherwise.
func FuzzParseMethodScenario(f *testing.F) {
	for _, s := range []string{"sign-event", "get-public-key", "nip44-encrypt", "register", "warm-cache", "cold-start", "mixed", "", "Mixed", "sign_event"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseMethod(s); err == nil {
			if string(m) != s || m.DebugName() == "" {
				t.Fatalf("method %q accepted as %q (debug %q)", s, m, m.DebugName())
			}
		} else if !strings.Contains(err.Error(), "method") {
			t.Fatalf("method error %q does not say what was wrong", err)
		}
		if sc, err := ParseScenario(s); err == nil {
			if string(sc) != s || sc.DebugName() == "" {
				t.Fatalf("scenario %q accepted as %q", s, sc)
			}
		} else if !strings.Contains(err.Error(), "scenario") {
			t.Fatalf("scenario error %q does not say what was wrong", err)
		}
	})
}
