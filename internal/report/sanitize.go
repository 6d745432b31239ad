package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Sanitize makes one string that came from a file or a server safe to print on a terminal: C0
// controls (newline, tab and carriage return included), DEL, C1 controls, bidirectional overrides
// and bytes that are not UTF-8 are shown as visible escapes (\x1b, \u202e), so a crafted target,
// cause, phase or function name can neither move the cursor, recolour or rewrite a line, nor start
// a line of its own. Every other rune is kept.
func Sanitize(s string) string { return escapeControls(s, false) }

// SanitizeText is Sanitize for a whole text report: newlines and tabs, which the report itself
// writes, are kept; every other control is escaped.
func SanitizeText(s string) string { return escapeControls(s, true) }

// TextWriter wraps w so that everything written through it is passed through SanitizeText; the
// text printers write through it, so no string of a file reaches a terminal raw.
func TextWriter(w io.Writer) io.Writer {
	if _, ok := w.(textWriter); ok {
		return w
	}
	return textWriter{w}
}

type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	s := string(p)
	if clean(s, true) {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, escapeControls(s, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func escapeControls(s string, keepLayout bool) string {
	if clean(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune: C1 controls and the bidirectional controls that reorder what a terminal shows.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x200e || r == 0x200f || r == 0x061c || r == 0x2028 || r == 0x2029
}

// clean reports whether s needs no escape (the common case, checked without allocating).
func clean(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanRunes(s[i:], keepLayout)
		}
		if c < 0x20 && !(keepLayout && (c == '\n' || c == '\t')) || c == 0x7f {
			return false
		}
	}
	return true
}

func cleanRunes(s string, keepLayout bool) bool {
	for _, r := range s {
		if keepLayout && (r == '\n' || r == '\t') {
			continue
		}
		if r == utf8.RuneError || unsafeRune(r) || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}
