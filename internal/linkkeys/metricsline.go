package linkkeys

// The METRICS line of the load-test server (docs/protocol-linkkeys.md,
// METRICS line), written by linkkeysserver and read by linkkeysload and by
// the --processes parent.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// MetricsPrefix starts every METRICS line: the literal word and one space.
const MetricsPrefix = "METRICS "

// MaxMetricsLineBytes bounds the METRICS lines [ParseMetricsLine] accepts; a
// real line is about 600 bytes.
const MaxMetricsLineBytes = 64 << 10

// ErrNotMetricsLine is returned (wrapped) by [ParseMetricsLine] for a line
// that does not start with [MetricsPrefix], so that a reader of a server's
// mixed stdout can skip other lines with errors.Is.
var ErrNotMetricsLine = errors.New("linkkeys: not a METRICS line")

// MetricsLine is one METRICS line: the 15 upstream fields in their order,
// then the fields the loadproof server appends after process_rss_bytes (nil
// when a line lacks them, as upstream Rust lines do), then any other numeric
// fields a server appends.
type MetricsLine struct {
	// Label is "running" or "final".
	Label string `json:"label"`
	// ElapsedSecs is the time since the server loop started.
	ElapsedSecs float64 `json:"elapsed_secs"`
	// AcceptedConnections counts every accept().
	AcceptedConnections uint64 `json:"accepted_connections"`
	// OpenConnections is the number of sockets from accept to close.
	OpenConnections uint64 `json:"open_connections"`
	// EstablishedConnections is the number of connections past the TLS
	// handshake (a gauge).
	EstablishedConnections uint64 `json:"established_connections"`
	// HandshakesInProgress counts connections waiting for a handshake slot
	// or inside the TLS handshake.
	HandshakesInProgress uint64 `json:"handshakes_in_progress"`
	// HandshakeTimeouts counts handshakes that ran out of time.
	HandshakeTimeouts uint64 `json:"handshake_timeouts"`
	// HandshakeRejections counts failed TLS handshakes.
	HandshakeRejections uint64 `json:"handshake_rejections"`
	// ShedConnectionLimit counts connections refused by TCP_MAX_CONNECTIONS.
	ShedConnectionLimit uint64 `json:"shed_connection_limit"`
	// ShedHandshakePerSource counts connections refused by a source's
	// handshake bucket.
	ShedHandshakePerSource uint64 `json:"shed_handshake_per_source"`
	// ShedHandshakeOverflow counts connections refused by the shared
	// overflow bucket.
	ShedHandshakeOverflow uint64 `json:"shed_handshake_overflow"`
	// ShedHandshakeGlobal counts connections refused by the global
	// handshake bucket.
	ShedHandshakeGlobal uint64 `json:"shed_handshake_global"`
	// FramesProcessed counts dispatched frames.
	FramesProcessed uint64 `json:"frames_processed"`
	// FrameBufferBytes is the bytes of frame bodies announced and not yet
	// dispatched.
	FrameBufferBytes uint64 `json:"frame_buffer_bytes"`
	// ProcessRSSBytes is the process's resident memory; nil when the server
	// could not read it (null on the line).
	ProcessRSSBytes *uint64 `json:"process_rss_bytes"`

	// EstablishedTotal counts every completed handshake (a counter); nil
	// when the line does not carry it.
	EstablishedTotal *uint64 `json:"established_total,omitempty"`
	// ParkedConnections is the established connections currently parked;
	// nil when the line does not carry it.
	ParkedConnections *uint64 `json:"parked_connections,omitempty"`
	// RateLimitedResponses counts status-7 answers of the public-read gate;
	// nil when the line does not carry it.
	RateLimitedResponses *uint64 `json:"rate_limited_responses,omitempty"`

	// Extra holds the other fields a server appends, when they are finite
	// numbers (fields of other types are skipped). Keys that name one of the
	// fields above are never used.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// upstreamMetricsFields are the 15 upstream fields in their order.
var upstreamMetricsFields = [...]string{
	"label", "elapsed_secs", "accepted_connections", "open_connections", "established_connections",
	"handshakes_in_progress", "handshake_timeouts", "handshake_rejections", "shed_connection_limit",
	"shed_handshake_per_source", "shed_handshake_overflow", "shed_handshake_global", "frames_processed",
	"frame_buffer_bytes", "process_rss_bytes",
}

// appendedMetricsFields are the fields the loadproof server prints after
// process_rss_bytes, in that order.
var appendedMetricsFields = [...]string{"established_total", "parked_connections", "rate_limited_responses"}

// metricsFieldIndex maps each named field to its position: 0-14 upstream,
// 15-17 appended.
var metricsFieldIndex = func() map[string]int {
	m := make(map[string]int, len(upstreamMetricsFields)+len(appendedMetricsFields))
	for i, f := range upstreamMetricsFields {
		m[f] = i
	}
	for i, f := range appendedMetricsFields {
		m[f] = len(upstreamMetricsFields) + i
	}
	return m
}()

// counter returns the upstream whole-number field called name, or nil.
func (m *MetricsLine) counter(name string) *uint64 {
	switch name {
	case "accepted_connections":
		return &m.AcceptedConnections
	case "open_connections":
		return &m.OpenConnections
	case "established_connections":
		return &m.EstablishedConnections
	case "handshakes_in_progress":
		return &m.HandshakesInProgress
	case "handshake_timeouts":
		return &m.HandshakeTimeouts
	case "handshake_rejections":
		return &m.HandshakeRejections
	case "shed_connection_limit":
		return &m.ShedConnectionLimit
	case "shed_handshake_per_source":
		return &m.ShedHandshakePerSource
	case "shed_handshake_overflow":
		return &m.ShedHandshakeOverflow
	case "shed_handshake_global":
		return &m.ShedHandshakeGlobal
	case "frames_processed":
		return &m.FramesProcessed
	case "frame_buffer_bytes":
		return &m.FrameBufferBytes
	}
	return nil
}

// optional returns the appended field called name, or nil.
func (m *MetricsLine) optional(name string) **uint64 {
	switch name {
	case "process_rss_bytes":
		return &m.ProcessRSSBytes
	case "established_total":
		return &m.EstablishedTotal
	case "parked_connections":
		return &m.ParkedConnections
	case "rate_limited_responses":
		return &m.RateLimitedResponses
	}
	return nil
}

// IsMetricsCounter reports whether name is a whole-number field of the
// METRICS line: one of the upstream counters and gauges, process_rss_bytes or
// one of the appended fields (not label or elapsed_secs).
func IsMetricsCounter(name string) bool {
	i, ok := metricsFieldIndex[name]
	return ok && i >= 2
}

// SetCounter sets the whole-number field called name (see
// [IsMetricsCounter]) and reports whether there is such a field.
func (m *MetricsLine) SetCounter(name string, v uint64) bool {
	if p := m.counter(name); p != nil {
		*p = v
		return true
	}
	if p := m.optional(name); p != nil {
		*p = &v
		return true
	}
	return false
}

// AppendMetricsLine appends the METRICS line of m to dst, without a newline:
// [MetricsPrefix] and compact JSON with the 15 upstream fields in their
// order, then established_total, parked_connections and
// rate_limited_responses where set, then the Extra fields in key order.
// elapsed_secs is formatted like serde_json formats an f64
// ([AppendSerdeFloat]); process_rss_bytes is null when nil.
func AppendMetricsLine(dst []byte, m MetricsLine) []byte {
	dst = append(dst, MetricsPrefix...)
	dst = append(dst, `{"label":`...)
	dst = appendJSONString(dst, m.Label)
	dst = append(dst, `,"elapsed_secs":`...)
	dst = AppendSerdeFloat(dst, m.ElapsedSecs)
	for _, name := range upstreamMetricsFields[2:14] {
		dst = appendUintField(dst, name, *m.counter(name))
	}
	if m.ProcessRSSBytes != nil {
		dst = appendUintField(dst, "process_rss_bytes", *m.ProcessRSSBytes)
	} else {
		dst = append(dst, `,"process_rss_bytes":null`...)
	}
	for _, name := range appendedMetricsFields {
		if p := *m.optional(name); p != nil {
			dst = appendUintField(dst, name, *p)
		}
	}
	if len(m.Extra) > 0 {
		keys := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			if _, named := metricsFieldIndex[k]; !named {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			dst = append(dst, ',')
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if v := m.Extra[k]; math.IsNaN(v) || math.IsInf(v, 0) {
				dst = append(dst, "null"...)
			} else {
				dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
			}
		}
	}
	return append(dst, '}')
}

func appendUintField(dst []byte, name string, v uint64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return strconv.AppendUint(dst, v, 10)
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// AppendSerdeFloat appends f the way serde_json (ryu) prints an f64: the
// shortest digits that round-trip, laid out as an integer with ".0"
// ("5.0", "120.0"), a plain decimal ("0.25", "0.00012") or scientific
// notation ("1e-7", "1.5e16", "1e21") when the decimal point would sit more
// than 16 digits left or right of the digits. NaN and infinities, which
// serde_json writes as null, are written as null.
func AppendSerdeFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with -1 precision gives the shortest round-trip digits.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, expPart, _ := bytes.Cut(e, []byte{'e'})
	exp, _ := strconv.Atoi(string(expPart))
	var digitBuf [17]byte
	digits := digitBuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	length := len(digits)
	kk := exp + 1 // position of the decimal point relative to the digits
	k := kk - length
	switch {
	case k >= 0 && kk <= 16:
		dst = append(dst, digits...)
		for range k {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	case kk > 0 && kk <= 16:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		dst = append(dst, digits[kk:]...)
	case kk > -5 && kk <= 0:
		dst = append(dst, '0', '.')
		for range -kk {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case length == 1:
		dst = append(dst, digits[0], 'e')
		dst = strconv.AppendInt(dst, int64(kk-1), 10)
	default:
		dst = append(dst, digits[0], '.')
		dst = append(dst, digits[1:]...)
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, int64(kk-1), 10)
	}
	return dst
}

// ParseMetricsLine parses one METRICS line as printed by the loadproof
// server or by the upstream Rust load-test server; trailing newlines are
// allowed. The line must be [MetricsPrefix] and one JSON object, at most
// [MaxMetricsLineBytes] long, in which:
//
//   - the 15 upstream fields are all present, in their order, before
//     any other field;
//   - label is "running" or "final", elapsed_secs a finite number of seconds
//     (0 or more), every counter and gauge a whole number that fits in 64
//     bits and process_rss_bytes such a number or null;
//   - established_total, parked_connections and rate_limited_responses, when
//     present, are whole numbers (null counts as absent);
//   - no field appears twice.
//
// Other fields are kept in Extra when they are finite numbers and skipped
// otherwise. A line without the prefix gives an error wrapping
// [ErrNotMetricsLine]; every other error names the problem.
func ParseMetricsLine(line string) (MetricsLine, error) {
	line = trimEOL(line)
	if len(line) > MaxMetricsLineBytes {
		return MetricsLine{}, metricsErrorf("%d bytes is longer than the %d a METRICS line may be; is this a server's METRICS line?", len(line), MaxMetricsLineBytes)
	}
	body, ok := strings.CutPrefix(line, MetricsPrefix)
	if !ok {
		return MetricsLine{}, fmt.Errorf("%w: %q does not start with %q", ErrNotMetricsLine, truncate(line, 40), MetricsPrefix)
	}
	dec := json.NewDecoder(strings.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return MetricsLine{}, invalidJSON(err)
	}
	if tok != json.Delim('{') {
		return MetricsLine{}, metricsErrorf("invalid JSON object: the line holds %s after the prefix, want an object", describeToken(tok))
	}
	var (
		m       MetricsLine
		seen    [len(upstreamMetricsFields) + len(appendedMetricsFields)]bool
		others  map[string]bool // fields outside the named ones, seen so far
		maxRank = -1            // highest order rank so far
		maxName string
	)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return MetricsLine{}, invalidJSON(err)
		}
		key, _ := kt.(string)
		idx, named := metricsFieldIndex[key]
		if named {
			if seen[idx] {
				return MetricsLine{}, metricsErrorf("field %q appears twice", key)
			}
			seen[idx] = true
		} else {
			if others[key] {
				return MetricsLine{}, metricsErrorf("field %q appears twice", truncate(key, 40))
			}
			if others == nil {
				others = map[string]bool{}
			}
			others[key] = true
		}
		// The upstream fields rank by position; every other field ranks
		// after them, in any order among themselves.
		rank := len(upstreamMetricsFields)
		if named && idx < rank {
			rank = idx
		}
		if rank < maxRank {
			return MetricsLine{}, metricsErrorf("field %q comes after %q: the 15 upstream fields must come first, in their order", truncate(key, 40), truncate(maxName, 40))
		}
		maxRank, maxName = rank, key
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return MetricsLine{}, metricsErrorf("invalid JSON object: value of %q: %v", truncate(key, 40), err)
		}
		if err := m.set(key, named, raw); err != nil {
			return MetricsLine{}, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return MetricsLine{}, invalidJSON(err)
	}
	if rest := strings.Trim(body[dec.InputOffset():], " \t\r\n"); rest != "" {
		return MetricsLine{}, metricsErrorf("%d unexpected bytes after the JSON object", len(rest))
	}
	var missing []string
	for i, f := range upstreamMetricsFields {
		if !seen[i] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return MetricsLine{}, metricsErrorf("missing required fields %v", missing)
	}
	return m, nil
}

// set stores the value of one field.
func (m *MetricsLine) set(key string, named bool, raw json.RawMessage) error {
	text := string(raw)
	if !named {
		if isJSONNumber(text) {
			if f, err := strconv.ParseFloat(text, 64); err == nil {
				if m.Extra == nil {
					m.Extra = map[string]float64{}
				}
				m.Extra[key] = f
			}
		}
		return nil
	}
	switch key {
	case "label":
		var s string
		if text[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return metricsErrorf("label is %s: must be \"running\" or \"final\"", truncate(text, 40))
		}
		if s != "running" && s != "final" {
			return metricsErrorf("label is %q: must be \"running\" or \"final\"", truncate(s, 40))
		}
		m.Label = s
	case "elapsed_secs":
		f, err := strconv.ParseFloat(text, 64)
		if !isJSONNumber(text) || err != nil || f < 0 || math.IsInf(f, 0) {
			return metricsErrorf("elapsed_secs is %s: must be a finite number of seconds, 0 or more", truncate(text, 40))
		}
		m.ElapsedSecs = f
	case "process_rss_bytes":
		if text == "null" {
			return nil
		}
		v, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return metricsErrorf("process_rss_bytes is %s: must be a whole number of bytes or null", truncate(text, 40))
		}
		m.ProcessRSSBytes = &v
	default:
		if p := m.optional(key); p != nil && text == "null" {
			return nil
		}
		v, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return metricsErrorf("%s is %s: must be a whole number from 0 to 2^64-1", key, truncate(text, 40))
		}
		m.SetCounter(key, v)
	}
	return nil
}

// isJSONNumber reports whether a valid JSON value is a number.
func isJSONNumber(v string) bool {
	return v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

func describeToken(t json.Token) string {
	switch t {
	case json.Delim('['):
		return "an array"
	case nil:
		return "null"
	}
	switch t.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprint(t)
}

func invalidJSON(err error) error {
	if errors.Is(err, io.EOF) {
		return metricsErrorf("invalid JSON object: the line ends before the object is closed")
	}
	return metricsErrorf("invalid JSON object: %v", err)
}

func metricsErrorf(format string, args ...any) error {
	return fmt.Errorf("linkkeys: METRICS line: "+format, args...)
}

func trimEOL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
