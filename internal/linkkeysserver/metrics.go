package linkkeysserver

import (
	"sync/atomic"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// counters are the server's own metrics (docs/protocol-linkkeys.md, Server
// metrics), plain atomics. The
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

// Snapshot is a point-in-time copy of the server's metrics. The fields up to
// RateLimitedResponses are those of the METRICS line (see
// linkkeys.MetricsLine and Snapshot.MetricsLine), the upstream ones in their
// order, then the fields this server appends after process_rss_bytes; the
// rest are the limiter and snapshot-cache statistics, which only
// Server.Metrics and the Prometheus endpoint carry.
type Snapshot struct {
	// Label is "running" or "final".
	Label string
	// ElapsedSecs is the time since the server loop started.
	ElapsedSecs float64
	// AcceptedConnections counts every accept().
	AcceptedConnections uint64
	// OpenConnections is the number of sockets from accept to close,
	// handshaking or established. Unlike upstream it does not drift on
	// the connection-limit shed path.
	OpenConnections uint64
	// EstablishedConnections is the number of connections past the TLS
	// handshake and in the message loop (parked ones included).
	EstablishedConnections uint64
	// HandshakesInProgress counts connections waiting for a handshake slot
	// or inside the TLS handshake.
	HandshakesInProgress uint64
	// HandshakeTimeouts counts slot waits plus handshakes that ran out of
	// TCP_HANDSHAKE_TIMEOUT_SECONDS.
	HandshakeTimeouts uint64
	// HandshakeRejections counts failed TLS handshakes.
	HandshakeRejections uint64
	// ShedConnectionLimit counts connections refused by TCP_MAX_CONNECTIONS.
	ShedConnectionLimit uint64
	// ShedHandshakePerSource counts connections refused by a source's
	// handshake bucket.
	ShedHandshakePerSource uint64
	// ShedHandshakeOverflow counts connections refused by the shared
	// overflow bucket (protection mode).
	ShedHandshakeOverflow uint64
	// ShedHandshakeGlobal counts connections refused by the global
	// handshake bucket.
	ShedHandshakeGlobal uint64
	// FramesProcessed counts dispatched frames, error responses included.
	FramesProcessed uint64
	// FrameBufferBytes is the bytes of frame bodies announced by an accepted
	// length prefix and not yet handed to dispatch; 0 on idle connections.
	FrameBufferBytes uint64
	// ProcessRSSBytes is VmRSS of the process; nil when unreadable.
	ProcessRSSBytes *uint64

	// EstablishedTotal counts every completed handshake (a counter, unlike
	// EstablishedConnections). With it the admission identity is exact:
	// AcceptedConnections = EstablishedTotal + HandshakeRejections +
	// HandshakeTimeouts + the four shed counters + HandshakesInProgress.
	EstablishedTotal uint64
	// ParkedConnections is the established connections currently parked
	// (no goroutine, no buffers).
	ParkedConnections uint64
	// RateLimitedResponses counts status-7 answers of the public-read gate.
	RateLimitedResponses uint64

	// HandshakeLimiter and PublicReadLimiter are the two limiters' stats.
	HandshakeLimiter  admit.LimiterStats
	PublicReadLimiter admit.LimiterStats
	// SnapshotCache is the get-domain-keys / get-revocations cache's stats.
	SnapshotCache CacheStats
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

// MetricsPrefix starts every METRICS line (linkkeys.MetricsPrefix).
const MetricsPrefix = linkkeys.MetricsPrefix

// ErrNotMetricsLine is returned (wrapped) by ParseMetricsLine for a line
// that does not start with "METRICS ", so callers reading a server's mixed
// stdout can skip other lines. It is linkkeys.ErrNotMetricsLine.
var ErrNotMetricsLine = linkkeys.ErrNotMetricsLine

// MetricsLine returns the METRICS line fields of s, with the three fields
// this server appends (established_total, parked_connections,
// rate_limited_responses) set.
func (s Snapshot) MetricsLine() linkkeys.MetricsLine {
	return linkkeys.MetricsLine{
		Label:                  s.Label,
		ElapsedSecs:            s.ElapsedSecs,
		AcceptedConnections:    s.AcceptedConnections,
		OpenConnections:        s.OpenConnections,
		EstablishedConnections: s.EstablishedConnections,
		HandshakesInProgress:   s.HandshakesInProgress,
		HandshakeTimeouts:      s.HandshakeTimeouts,
		HandshakeRejections:    s.HandshakeRejections,
		ShedConnectionLimit:    s.ShedConnectionLimit,
		ShedHandshakePerSource: s.ShedHandshakePerSource,
		ShedHandshakeOverflow:  s.ShedHandshakeOverflow,
		ShedHandshakeGlobal:    s.ShedHandshakeGlobal,
		FramesProcessed:        s.FramesProcessed,
		FrameBufferBytes:       s.FrameBufferBytes,
		ProcessRSSBytes:        s.ProcessRSSBytes,
		EstablishedTotal:       &s.EstablishedTotal,
		ParkedConnections:      &s.ParkedConnections,
		RateLimitedResponses:   &s.RateLimitedResponses,
	}
}

// SnapshotFromMetricsLine returns the Snapshot a METRICS line describes:
// the appended fields the line lacks (an upstream Rust line has none) are 0,
// Extra fields are dropped, and the limiter and cache statistics are zero.
func SnapshotFromMetricsLine(m linkkeys.MetricsLine) Snapshot {
	opt := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return Snapshot{
		Label:                  m.Label,
		ElapsedSecs:            m.ElapsedSecs,
		AcceptedConnections:    m.AcceptedConnections,
		OpenConnections:        m.OpenConnections,
		EstablishedConnections: m.EstablishedConnections,
		HandshakesInProgress:   m.HandshakesInProgress,
		HandshakeTimeouts:      m.HandshakeTimeouts,
		HandshakeRejections:    m.HandshakeRejections,
		ShedConnectionLimit:    m.ShedConnectionLimit,
		ShedHandshakePerSource: m.ShedHandshakePerSource,
		ShedHandshakeOverflow:  m.ShedHandshakeOverflow,
		ShedHandshakeGlobal:    m.ShedHandshakeGlobal,
		FramesProcessed:        m.FramesProcessed,
		FrameBufferBytes:       m.FrameBufferBytes,
		ProcessRSSBytes:        m.ProcessRSSBytes,
		EstablishedTotal:       opt(m.EstablishedTotal),
		ParkedConnections:      opt(m.ParkedConnections),
		RateLimitedResponses:   opt(m.RateLimitedResponses),
	}
}

// AppendMetricsLine appends the METRICS line of s to dst,
// without a newline: linkkeys.AppendMetricsLine of s.MetricsLine(), the
// upstream fields in order followed by established_total,
// parked_connections and rate_limited_responses.
func AppendMetricsLine(dst []byte, s Snapshot) []byte {
	return linkkeys.AppendMetricsLine(dst, s.MetricsLine())
}

// FormatMetricsLine returns the METRICS line of s without a newline.
func FormatMetricsLine(s Snapshot) string { return string(AppendMetricsLine(nil, s)) }

// ParseMetricsLine parses one METRICS line as printed by this server or by
// the upstream Rust load-test server, with the rules of
// linkkeys.ParseMetricsLine, and returns it as a Snapshot (see
// SnapshotFromMetricsLine).
func ParseMetricsLine(line string) (Snapshot, error) {
	m, err := linkkeys.ParseMetricsLine(line)
	if err != nil {
		return Snapshot{}, err
	}
	return SnapshotFromMetricsLine(m), nil
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
