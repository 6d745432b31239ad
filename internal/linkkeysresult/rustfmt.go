package linkkeysresult

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The seed's lines are printed by Rust's formatting machinery. These functions reproduce the parts
// its lines use, so our lines match byte for byte.

// FormatRustDuration renders d as Rust's `{:?}` renders a std::time::Duration: the largest unit of
// s, ms, µs (U+00B5) and ns in which the value is at least 1, with every significant fractional digit
// and no trailing zeros: 34.612345678s, 1.27s, 850.5ms, 12µs, 0ns. Negative durations (which Rust
// cannot hold) render as 0ns.
func FormatRustDuration(d time.Duration) string {
	if d <= 0 {
		return "0ns"
	}
	ns := uint64(d)
	secs, nanos := ns/1e9, ns%1e9
	switch {
	case secs > 0:
		return rustDecimal(secs, nanos, 1e8, "s")
	case nanos >= 1e6:
		return rustDecimal(nanos/1e6, nanos%1e6, 1e5, "ms")
	case nanos >= 1e3:
		return rustDecimal(nanos/1e3, nanos%1e3, 1e2, "µs")
	default:
		return strconv.FormatUint(nanos, 10) + "ns"
	}
}

// rustDecimal writes integer.fraction where fraction/(divisor*10) is the fractional value, digits
// until the remainder is zero (at most nine), as Rust's Duration Debug does without a precision.
func rustDecimal(integer, frac, divisor uint64, unit string) string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(integer, 10))
	if frac > 0 {
		b.WriteByte('.')
		for pos := 0; frac > 0 && pos < 9 && divisor > 0; pos++ {
			b.WriteByte(byte('0' + frac/divisor))
			frac %= divisor
			divisor /= 10
		}
	}
	b.WriteString(unit)
	return b.String()
}

// FormatRustMap renders a string-to-count map as Rust's `{:?}` renders a map: {"a": 1, "b": 2}, and
// {} when empty. The seed's map is a HashMap, whose order is random per process; we sort the keys so
// the line is stable and testable.
func FormatRustMap(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(RustDebugString(k))
		b.WriteString(": ")
		b.WriteString(strconv.FormatInt(m[k], 10))
	}
	b.WriteByte('}')
	return b.String()
}

// RustDebugString quotes s as Rust's `{:?}` quotes a str: double quotes, with \" \\ \n \r \t \0
// escaped and other non-printable characters as \u{hex}. Printability follows Go's unicode.IsPrint,
// which agrees with Rust's table for everything these tools print.
func RustDebugString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case 0:
			b.WriteString(`\0`)
		default:
			if r == unicode.ReplacementChar || unicode.IsPrint(r) || r == ' ' {
				b.WriteRune(r)
			} else {
				b.WriteString(`\u{`)
				b.WriteString(strconv.FormatInt(int64(r), 16))
				b.WriteByte('}')
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FormatRustFloat1 renders f as Rust's `{:.1}`: one decimal, correctly rounded, with Rust's
// spellings of the special values (inf, -inf, NaN).
func FormatRustFloat1(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// RustRate is the seed's rate: count / duration_secs as f64, so a zero duration gives NaN (0/0) or
// inf, as Rust prints it.
func RustRate(count int64, durationSecs uint64) float64 {
	return float64(count) / float64(durationSecs)
}
