// Package textclip owns the one way loadproof shortens outside text for a message: at most n
// bytes, cut on a UTF-8 rune boundary (never inside a rune), followed by an ellipsis when cut.
// It imports nothing of ours, so every package may use it.
package textclip

import "unicode/utf8"

// Ellipsis marks text that was cut.
const Ellipsis = "…"

// String returns s when it is at most n bytes long; otherwise the longest prefix of s of at most
// n bytes that does not end inside a UTF-8 rune, followed by Ellipsis. A negative n counts as 0.
// The result is valid UTF-8 whenever s is.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:cut(s, n)] + Ellipsis
}

// Bytes is String for a byte slice; it copies only what it keeps.
func Bytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:cut(b, n)]) + Ellipsis
}

// cut returns the end of the kept prefix of s, which is longer than n bytes: n (0 when n is
// negative), moved back over at most utf8.UTFMax-1 continuation bytes so that no rune is split.
// Bytes that are not valid UTF-8 stay as they are, so cut never makes a prefix longer than n.
func cut[T string | []byte](s T, n int) int {
	if n <= 0 {
		return 0
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n
}
