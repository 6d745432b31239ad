package linkkeysserver

import (
	"sync/atomic"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// counters are the server's own metrics (docs/protocol-linkkeys.md, Server
// metrics), plain atomics. The per-request ones sit on their own cache lines,
// away from the per-connection ones.
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
	closed           [numCloseReasons]atomic.Uint64
	_                [64]byte
	frames           atomic.Uint64
	_                [56]byte
	frameBuf         atomic.Int64
	_                [56]byte
	rateLimited      atomic.Uint64
	_                [56]byte
}

// Snapshot is a point-in-time copy of the server's metrics: the METRICS line
// (linkkeys.MetricsLine, every appended field present) and the limiter and
// snapshot-cache statistics, which only Server.Metrics and the Prometheus
// endpoint carry.
type Snapshot struct {
	linkkeys.MetricsLine

	// HandshakeLimiter and PublicReadLimiter are the two limiters' stats.
	HandshakeLimiter  admit.LimiterStats
	PublicReadLimiter admit.LimiterStats
	// SnapshotCache is the get-domain-keys / get-revocations cache's stats.
	SnapshotCache CacheStats
}

func gauge(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// line fills a METRICS line from the counters (Label, ElapsedSecs and RSS
// are the caller's).
func (c *counters) line() linkkeys.MetricsLine {
	m := linkkeys.MetricsLine{
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
	for r := range numCloseReasons {
		*r.field(&m) += c.closed[r].Load()
	}
	return m
}

// SumSnapshots adds several processes' snapshots into one, as the
// --processes parent reports them: the METRICS fields with
// linkkeys.SumMetricsLines, limiter and cache statistics field by field.
// Label and ElapsedSecs are left zero for the caller to set.
func SumSnapshots(snaps ...Snapshot) Snapshot {
	var t Snapshot
	lines := make([]linkkeys.MetricsLine, len(snaps))
	for i, s := range snaps {
		lines[i] = s.MetricsLine
		t.HandshakeLimiter = addLimiterStats(t.HandshakeLimiter, s.HandshakeLimiter)
		t.PublicReadLimiter = addLimiterStats(t.PublicReadLimiter, s.PublicReadLimiter)
		t.SnapshotCache = t.SnapshotCache.add(s.SnapshotCache)
	}
	t.MetricsLine = linkkeys.SumMetricsLines(lines...)
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

// closeReason is why an established connection ended; each reason has its
// closed_* counter, so that established_total = established_connections +
// the closed_* counters.
type closeReason uint8

const (
	closePeer              closeReason = iota // EOF or reset between frames, or a failed write
	closeOversizedFrame                       // a prefix over 1 MiB
	closeMalformed                            // a TLS record error, or the stream ended inside a frame
	closeIdleTimeout                          // no next frame within TCP_IDLE_TIMEOUT_SECONDS
	closeIOTimeout                            // a body read or a write past TCP_IO_TIMEOUT_SECONDS
	closeSlowBody                             // a body slower than TCP_MIN_FRAME_BODY_BYTES_PER_SECOND
	closeFrameBudget                          // the frame did not fit TCP_MAX_INFLIGHT_FRAME_BYTES
	closeOversizedResponse                    // a response over 1 MiB
	closeShutdown                             // Shutdown or Close
	numCloseReasons
)

// field returns the METRICS field that counts r.
func (r closeReason) field(m *linkkeys.MetricsLine) *uint64 {
	switch r {
	case closePeer:
		return &m.ClosedByPeer
	case closeOversizedFrame:
		return &m.ClosedOversizedFrame
	case closeMalformed:
		return &m.ClosedMalformedRequest
	case closeIdleTimeout:
		return &m.ClosedIdleTimeout
	case closeIOTimeout:
		return &m.ClosedIOTimeout
	case closeSlowBody:
		return &m.ClosedSlowFrameBody
	case closeFrameBudget:
		return &m.ClosedFrameBudget
	case closeOversizedResponse:
		return &m.ClosedOversizedResponse
	default:
		return &m.ClosedShutdown
	}
}
