package linkkeysserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/loadproof/loadproof/internal/admit"
)

// counters are the server's own metrics (reference §4.1), plain atomics. The
// per-request ones sit on their own cache lines, away from the per-connection
// ones.
type counters struct {
	accepted         atomic.Uint64
	open             atomic.Int64
	established      atomic.Int64
	handshaking      atomic.Int64
	hsTimeouts       atomic.Uint64
	hsRejections     atomic.Uint64
	shedConnLimit    atomic.Uint64
	shedPerSource    atomic.Uint64
	shedOverflow     atomic.Uint64
	shedGlobal       atomic.Uint64
	establishedTotal atomic.Uint64
	parked           atomic.Int64
	_                [64]byte
	frames           atomic.Uint64
	_                [56]byte
	frameBuf         atomic.Int64
	_                [56]byte
	rateLimited      atomic.Uint64
	_                [56]byte
}

// Snapshot is a point-in-time copy of the server's metrics. The JSON-tagged
// fields are the METRICS line (reference §4.2) in its field order, then the
// fields this server appends after process_rss_bytes; the rest are the
// limiter and snapshot-cache statistics, which only Server.Metrics and the
// Prometheus endpoint carry.
type Snapshot struct {
	// Label is "running" or "final".
	Label string `json:"label"`
	// ElapsedSecs is the time since the server loop started.
	ElapsedSecs float64 `json:"elapsed_secs"`
	// AcceptedConnections counts every accept().
	AcceptedConnections uint64 `json:"accepted_connections"`
	// OpenConnections is the number of sockets from accept to close,
	// handshaking or established. Unlike upstream it does not drift on
	// the connection-limit shed path.
	OpenConnections uint64 `json:"open_connections"`
	// EstablishedConnections is the number of connections past the TLS
	// handshake and in the message loop (parked ones included).
	EstablishedConnections uint64 `json:"established_connections"`
	// HandshakesInProgress counts connections waiting for a handshake slot
	// or inside the TLS handshake.
	HandshakesInProgress uint64 `json:"handshakes_in_progress"`
	// HandshakeTimeouts counts slot waits plus handshakes that ran out of
	// TCP_HANDSHAKE_TIMEOUT_SECONDS.
	HandshakeTimeouts uint64 `json:"handshake_timeouts"`
	// HandshakeRejections counts failed TLS handshakes.
	HandshakeRejections uint64 `json:"handshake_rejections"`
	// ShedConnectionLimit counts connections refused by TCP_MAX_CONNECTIONS.
	ShedConnectionLimit uint64 `json:"shed_connection_limit"`
	// ShedHandshakePerSource counts connections refused by a source's
	// handshake bucket.
	ShedHandshakePerSource uint64 `json:"shed_handshake_per_source"`
	// ShedHandshakeOverflow counts connections refused by the shared
	// overflow bucket (protection mode).
	ShedHandshakeOverflow uint64 `json:"shed_handshake_overflow"`
	// ShedHandshakeGlobal counts connections refused by the global
	// handshake bucket.
	ShedHandshakeGlobal uint64 `json:"shed_handshake_global"`
	// FramesProcessed counts dispatched frames, error responses included.
	FramesProcessed uint64 `json:"frames_processed"`
	// FrameBufferBytes is the bytes of frame bodies announced by an accepted
	// length prefix and not yet handed to dispatch; 0 on idle connections.
	FrameBufferBytes uint64 `json:"frame_buffer_bytes"`
	// ProcessRSSBytes is VmRSS of the process; nil when unreadable.
	ProcessRSSBytes *uint64 `json:"process_rss_bytes"`

	// EstablishedTotal counts every completed handshake (a counter, unlike
	// EstablishedConnections). With it the admission identity is exact:
	// AcceptedConnections = EstablishedTotal + HandshakeRejections +
	// HandshakeTimeouts + the four shed counters + HandshakesInProgress.
	EstablishedTotal uint64 `json:"established_total"`
	// ParkedConnections is the established connections currently parked
	// (no goroutine, no buffers).
	ParkedConnections uint64 `json:"parked_connections"`
	// RateLimitedResponses counts status-7 answers of the public-read gate.
	RateLimitedResponses uint64 `json:"rate_limited_responses"`

	// HandshakeLimiter and PublicReadLimiter are the two limiters' stats.
	HandshakeLimiter  admit.LimiterStats `json:"-"`
	PublicReadLimiter admit.LimiterStats `json:"-"`
	// SnapshotCache is the get-domain-keys / get-revocations cache's stats.
	SnapshotCache CacheStats `json:"-"`
}

// Pending returns the connections accepted but not yet through admission:
// AcceptedConnections minus every outcome counter. It is
// HandshakesInProgress once the server is quiet, and it is what the
// accounting identity leaves over.
func (s Snapshot) Pending() int64 {
	done := s.EstablishedTotal + s.HandshakeRejections + s.HandshakeTimeouts + s.ShedConnectionLimit +
		s.ShedHandshakePerSource + s.ShedHandshakeOverflow + s.ShedHandshakeGlobal
	return int64(s.AcceptedConnections) - int64(done)
}

func gauge(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

func (c *counters) snapshot() Snapshot {
	return Snapshot{
		AcceptedConnections:    c.accepted.Load(),
		OpenConnections:        gauge(c.open.Load()),
		EstablishedConnections: gauge(c.established.Load()),
		HandshakesInProgress:   gauge(c.handshaking.Load()),
		HandshakeTimeouts:      c.hsTimeouts.Load(),
		HandshakeRejections:    c.hsRejections.Load(),
		ShedConnectionLimit:    c.shedConnLimit.Load(),
		ShedHandshakePerSource: c.shedPerSource.Load(),
		ShedHandshakeOverflow:  c.shedOverflow.Load(),
		ShedHandshakeGlobal:    c.shedGlobal.Load(),
		FramesProcessed:        c.frames.Load(),
		FrameBufferBytes:       gauge(c.frameBuf.Load()),
		EstablishedTotal:       c.establishedTotal.Load(),
		ParkedConnections:      gauge(c.parked.Load()),
		RateLimitedResponses:   c.rateLimited.Load(),
	}
}

// MetricsPrefix starts every METRICS line.
const MetricsPrefix = "METRICS "

// AppendMetricsLine appends the METRICS line of s (reference §4.2) to dst,
// without a newline: the prefix "METRICS " and compact JSON whose fields come
// in the upstream order, followed by the fields this server appends
// (established_total, parked_connections, rate_limited_responses).
// elapsed_secs is formatted like serde_json formats an f64 (shortest
// round-trip digits, "5.0" for whole numbers).
func AppendMetricsLine(dst []byte, s Snapshot) []byte {
	dst = append(dst, MetricsPrefix...)
	dst = append(dst, `{"label":`...)
	dst = appendJSONString(dst, s.Label)
	dst = append(dst, `,"elapsed_secs":`...)
	dst = AppendSerdeFloat(dst, s.ElapsedSecs)
	u := func(name string, v uint64) {
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		dst = strconv.AppendUint(dst, v, 10)
	}
	u("accepted_connections", s.AcceptedConnections)
	u("open_connections", s.OpenConnections)
	u("established_connections", s.EstablishedConnections)
	u("handshakes_in_progress", s.HandshakesInProgress)
	u("handshake_timeouts", s.HandshakeTimeouts)
	u("handshake_rejections", s.HandshakeRejections)
	u("shed_connection_limit", s.ShedConnectionLimit)
	u("shed_handshake_per_source", s.ShedHandshakePerSource)
	u("shed_handshake_overflow", s.ShedHandshakeOverflow)
	u("shed_handshake_global", s.ShedHandshakeGlobal)
	u("frames_processed", s.FramesProcessed)
	u("frame_buffer_bytes", s.FrameBufferBytes)
	if s.ProcessRSSBytes != nil {
		u("process_rss_bytes", *s.ProcessRSSBytes)
	} else {
		dst = append(dst, `,"process_rss_bytes":null`...)
	}
	u("established_total", s.EstablishedTotal)
	u("parked_connections", s.ParkedConnections)
	u("rate_limited_responses", s.RateLimitedResponses)
	return append(dst, '}')
}

// FormatMetricsLine returns the METRICS line of s without a newline.
func FormatMetricsLine(s Snapshot) string { return string(AppendMetricsLine(nil, s)) }

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
	digits := make([]byte, 0, 17)
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

// metricsWire is the decoding form of a METRICS line: pointers find missing
// fields.
type metricsWire struct {
	Label                  *string         `json:"label"`
	ElapsedSecs            *float64        `json:"elapsed_secs"`
	AcceptedConnections    *uint64         `json:"accepted_connections"`
	OpenConnections        *uint64         `json:"open_connections"`
	EstablishedConnections *uint64         `json:"established_connections"`
	HandshakesInProgress   *uint64         `json:"handshakes_in_progress"`
	HandshakeTimeouts      *uint64         `json:"handshake_timeouts"`
	HandshakeRejections    *uint64         `json:"handshake_rejections"`
	ShedConnectionLimit    *uint64         `json:"shed_connection_limit"`
	ShedHandshakePerSource *uint64         `json:"shed_handshake_per_source"`
	ShedHandshakeOverflow  *uint64         `json:"shed_handshake_overflow"`
	ShedHandshakeGlobal    *uint64         `json:"shed_handshake_global"`
	FramesProcessed        *uint64         `json:"frames_processed"`
	FrameBufferBytes       *uint64         `json:"frame_buffer_bytes"`
	ProcessRSSBytes        json.RawMessage `json:"process_rss_bytes"` // empty when absent, "null" when null
	EstablishedTotal       *uint64         `json:"established_total"`
	ParkedConnections      *uint64         `json:"parked_connections"`
	RateLimitedResponses   *uint64         `json:"rate_limited_responses"`
}

// ErrNotMetricsLine is returned (wrapped) by ParseMetricsLine for a line
// that does not start with "METRICS ", so callers reading a server's mixed
// stdout can skip other lines.
var ErrNotMetricsLine = errors.New("linkkeysserver: not a METRICS line")

// ParseMetricsLine parses one METRICS line as printed by this server or by
// the upstream Rust load-test server. A trailing newline is allowed. The 15
// upstream fields are required, with label "running" or "final", a finite
// non-negative elapsed_secs, non-negative whole counters and
// process_rss_bytes a whole number or null; the fields this server appends
// are optional (0 when absent); unknown fields are ignored. Anything else is
// an error naming the problem.
func ParseMetricsLine(line string) (Snapshot, error) {
	line = trimEOL(line)
	body, ok := cutPrefix(line, MetricsPrefix)
	if !ok {
		return Snapshot{}, fmt.Errorf("%w: %q does not start with %q", ErrNotMetricsLine, truncate(line, 40), MetricsPrefix)
	}
	var w metricsWire
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	if err := dec.Decode(&w); err != nil {
		return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: invalid JSON object: %w", err)
	}
	if rest := bytes.TrimSpace([]byte(body[dec.InputOffset():])); len(rest) > 0 {
		return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: %d unexpected bytes after the JSON object", len(rest))
	}
	var missing []string
	req := func(name string, p *uint64) uint64 {
		if p == nil {
			missing = append(missing, name)
			return 0
		}
		return *p
	}
	opt := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	var s Snapshot
	if w.Label == nil {
		missing = append(missing, "label")
	} else {
		s.Label = *w.Label
	}
	if w.ElapsedSecs == nil {
		missing = append(missing, "elapsed_secs")
	} else {
		s.ElapsedSecs = *w.ElapsedSecs
	}
	s.AcceptedConnections = req("accepted_connections", w.AcceptedConnections)
	s.OpenConnections = req("open_connections", w.OpenConnections)
	s.EstablishedConnections = req("established_connections", w.EstablishedConnections)
	s.HandshakesInProgress = req("handshakes_in_progress", w.HandshakesInProgress)
	s.HandshakeTimeouts = req("handshake_timeouts", w.HandshakeTimeouts)
	s.HandshakeRejections = req("handshake_rejections", w.HandshakeRejections)
	s.ShedConnectionLimit = req("shed_connection_limit", w.ShedConnectionLimit)
	s.ShedHandshakePerSource = req("shed_handshake_per_source", w.ShedHandshakePerSource)
	s.ShedHandshakeOverflow = req("shed_handshake_overflow", w.ShedHandshakeOverflow)
	s.ShedHandshakeGlobal = req("shed_handshake_global", w.ShedHandshakeGlobal)
	s.FramesProcessed = req("frames_processed", w.FramesProcessed)
	s.FrameBufferBytes = req("frame_buffer_bytes", w.FrameBufferBytes)
	if len(w.ProcessRSSBytes) == 0 {
		missing = append(missing, "process_rss_bytes")
	} else if raw := bytes.TrimSpace(w.ProcessRSSBytes); !bytes.Equal(raw, []byte("null")) {
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: process_rss_bytes is %s: must be a whole number of bytes or null", truncate(string(raw), 40))
		}
		s.ProcessRSSBytes = &v
	}
	s.EstablishedTotal = opt(w.EstablishedTotal)
	s.ParkedConnections = opt(w.ParkedConnections)
	s.RateLimitedResponses = opt(w.RateLimitedResponses)
	if len(missing) > 0 {
		return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: missing required fields %v", missing)
	}
	if s.Label != "running" && s.Label != "final" {
		return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: label is %q: must be \"running\" or \"final\"", truncate(s.Label, 40))
	}
	if s.ElapsedSecs < 0 || math.IsInf(s.ElapsedSecs, 0) || math.IsNaN(s.ElapsedSecs) {
		return Snapshot{}, fmt.Errorf("linkkeysserver: METRICS line: elapsed_secs is %v: must be a finite number of seconds, 0 or more", s.ElapsedSecs)
	}
	return s, nil
}

func trimEOL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SumSnapshots adds the counters and gauges of several processes' snapshots
// into one, as the --processes parent reports them: every counter and gauge
// is summed, process_rss_bytes is the sum of the known values (nil when none
// is known), limiter and cache statistics are summed field by field. Label
// and ElapsedSecs are left zero for the caller to set.
func SumSnapshots(snaps ...Snapshot) Snapshot {
	var t Snapshot
	for _, s := range snaps {
		t.AcceptedConnections += s.AcceptedConnections
		t.OpenConnections += s.OpenConnections
		t.EstablishedConnections += s.EstablishedConnections
		t.HandshakesInProgress += s.HandshakesInProgress
		t.HandshakeTimeouts += s.HandshakeTimeouts
		t.HandshakeRejections += s.HandshakeRejections
		t.ShedConnectionLimit += s.ShedConnectionLimit
		t.ShedHandshakePerSource += s.ShedHandshakePerSource
		t.ShedHandshakeOverflow += s.ShedHandshakeOverflow
		t.ShedHandshakeGlobal += s.ShedHandshakeGlobal
		t.FramesProcessed += s.FramesProcessed
		t.FrameBufferBytes += s.FrameBufferBytes
		if s.ProcessRSSBytes != nil {
			v := *s.ProcessRSSBytes
			if t.ProcessRSSBytes != nil {
				v += *t.ProcessRSSBytes
			}
			t.ProcessRSSBytes = &v
		}
		t.EstablishedTotal += s.EstablishedTotal
		t.ParkedConnections += s.ParkedConnections
		t.RateLimitedResponses += s.RateLimitedResponses
		t.HandshakeLimiter = addLimiterStats(t.HandshakeLimiter, s.HandshakeLimiter)
		t.PublicReadLimiter = addLimiterStats(t.PublicReadLimiter, s.PublicReadLimiter)
		t.SnapshotCache = t.SnapshotCache.add(s.SnapshotCache)
	}
	return t
}

func addLimiterStats(a, b admit.LimiterStats) admit.LimiterStats {
	a.Accepted += b.Accepted
	a.RejectedPerSource += b.RejectedPerSource
	a.RejectedOverflow += b.RejectedOverflow
	a.RejectedGlobal += b.RejectedGlobal
	a.ProtectionModeEntries += b.ProtectionModeEntries
	a.TrackedSources += b.TrackedSources
	a.BucketEntries += b.BucketEntries
	a.MaxBucketEntries += b.MaxBucketEntries
	return a
}
