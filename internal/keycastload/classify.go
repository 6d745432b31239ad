package keycastload

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/loadproof/loadproof/internal/keycastresult"
)

// Class is the bucket a request ends in. Every request ends in exactly one.
type Class uint8

// The classes, as the issue defines them.
const (
	Success     Class = iota // 2xx and a JSON object without a top-level "error"
	Auth                     // 401 or 403
	RateLimited              // 429
	Intentional              // 503 whose JSON "code" or "error" is "admission_rejected"
	Server                   // any other 5xx
	Client                   // any other 4xx
	Network                  // no status: connect, write or read failed
	Other                    // anything else: 2xx with an error or unparseable body, 1xx, 3xx
)

var classNames = [...]string{"success", "auth", "rate-limited", "intentional", "server", "client", "network", "other"}

// String names the class.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// admissionRejected is the machine-readable code of intentional shedding (keycast.CodeAdmissionRejected).
const admissionRejected = "admission_rejected"

// httpCauses holds "http_NNN" for every status, so a failure never allocates its cause.
var httpCauses = func() (t [600]string) {
	for i := 100; i < 600; i++ {
		t[i] = "http_" + strconv.Itoa(i)
	}
	return t
}()

// Classify buckets one response: its status and its body. It returns the class and, for failures,
// the cause recorded in failure_causes.
func Classify(status int, body []byte) (Class, string) {
	switch {
	case status >= 200 && status < 300:
		info := scanBody(body)
		switch {
		case !info.object:
			return Other, "bad_response_body"
		case info.hasError:
			return Other, "rpc_error"
		}
		return Success, ""
	case status == 401 || status == 403:
		return Auth, httpCause(status)
	case status == 429:
		return RateLimited, httpCause(status)
	case status == 503:
		info := scanBody(body)
		if info.object && (string(info.code) == admissionRejected || string(info.errText) == admissionRejected) {
			return Intentional, "http_503_admission_rejected"
		}
		return Server, httpCause(status)
	case status >= 500:
		return Server, httpCause(status)
	case status >= 400:
		return Client, httpCause(status)
	}
	return Other, httpCause(status)
}

func httpCause(status int) string {
	if status >= 100 && status < 600 {
		return httpCauses[status]
	}
	return "http_" + strconv.Itoa(status)
}

// NetworkCause names a transport error for failure_causes ("network_econnrefused", ...).
func NetworkCause(err error) string {
	var pe *protoError
	var ne net.Error
	var dnsErr *net.DNSError
	var recErr tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &pe):
		return "network_bad_response"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "network_econnrefused"
	case errors.Is(err, syscall.ECONNRESET):
		return "network_econnreset"
	case errors.Is(err, syscall.EPIPE):
		return "network_epipe"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "network_eaddrnotavail"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "network_too_many_open_files"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "network_unreachable"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "network_timeout"
	case errors.As(err, &dnsErr):
		return "network_dns"
	case errors.As(err, &recErr), errors.As(err, &certErr):
		return "network_tls"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "network_eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "network_timeout"
	}
	return "network_other"
}

// bodyInfo is what the judge learns from a response body without decoding it.
type bodyInfo struct {
	object   bool   // a well-formed JSON object (nested values are checked for balance only)
	hasError bool   // a top-level "error" member that is not null
	errText  []byte // the raw content of "error" when it is a string without escapes
	code     []byte // the raw content of "code" when it is a string without escapes
}

// scanBody looks at the top level of a JSON object: which members it has, and the string values of
// "error" and "code". Nested objects and arrays are skipped by matching brackets outside strings.
func scanBody(b []byte) bodyInfo {
	var info bodyInfo
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return info
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		info.object = skipWS(b, i+1) == len(b)
		return info
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return bodyInfo{}
		}
		ks, ke, esc, ok := scanString(b, i)
		if !ok {
			return bodyInfo{}
		}
		key := b[ks:ke]
		if esc {
			// A key written with escapes ("\u0065rror") is the same key to a JSON decoder.
			var k string
			if json.Unmarshal(b[ks-1:ke+1], &k) != nil {
				return bodyInfo{}
			}
			key = []byte(k)
		}
		i = skipWS(b, ke+1)
		if i >= len(b) || b[i] != ':' {
			return bodyInfo{}
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return bodyInfo{}
		}
		vs := i
		i, ok = skipValue(b, i)
		if !ok {
			return bodyInfo{}
		}
		val := b[vs:i]
		switch string(key) {
		case "error":
			if string(val) != "null" {
				info.hasError = true
				info.errText = rawString(val)
			}
		case "code":
			info.code = rawString(val)
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return bodyInfo{}
		}
		if b[i] == '}' {
			info.object = skipWS(b, i+1) == len(b)
			if !info.object {
				return bodyInfo{}
			}
			return info
		}
		if b[i] != ',' {
			return bodyInfo{}
		}
		i = skipWS(b, i+1)
	}
}

// rawString returns the content of a JSON string value without escapes, or nil.
func rawString(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	in := v[1 : len(v)-1]
	if indexByte(in, '\\') >= 0 {
		return nil
	}
	return in
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the string starting at b[i] == '"'. It returns the content's bounds [s, e) (e is
// the index of the closing quote) and whether the content has escapes.
func scanString(b []byte, i int) (s, e int, esc, ok bool) {
	s = i + 1
	for j := s; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return s, j, esc, true
		case c == '\\':
			esc = true
			j++
			if j >= len(b) {
				return 0, 0, false, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return 0, 0, false, false
				}
				for k := j + 1; k <= j+4; k++ {
					if _, ok := parseHex(b[k : k+1]); !ok {
						return 0, 0, false, false
					}
				}
				j += 4
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		}
	}
	return 0, 0, false, false
}

// skipValue skips one JSON value starting at b[i]; nested containers are matched by depth.
func skipValue(b []byte, i int) (int, bool) {
	switch c := b[i]; {
	case c == '"':
		_, e, _, ok := scanString(b, i)
		return e + 1, ok
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, e, _, ok := scanString(b, j)
				if !ok {
					return 0, false
				}
				j = e
			case '{', '[':
				depth++
				if depth > 512 {
					return 0, false
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		j := i + 1
		for j < len(b) && (('0' <= b[j] && b[j] <= '9') || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		if c == '-' && j == i+1 {
			return 0, false
		}
		return j, true
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// addClass counts one request of class c into counts.
func addClass(c *keycastresult.Counts, cl Class) {
	c.Total++
	if cl == Success {
		c.Success++
		return
	}
	c.Failed++
	switch cl {
	case Auth:
		c.Auth++
	case RateLimited:
		c.RateLimited++
	case Intentional:
		c.Intentional++
	case Server:
		c.Server++
	case Client:
		c.Client++
	case Network:
		c.Network++
	default:
		c.Other++
	}
}
