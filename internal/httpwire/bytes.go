package httpwire

import "bytes"

// Byte classes of RFC 9110 (section 5.6.2 tokens, section 5.5 field values).
var (
	tokenTable = func() (t [256]bool) {
		for c := 'a'; c <= 'z'; c++ {
			t[c] = true
		}
		for c := 'A'; c <= 'Z'; c++ {
			t[c] = true
		}
		for c := '0'; c <= '9'; c++ {
			t[c] = true
		}
		for _, c := range "!#$%&'*+-.^_`|~" {
			t[c] = true
		}
		return t
	}()
	// valueTable is net/textproto's validHeaderValueByte: SP, HTAB, VCHAR and obs-text.
	valueTable = func() (t [256]bool) {
		for c := 0x20; c < 0x7f; c++ {
			t[c] = true
		}
		for c := 0x80; c < 0x100; c++ {
			t[c] = true
		}
		t['\t'] = true
		return t
	}()
	// hostTable is the byte set net/http's server accepts in a Host header
	// (golang.org/x/net/http/httpguts.ValidHostHeader).
	hostTable = func() (t [256]bool) {
		for c := 'a'; c <= 'z'; c++ {
			t[c] = true
		}
		for c := 'A'; c <= 'Z'; c++ {
			t[c] = true
		}
		for c := '0'; c <= '9'; c++ {
			t[c] = true
		}
		for _, c := range "!$%&'()*+,-.:;=[]_~" {
			t[c] = true
		}
		return t
	}()
)

// IsTokenChar reports whether c may appear in an RFC 9110 token (a header name, a method).
func IsTokenChar(c byte) bool { return tokenTable[c] }

// isToken reports whether b is a non-empty token.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tokenTable[c] {
			return false
		}
	}
	return true
}

// validValue reports whether every byte of a header value is allowed (no control byte but HTAB).
func validValue(b []byte) bool {
	for _, c := range b {
		if !valueTable[c] {
			return false
		}
	}
	return true
}

// EqualFold reports whether b equals lower, a lower-case ASCII string, ignoring ASCII case.
// bytes.EqualFold is not used because it folds Unicode too ("\u212a" is "k" to it): a header
// name or token written with a Kelvin sign is not "keep-alive" to net/http, and must not be here.
func EqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// TrimOWS removes the optional white space (SP and HTAB) around a header value.
func TrimOWS(b []byte) []byte { return bytes.Trim(b, " \t") }

// HasToken reports whether the comma-separated header value v lists the token lower (a
// lower-case ASCII string), ignoring case and white space, as Connection: close is found.
func HasToken(v []byte, lower string) bool {
	for len(v) > 0 {
		var tok []byte
		tok, v, _ = bytes.Cut(v, []byte{','})
		if EqualFold(TrimOWS(tok), lower) {
			return true
		}
	}
	return false
}

// ParseDecimal parses 1 to 18 ASCII digits (RFC 9110's 1*DIGIT, as Content-Length is written).
// strconv.ParseInt is not used: it takes a string (a conversion that allocates here) and accepts
// a sign.
func ParseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// HexDigit returns the value of one hexadecimal digit.
func HexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseHex parses 1 to 16 hexadecimal digits, as net/http reads a chunk size.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		d, ok := HexDigit(c)
		if !ok {
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	return n, true
}

// IsJSONMediaType reports whether a Content-Type value is application/json or
// application/*+json, parameters ignored.
func IsJSONMediaType(v []byte) bool {
	if i := bytes.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = TrimOWS(v)
	if EqualFold(v, "application/json") {
		return true
	}
	const app = "application/"
	return len(v) > len("application/+json") && EqualFold(v[:len(app)], app) && EqualFold(v[len(v)-5:], "+json")
}
