package linkkeys

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Version is the CSIL-RPC transport version carried in every envelope's "v".
const Version = 1

// ErrMalformedEnvelope is matched (errors.Is) by every envelope decode error
// from [DecodeRequest] and [DecodeResponse]. The server answers such a frame
// with [StatusMalformedEnvelope].
var ErrMalformedEnvelope = errors.New("linkkeys: malformed envelope")

// Request is a CSIL-RPC v1 request envelope.
type Request struct {
	Service, Op string
	// Payload is the CBOR encoding of the op's request type; on the wire it
	// is a byte string under tag 24. After DecodeRequest it aliases the
	// decoded buffer.
	Payload []byte
	ID      *uint64 // optional correlation id; never echoed by the server
	Auth    *string // optional API key
}

// Response is a CSIL-RPC v1 response envelope.
type Response struct {
	Status Status
	// Payload is the CBOR encoding of the op's response type; empty on error.
	// After DecodeResponse it aliases the decoded buffer.
	Payload []byte
	// Error is the human-readable message; "" when absent.
	Error string
	// HasError reports whether the "error" key is present. AppendResponse
	// writes the key when HasError is set or Error is non-empty.
	HasError bool
	// Variant is the CSIL output-arm name; omitted on the wire when "".
	Variant string
	ID      *uint64
}

// Fixed encodings of the envelope keys (text head plus bytes).
const (
	keyV       = "\x61v"
	keyID      = "\x62id"
	keyOp      = "\x62op"
	keyAuth    = "\x64auth"
	keyPayload = "\x67payload"
	keyService = "\x67service"
	keyError   = "\x65error"
	keyStatus  = "\x66status"
	keyVariant = "\x67variant"
)

// AppendRequest appends the deterministic CBOR encoding of r to dst
// (key order v, id, op, auth, payload, service; v = 1). It does not allocate
// when dst has room.
func AppendRequest(dst []byte, r *Request) []byte {
	n := byte(4)
	if r.ID != nil {
		n++
	}
	if r.Auth != nil {
		n++
	}
	dst = append(dst, majMap|n)
	dst = append(dst, keyV...)
	dst = append(dst, Version)
	if r.ID != nil {
		dst = append(dst, keyID...)
		dst = appendHead(dst, majUint, *r.ID)
	}
	dst = append(dst, keyOp...)
	dst = appendText(dst, r.Op)
	if r.Auth != nil {
		dst = append(dst, keyAuth...)
		dst = appendText(dst, *r.Auth)
	}
	dst = append(dst, keyPayload...)
	dst = append(dst, majTag|24, tagEncodedCBOR)
	dst = appendHead(dst, majBytes, uint64(len(r.Payload)))
	dst = append(dst, r.Payload...)
	dst = append(dst, keyService...)
	return appendText(dst, r.Service)
}

// AppendResponse appends the deterministic CBOR encoding of r to dst
// (key order v, id, error, status, payload, variant; v = 1). It does not
// allocate when dst has room.
func AppendResponse(dst []byte, r *Response) []byte {
	hasErr := r.HasError || r.Error != ""
	n := byte(3)
	if r.ID != nil {
		n++
	}
	if hasErr {
		n++
	}
	if r.Variant != "" {
		n++
	}
	dst = append(dst, majMap|n)
	dst = append(dst, keyV...)
	dst = append(dst, Version)
	if r.ID != nil {
		dst = append(dst, keyID...)
		dst = appendHead(dst, majUint, *r.ID)
	}
	if hasErr {
		dst = append(dst, keyError...)
		dst = appendText(dst, r.Error)
	}
	dst = append(dst, keyStatus...)
	dst = appendHead(dst, majUint, uint64(r.Status))
	dst = append(dst, keyPayload...)
	dst = append(dst, majTag|24, tagEncodedCBOR)
	dst = appendHead(dst, majBytes, uint64(len(r.Payload)))
	dst = append(dst, r.Payload...)
	if r.Variant != "" {
		dst = append(dst, keyVariant...)
		dst = appendText(dst, r.Variant)
	}
	return dst
}

// OKResponse returns the encoded status-0 response carrying payload.
func OKResponse(payload []byte) []byte {
	return AppendResponse(make([]byte, 0, 32+len(payload)), &Response{Payload: payload})
}

// ErrorResponse returns the encoded error response with status st, message
// msg and an empty payload (d8 18 40), as the reference server sends it.
func ErrorResponse(st Status, msg string) []byte {
	return AppendResponse(make([]byte, 0, 40+len(msg)), &Response{Status: st, Error: msg, HasError: true})
}

// RateLimitedMessage is the error text of a [StatusUnavailable] rate-limit
// response: "Rate limited. Try again in N seconds".
func RateLimitedMessage(retryAfterSecs uint64) string {
	return "Rate limited. Try again in " + strconv.FormatUint(retryAfterSecs, 10) + " seconds"
}

// UnknownOpMessage is the error text of a [StatusUnknownServiceOrOp]
// response: "Unknown service/operation: S/O".
func UnknownOpMessage(service, op string) string {
	return "Unknown service/operation: " + service + "/" + op
}

func malformed(kind, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformedEnvelope, kind, fmt.Sprintf(format, args...))
}

// Bits for the keys seen while decoding.
const (
	seenV = 1 << iota
	seenService
	seenOp
	seenPayload
	seenID
	seenAuth
	seenStatus
	seenError
	seenVariant
)

// envelopeMap reads the top-level map head and returns its pair count.
func envelopeMap(d *decoder, kind string) (uint64, error) {
	if len(d.b) == 0 {
		return 0, malformed(kind, "empty frame, want a CBOR map")
	}
	major, n, err := d.head()
	if err != nil {
		return 0, malformed(kind, "%v", err)
	}
	if major != majMap {
		return 0, malformed(kind, "top-level item is CBOR major type %d, want a map (5)", major>>5)
	}
	if n > uint64(len(d.b)-d.off)/2 {
		return 0, malformed(kind, "map of %d pairs cannot fit in %d bytes", n, len(d.b)-d.off)
	}
	return n, nil
}

// nextKey reads a map key. It returns ok=false (after skipping the pair) for
// keys that are not text strings, which the envelope grammar ignores.
func nextKey(d *decoder) (key []byte, ok bool, err error) {
	start := d.off
	major, n, err := d.head()
	if err != nil {
		return nil, false, err
	}
	if major != majText {
		d.off = start
		if err := d.skip(); err != nil {
			return nil, false, err
		}
		return nil, false, d.skip()
	}
	key, err = d.take(n)
	return key, true, err
}

func readUint(d *decoder, key string) (uint64, error) {
	major, n, err := d.head()
	if err != nil {
		return 0, err
	}
	switch major {
	case majUint:
		return n, nil
	case majNint:
		return 0, fmt.Errorf("key %q is a negative integer, want an unsigned integer", key)
	}
	return 0, fmt.Errorf("key %q has CBOR major type %d, want an unsigned integer", key, major>>5)
}

// readName reads a text value that is usually one of the well-known names,
// which need neither UTF-8 validation nor a new string.
func readName(d *decoder, key string) (string, error) {
	major, n, err := d.head()
	if err != nil {
		return "", err
	}
	if major != majText {
		return "", fmt.Errorf("key %q has CBOR major type %d, want a text string", key, major>>5)
	}
	s, err := d.take(n)
	if err != nil {
		return "", err
	}
	if name, ok := knownName(s); ok {
		return name, nil
	}
	if !utf8.Valid(s) {
		return "", fmt.Errorf("key %q is not valid UTF-8", key)
	}
	return string(s), nil
}

func readText(d *decoder, key string) ([]byte, error) {
	major, n, err := d.head()
	if err != nil {
		return nil, err
	}
	if major != majText {
		return nil, fmt.Errorf("key %q has CBOR major type %d, want a text string", key, major>>5)
	}
	s, err := d.take(n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(s) {
		return nil, fmt.Errorf("key %q is not valid UTF-8", key)
	}
	return s, nil
}

func readPayload(d *decoder) ([]byte, error) {
	major, n, err := d.head()
	if err != nil {
		return nil, err
	}
	if major != majTag || n != tagEncodedCBOR {
		return nil, errors.New(`key "payload" is not a tag-24 (encoded CBOR) item`)
	}
	major, n, err = d.head()
	if err != nil {
		return nil, err
	}
	if major != majBytes {
		return nil, fmt.Errorf(`key "payload": tag 24 wraps CBOR major type %d, want a byte string`, major>>5)
	}
	return d.take(n)
}

func checkSeen(seen *uint, bit uint, key string) error {
	if *seen&bit != 0 {
		return fmt.Errorf("duplicate key %q", key)
	}
	*seen |= bit
	return nil
}

// DecodeRequest decodes a request envelope. Keys may come in any order;
// unknown keys (and non-text keys) are ignored; v must be 1; service, op and
// payload are required; known keys of the wrong type, duplicate known keys
// and trailing bytes are rejected. Every error matches ErrMalformedEnvelope.
// Payload aliases b.
func DecodeRequest(b []byte) (Request, error) {
	const kind = "request"
	var r Request
	d := decoder{b: b}
	n, err := envelopeMap(&d, kind)
	if err != nil {
		return Request{}, err
	}
	var seen uint
	for ; n > 0; n-- {
		key, ok, err := nextKey(&d)
		if err != nil {
			return Request{}, malformed(kind, "%v", err)
		}
		if !ok {
			continue
		}
		switch string(key) {
		case "v":
			if err = checkSeen(&seen, seenV, "v"); err == nil {
				var v uint64
				if v, err = readUint(&d, "v"); err == nil && v != Version {
					err = fmt.Errorf("unsupported transport version %d, want %d", v, Version)
				}
			}
		case "service":
			if err = checkSeen(&seen, seenService, "service"); err == nil {
				r.Service, err = readName(&d, "service")
			}
		case "op":
			if err = checkSeen(&seen, seenOp, "op"); err == nil {
				r.Op, err = readName(&d, "op")
			}
		case "payload":
			if err = checkSeen(&seen, seenPayload, "payload"); err == nil {
				r.Payload, err = readPayload(&d)
			}
		case "id":
			if err = checkSeen(&seen, seenID, "id"); err == nil {
				var id uint64
				if id, err = readUint(&d, "id"); err == nil {
					r.ID = &id
				}
			}
		case "auth":
			if err = checkSeen(&seen, seenAuth, "auth"); err == nil {
				var s []byte
				if s, err = readText(&d, "auth"); err == nil {
					a := string(s)
					r.Auth = &a
				}
			}
		default:
			err = d.skip()
		}
		if err != nil {
			return Request{}, malformed(kind, "%v", err)
		}
	}
	if d.off != len(b) {
		return Request{}, malformed(kind, "%d trailing bytes after the envelope map", len(b)-d.off)
	}
	switch {
	case seen&seenV == 0:
		return Request{}, malformed(kind, `missing required key "v"`)
	case seen&seenService == 0:
		return Request{}, malformed(kind, `missing required key "service"`)
	case seen&seenOp == 0:
		return Request{}, malformed(kind, `missing required key "op"`)
	case seen&seenPayload == 0:
		return Request{}, malformed(kind, `missing required key "payload"`)
	}
	return r, nil
}

// DecodeResponse decodes a response envelope with the same rules as
// DecodeRequest. v and status are required; a missing payload decodes as
// empty. Payload aliases b.
func DecodeResponse(b []byte) (Response, error) {
	const kind = "response"
	var r Response
	d := decoder{b: b}
	n, err := envelopeMap(&d, kind)
	if err != nil {
		return Response{}, err
	}
	var seen uint
	for ; n > 0; n-- {
		key, ok, err := nextKey(&d)
		if err != nil {
			return Response{}, malformed(kind, "%v", err)
		}
		if !ok {
			continue
		}
		switch string(key) {
		case "v":
			if err = checkSeen(&seen, seenV, "v"); err == nil {
				var v uint64
				if v, err = readUint(&d, "v"); err == nil && v != Version {
					err = fmt.Errorf("unsupported transport version %d, want %d", v, Version)
				}
			}
		case "status":
			if err = checkSeen(&seen, seenStatus, "status"); err == nil {
				var st uint64
				if st, err = readUint(&d, "status"); err == nil {
					r.Status = Status(st)
				}
			}
		case "payload":
			if err = checkSeen(&seen, seenPayload, "payload"); err == nil {
				r.Payload, err = readPayload(&d)
			}
		case "error":
			if err = checkSeen(&seen, seenError, "error"); err == nil {
				var s []byte
				if s, err = readText(&d, "error"); err == nil {
					r.Error = internMessage(s)
					r.HasError = true
				}
			}
		case "variant":
			if err = checkSeen(&seen, seenVariant, "variant"); err == nil {
				r.Variant, err = readName(&d, "variant")
			}
		case "id":
			if err = checkSeen(&seen, seenID, "id"); err == nil {
				var id uint64
				if id, err = readUint(&d, "id"); err == nil {
					r.ID = &id
				}
			}
		default:
			err = d.skip()
		}
		if err != nil {
			return Response{}, malformed(kind, "%v", err)
		}
	}
	if d.off != len(b) {
		return Response{}, malformed(kind, "%d trailing bytes after the envelope map", len(b)-d.off)
	}
	switch {
	case seen&seenV == 0:
		return Response{}, malformed(kind, `missing required key "v"`)
	case seen&seenStatus == 0:
		return Response{}, malformed(kind, `missing required key "status"`)
	}
	return r, nil
}

// knownName returns well-known service, op and variant names without
// allocating; the compiler does not allocate for string(b) in a switch.
func knownName(b []byte) (string, bool) {
	switch string(b) {
	case "DomainKeys":
		return "DomainKeys", true
	case "get-domain-keys":
		return "get-domain-keys", true
	case "get-revocations":
		return "get-revocations", true
	case "Hello":
		return "Hello", true
	case "hello":
		return "hello", true
	case "Ops":
		return "Ops", true
	case "healthcheck":
		return "healthcheck", true
	case "readiness":
		return "readiness", true
	case "Handshake":
		return "Handshake", true
	case "handshake":
		return "handshake", true
	case "GetDomainKeysResponse":
		return "GetDomainKeysResponse", true
	}
	return "", false
}

// internMessage avoids allocating for the rate-limit message, which a
// client under load may see on most responses.
func internMessage(b []byte) string {
	switch string(b) {
	case "Rate limited. Try again in 1 seconds":
		return "Rate limited. Try again in 1 seconds"
	}
	return string(b)
}
