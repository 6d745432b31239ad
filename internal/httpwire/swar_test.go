package httpwire

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestWordTests checks the word-at-a-time tests against byte loops, on words built around the
// bytes where borrows and boundaries matter, and on random words.
func TestWordTests(t *testing.T) {
	edges := []byte{0, 1, 0x09, 0x1f, 0x20, 0x21, '"', '\\', 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(x uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], x)
		var less, quote, del bool
		for _, c := range b {
			less = less || c < 0x20
			quote = quote || c == '"'
			del = del || c == 0x7f
		}
		if hasLess(x, 0x20) != less || hasByte(x, '"') != quote || hasByte(x, 0x7f) != del {
			t.Fatalf("% x: hasLess %v (want %v), hasByte '\"' %v (want %v), hasByte DEL %v (want %v)",
				b, hasLess(x, 0x20), less, hasByte(x, '"'), quote, hasByte(x, 0x7f), del)
		}
	}
	for range 200000 {
		var b [8]byte
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = edges[rng.IntN(len(edges))]
			} else {
				b[i] = byte(rng.Uint32())
			}
		}
		check(binary.LittleEndian.Uint64(b[:]))
	}
}

// TestPlainRuns checks that the runs stop at the first word holding a byte the byte loops must
// see, and never skip one.
func TestPlainRuns(t *testing.T) {
	b := []byte(`0123456789abcdef"0123456789abcdef\n01234567` + "\x7f" + "01234567\t0")
	for j := range b {
		s := plainStringRun(b, j)
		for k := j; k < s; k++ {
			if b[k] == '"' || b[k] == '\\' || b[k] < 0x20 {
				t.Fatalf("plainStringRun(%d) = %d skips byte %d (%q)", j, s, k, b[k])
			}
		}
		if (s-j)%8 != 0 || (s+8 <= len(b) && !hasLess(binary.LittleEndian.Uint64(b[s:]), 0x20) &&
			!hasByte(binary.LittleEndian.Uint64(b[s:]), '"') && !hasByte(binary.LittleEndian.Uint64(b[s:]), '\\')) {
			t.Fatalf("plainStringRun(%d) = %d stops early", j, s)
		}
		v := plainValueRun(b, j)
		for k := j; k < v; k++ {
			if b[k] < 0x20 || b[k] == 0x7f {
				t.Fatalf("plainValueRun(%d) = %d skips byte %d (%q)", j, v, k, b[k])
			}
		}
	}
}
