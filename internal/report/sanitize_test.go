package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, field, text string }{
		{"plain target 127.0.0.1:3000", "plain target 127.0.0.1:3000", "plain target 127.0.0.1:3000"},
		{"a\x1b[32mb", `a\x1b[32mb`, `a\x1b[32mb`},
		{"line\nnext\tcol\r", `line\x0anext\x09col\x0d`, "line\nnext\tcol\\x0d"},
		{"c1 \u009b2J", `c1 \u009b2J`, `c1 \u009b2J`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`, `bidi \u202egnp.exe`},
		{"bad \xff utf8 é", `bad \xff utf8 é`, `bad \xff utf8 é`},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"ünïcödé ✓", "ünïcödé ✓", "ünïcödé ✓"},
	} {
		if got := Sanitize(tc.in); got != tc.field {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.field)
		}
		if got := SanitizeText(tc.in); got != tc.text {
			t.Errorf("SanitizeText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
	var buf bytes.Buffer
	TextWriter(&buf).Write([]byte("ok\x1b[2K\n"))
	if buf.String() != "ok\\x1b[2K\n" {
		t.Errorf("TextWriter wrote %q", buf.String())
	}
}

// FuzzSanitize: the output holds no control byte (bar newline and tab in text), no C1 or bidi
// control, and is valid UTF-8.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\x1b[1Ab", "\u009b\u202e", "\xff\xfe", "ok\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			out := escapeControls(s, keep)
			if !utf8.ValidString(out) {
				t.Fatalf("%q -> invalid UTF-8 %q", s, out)
			}
			for _, r := range out {
				if keep && (r == '\n' || r == '\t') {
					continue
				}
				if r < 0x20 || r == 0x7f || unsafeRune(r) {
					t.Fatalf("%q -> %q keeps %U", s, out, r)
				}
			}
			if clean(s, keep) && out != s {
				t.Fatalf("clean %q changed to %q", s, out)
			}
			if !strings.ContainsAny(s, "\\") && !clean(s, keep) && out == s {
				t.Fatalf("unclean %q unchanged", s)
			}
		}
	})
}
