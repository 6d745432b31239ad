package httpwire

import "encoding/binary"

// Word-at-a-time byte tests ("SIMD within a register"): the scanners below skip eight plain bytes
// per step and fall back to their byte loops at the first word that holds a byte they must look
// at. Each test is exact about the word as a whole (a borrow can only follow a byte that matches),
// and the scanners' results do not depend on where a run stops, only on the byte loops
// (TestWordTests, FuzzSkipValue, FuzzReadResponse).

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess reports whether some byte of x is below n (n <= 0x80).
func hasLess(x uint64, n byte) bool { return (x-ones*uint64(n))&^x&highs != 0 }

// hasByte reports whether some byte of x is c.
func hasByte(x uint64, c byte) bool {
	v := x ^ (ones * uint64(c))
	return (v-ones)&^v&highs != 0
}

// plainStringRun returns the index of the first word-aligned run end at or after j in b: every
// byte of b[j:end] is a JSON string byte that needs no look (not '"', not '\\', not a control
// byte), and end is j plus a multiple of eight.
func plainStringRun(b []byte, j int) int {
	for j+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[j:])
		if hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
			break
		}
		j += 8
	}
	return j
}

// plainValueRun is plainStringRun for header values: the bytes skipped are neither control bytes
// (HTAB included, which the byte loop then allows) nor DEL.
func plainValueRun(b []byte, j int) int {
	for j+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[j:])
		if hasLess(x, 0x20) || hasByte(x, 0x7f) {
			break
		}
		j += 8
	}
	return j
}
