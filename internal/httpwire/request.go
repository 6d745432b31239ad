package httpwire

import "bytes"

// RequestHead is what ParseRequestHead reads from a request head. The byte slices alias the
// head passed in.
type RequestHead struct {
	Method []byte // a token
	Target []byte // origin form: "/" and what follows, up to the space before the version
	Minor  int    // HTTP/1.Minor, 0 or 1
	// ContentLength is the Content-Length value, or -1 when the head has none.
	ContentLength int64
	// Host, Authorization and ContentType are those headers' values, white space trimmed; empty
	// (nil) when absent or empty.
	Host, Authorization, ContentType []byte
	Origin                           bool // an Origin header is present (CORS answers carry an Allow-Origin)
	// Close says the connection ends after the answer: Connection: close, or HTTP/1.0 without
	// Connection: keep-alive.
	Close bool
}

// ParseRequestHead reads a request head, h being its bytes through the blank line ("\r\n\r\n"),
// when it is in the plain shape a fast path can answer without net/http:
//
//   - "METHOD /target HTTP/1.1" (or HTTP/1.0), the target in origin form with RFC 3986 path and
//     query bytes only (a '%' followed by two hex digits);
//   - every line ending in CRLF, header names tokens, values without control bytes but HTAB;
//   - Host (required in HTTP/1.1; bytes net/http's server accepts), Content-Length (1 to 18
//     digits), Authorization and Content-Type each at most once;
//   - Connection, when present, exactly "close" or "keep-alive";
//   - no Transfer-Encoding, TE, Trailer, Expect or Upgrade: behaviour only net/http has.
//
// Anything else is ok=false: the caller hands the request to net/http, which answers it (or
// refuses it) itself. What this accepts, net/http's server accepts with the same method, target,
// Host, Content-Length, Authorization, Content-Type and Close (FuzzParseRequestHead).
func ParseRequestHead(h []byte) (RequestHead, bool) {
	r := RequestHead{ContentLength: -1}
	if !bytes.HasSuffix(h, []byte("\r\n\r\n")) {
		return r, false
	}
	eol := bytes.IndexByte(h, '\n')
	if !r.requestLine(h[:eol+1]) {
		return r, false
	}
	h = h[eol+1 : len(h)-2] // the header lines, each ending in CRLF
	var haveCT, haveAuth, keepAlive bool
	for len(h) > 0 {
		i := bytes.IndexByte(h, '\n')
		if i < 1 || h[i-1] != '\r' {
			return r, false
		}
		line := h[:i-1]
		h = h[i+1:]
		name, v, ok := bytes.Cut(line, []byte{':'})
		if !ok || !isToken(name) || !validValue(v) {
			return r, false
		}
		v = TrimOWS(v)
		switch len(name) {
		case len("host"):
			if !EqualFold(name, "host") {
				break
			}
			if r.Host != nil || len(v) == 0 || !validHost(v) {
				return r, false
			}
			r.Host = v
		case len("content-length"):
			if !EqualFold(name, "content-length") {
				break
			}
			n, ok := ParseDecimal(v)
			if !ok || r.ContentLength >= 0 {
				return r, false
			}
			r.ContentLength = n
		case len("authorization"):
			if !EqualFold(name, "authorization") {
				break
			}
			if haveAuth {
				return r, false
			}
			r.Authorization, haveAuth = v, true
		case len("content-type"):
			if !EqualFold(name, "content-type") {
				break
			}
			if haveCT {
				return r, false
			}
			r.ContentType, haveCT = v, true
		case len("connection"):
			if !EqualFold(name, "connection") {
				break
			}
			switch {
			case EqualFold(v, "close"):
				r.Close = true
			case EqualFold(v, "keep-alive"):
				keepAlive = true
			default:
				return r, false
			}
		case len("origin"): // and expect
			switch {
			case EqualFold(name, "origin"):
				r.Origin = true
			case EqualFold(name, "expect"):
				return r, false
			}
		case len("upgrade"): // and trailer
			if EqualFold(name, "upgrade") || EqualFold(name, "trailer") {
				return r, false
			}
		case len("transfer-encoding"):
			if EqualFold(name, "transfer-encoding") {
				return r, false
			}
		case len("te"):
			if EqualFold(name, "te") {
				return r, false
			}
		}
	}
	if r.Minor == 0 && !keepAlive {
		r.Close = true
	}
	if r.Minor == 1 && r.Host == nil {
		return r, false
	}
	return r, true
}

// requestLine parses "METHOD SP target SP HTTP/1.x CRLF".
func (r *RequestHead) requestLine(line []byte) bool {
	line, ok := bytes.CutSuffix(line, []byte(" HTTP/1.1\r\n"))
	if ok {
		r.Minor = 1
	} else if line, ok = bytes.CutSuffix(line, []byte(" HTTP/1.0\r\n")); !ok {
		return false
	}
	method, target, ok := bytes.Cut(line, []byte{' '})
	if !ok || !isToken(method) || !validTarget(target) {
		return false
	}
	r.Method, r.Target = method, target
	return true
}

// targetTable holds the bytes of an origin-form target besides '%': RFC 3986 unreserved,
// sub-delims, ':', '@', '/' and '?'.
var targetTable = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~!$&'()*+,;=:@/?" {
		t[c] = true
	}
	return t
}()

func validTarget(b []byte) bool {
	if len(b) == 0 || b[0] != '/' {
		return false
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; !targetTable[c] {
			if c != '%' || i+2 >= len(b) {
				return false
			}
			if _, ok := HexDigit(b[i+1]); !ok {
				return false
			}
			if _, ok := HexDigit(b[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

func validHost(b []byte) bool {
	for _, c := range b {
		if !hostTable[c] {
			return false
		}
	}
	return true
}
