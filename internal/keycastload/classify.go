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

	"github.com/loadproof/loadproof/internal/httpwire"
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
	var me *httpwire.MalformedError
	var ne net.Error
	var dnsErr *net.DNSError
	var recErr tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &me), malformedStd(err):
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

// bodyInfo is what the judge learns from a response body.
type bodyInfo struct {
	object   bool   // a JSON object
	hasError bool   // a top-level "error" member that is not null
	errText  []byte // the value of "error" when it is a string
	code     []byte // the value of "code" when it is a string
}

// scanBody judges a response body: a single pass over a JSON object's top level with httpwire's
// scanners (every value checked against the grammar, none decoded), which answers for the plain
// bodies servers send. Anything it is not sure of (escapes in a key or in the "error" and
// "code" strings, either member twice, nesting deeper than httpwire.MaxDepth, any syntax error
// after the opening brace) is judged by encoding/json instead (scanBodyJSON), so the two
// always agree (FuzzScanBody).
func scanBody(b []byte) bodyInfo {
	info, sure := scanBodyFast(b)
	if !sure {
		return scanBodyJSON(b)
	}
	return info
}

func scanBodyFast(b []byte) (info bodyInfo, sure bool) {
	o, ok := httpwire.OpenObject(b, 0)
	if !ok {
		return bodyInfo{}, true // not an object, whatever follows
	}
	var seenError, seenCode bool
	for {
		key, esc, more, ok := o.Next()
		if !ok || esc {
			return bodyInfo{}, false
		}
		if !more {
			break
		}
		start := o.Pos()
		if !o.Skip() {
			return bodyInfo{}, false
		}
		val := b[start:o.Pos()]
		switch string(key) {
		case "error":
			if seenError {
				return bodyInfo{}, false
			}
			seenError = true
			if string(val) != "null" {
				info.hasError = true
				if info.errText, ok = plainValue(val); !ok {
					return bodyInfo{}, false
				}
			}
		case "code":
			if seenCode {
				return bodyInfo{}, false
			}
			seenCode = true
			if info.code, ok = plainValue(val); !ok {
				return bodyInfo{}, false
			}
		}
	}
	if httpwire.SkipWS(b, o.Pos()) != len(b) {
		return bodyInfo{}, false
	}
	info.object = true
	return info, true
}

// plainValue returns the content of a plain string value, nil for a value that is not a string;
// ok is false for a string whose bytes are not its value (escapes, bytes that are not UTF-8).
func plainValue(v []byte) ([]byte, bool) {
	if v[0] != '"' {
		return nil, true
	}
	s, _, ok := httpwire.PlainString(v, 0)
	return s, ok
}

// scanBodyJSON is scanBody by encoding/json: the authority for whatever scanBodyFast is not
// sure of. Of a member written twice the last counts, as encoding/json decides.
func scanBodyJSON(b []byte) bodyInfo {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return bodyInfo{}
	}
	info := bodyInfo{object: true}
	str := func(raw json.RawMessage) []byte {
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return []byte(s)
	}
	if e, ok := m["error"]; ok && string(e) != "null" {
		info.hasError, info.errText = true, str(e)
	}
	if c, ok := m["code"]; ok {
		info.code = str(c)
	}
	return info
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
