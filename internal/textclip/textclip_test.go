package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		{"héllo", 2, "h…"}, // é is two bytes: cutting at 2 would split it
		{"héllo", 3, "hé…"},
		{"€uro", 1, "…"}, // € is three bytes
		{"€uro", 2, "…"},
		{"€uro", 3, "€…"},
		{"a😀b", 4, "a…"}, // 😀 is four bytes
		{"a😀b", 5, "a😀…"},
		{"\xff\xfe\xfd", 2, "\xff\xfe…"}, // invalid bytes are kept as they are
	} {
		if got := String(c.in, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if got := Bytes([]byte(c.in), c.n); got != c.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// FuzzString: the output is valid UTF-8 whenever the input is, keeps at most n bytes of the
// input (plus the ellipsis when cut), is a prefix of the input, and Bytes agrees with String.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo", "€uro", "a😀b", "\xff\xfe\xfd", "é\x80\x80\x80\x80"} {
		for n := -1; n < 6; n++ {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := String(s, n)
		if b := Bytes([]byte(s), n); b != got {
			t.Fatalf("Bytes(%q, %d) = %q, String = %q", s, n, b, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: not valid UTF-8", s, n, got)
		}
		if len(s) <= n {
			if got != s {
				t.Fatalf("String(%q, %d) = %q, want the input unchanged", s, n, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, Ellipsis)
		if !ok {
			t.Fatalf("String(%q, %d) = %q: cut without an ellipsis", s, n, got)
		}
		if len(kept) > max(n, 0) {
			t.Fatalf("String(%q, %d) kept %d bytes, more than asked", s, n, len(kept))
		}
		if !strings.HasPrefix(s, kept) {
			t.Fatalf("String(%q, %d) = %q: not a prefix of the input", s, n, got)
		}
		if utf8.ValidString(s) && len(kept) < n-utf8.UTFMax+1 {
			t.Fatalf("String(%q, %d) kept only %d bytes: cut more than one rune", s, n, len(kept))
		}
	})
}
