package linkkeys

// The METRICS line of the load-test server (the upstream fields:
// docs/protocol-linkkeys.md, METRICS line; the ones appended after them:
// docs/upstream-differences.md), written by linkkeysserver and read by
// linkkeysload and by the --processes parent. One field table (metricsFields)
// drives the line's order, the parser, the sums of several processes and the
// Prometheus names, so none of them can drift from the others.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// MetricsPrefix starts every METRICS line: the literal word and one space.
const MetricsPrefix = "METRICS "

// MaxMetricsLineBytes bounds the METRICS lines [ParseMetricsLine] accepts; a
// real line is about 900 bytes, plus at most about 1.5 KB per configured
// source prefix (16 at most).
const MaxMetricsLineBytes = 64 << 10

// ErrNotMetricsLine is returned (wrapped) by [ParseMetricsLine] for a line
// that does not start with [MetricsPrefix], so that a reader of a server's
// mixed stdout can skip other lines with errors.Is.
var ErrNotMetricsLine = errors.New("linkkeys: not a METRICS line")

// MetricsLine is one reading of a load-test server's counters and gauges: the
// 15 fields of the upstream line in their order, then the fields the
// loadproof server appends after process_rss_bytes, then its counters per
// configured source prefix (Sources), then any other numeric fields a server
// appends. The server fills it directly; clients parse a line
// or a Prometheus scrape into it.
//
// The zero value is a line of this server with every counter 0: every
// appended field is present. A line that lacks some appended fields (an
// upstream Rust line lacks all of them, an older loadproof server the newer
// ones) lists them in Absent; they are then 0 here and left off when the line
// is written again.
type MetricsLine struct {
	// Label is "running" or "final" ("scrape" for a Prometheus reading).
	Label string `json:"label"`
	// ElapsedSecs is the time since the server loop started.
	ElapsedSecs float64 `json:"elapsed_secs"`
	// AcceptedConnections counts every accept().
	AcceptedConnections uint64 `json:"accepted_connections"`
	// OpenConnections is the number of sockets from accept to close,
	// handshaking or established.
	OpenConnections uint64 `json:"open_connections"`
	// EstablishedConnections is the number of connections past the TLS
	// handshake (a gauge), parked ones included.
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
	// ProcessRSSBytes is the process's resident memory; nil when the server
	// could not read it (null on the line).
	ProcessRSSBytes *uint64 `json:"process_rss_bytes"`

	// EstablishedTotal counts every completed handshake (a counter, unlike
	// EstablishedConnections).
	EstablishedTotal uint64 `json:"established_total"`
	// ParkedConnections is the established connections currently parked
	// (no goroutine, no buffers).
	ParkedConnections uint64 `json:"parked_connections"`
	// RateLimitedResponses counts status-7 answers of the public-read gate.
	RateLimitedResponses uint64 `json:"rate_limited_responses"`
	// ClosedByPeer counts established connections the client ended between
	// frames (EOF or reset), or that failed a write for a reason other than
	// the I/O timeout.
	ClosedByPeer uint64 `json:"closed_by_peer"`
	// ClosedOversizedFrame counts connections closed because a length prefix
	// announced more than 1 MiB.
	ClosedOversizedFrame uint64 `json:"closed_oversized_frame"`
	// ClosedMalformedRequest counts connections closed because their stream
	// could not be read as frames any more: a TLS record error, or the
	// stream ending inside a frame.
	ClosedMalformedRequest uint64 `json:"closed_malformed_request"`
	// ClosedIdleTimeout counts connections closed after
	// TCP_IDLE_TIMEOUT_SECONDS without the start of a next frame.
	ClosedIdleTimeout uint64 `json:"closed_idle_timeout"`
	// ClosedIOTimeout counts connections closed because a frame body read or
	// a response write ran past TCP_IO_TIMEOUT_SECONDS.
	ClosedIOTimeout uint64 `json:"closed_io_timeout"`
	// ClosedSlowFrameBody counts connections closed because a frame body
	// arrived slower than TCP_MIN_FRAME_BODY_BYTES_PER_SECOND after the
	// grace period.
	ClosedSlowFrameBody uint64 `json:"closed_slow_frame_body"`
	// ClosedFrameBudget counts connections closed because the frame they
	// announced did not fit in TCP_MAX_INFLIGHT_FRAME_BYTES.
	ClosedFrameBudget uint64 `json:"closed_frame_budget"`
	// ClosedOversizedResponse counts connections closed because a response
	// would have exceeded the 1 MiB frame limit.
	ClosedOversizedResponse uint64 `json:"closed_oversized_response"`
	// ClosedShutdown counts established connections the server closed while
	// shutting down.
	ClosedShutdown uint64 `json:"closed_shutdown"`

	// ProcessRSSAnonBytes, ProcessRSSFileBytes and ProcessRSSShmemBytes split
	// ProcessRSSBytes by kind (Linux RssAnon, RssFile and RssShmem, which add
	// up to VmRSS): memory the process allocated, mapped files (chiefly the
	// binary's own code and read-only data: clean page cache) and shared
	// memory. Absent when the server cannot read them (off Linux).
	ProcessRSSAnonBytes  uint64 `json:"process_rss_anon_bytes"`
	ProcessRSSFileBytes  uint64 `json:"process_rss_file_bytes"`
	ProcessRSSShmemBytes uint64 `json:"process_rss_shmem_bytes"`

	// Sources are the counters per configured source prefix
	// (TCP_SOURCE_PREFIXES), in the server's order: on the line, the
	// source_<name>_<counter> fields after every other field of this server.
	// Empty when the server counts no prefix.
	Sources []SourceCounters `json:"sources,omitempty"`

	// Absent names the appended fields the reading did not carry, in line
	// order; empty for a reading of this server.
	Absent []string `json:"absent,omitempty"`
	// Extra holds the other fields a server appends, when they are finite
	// numbers (fields of other types are skipped). Keys that name one of the
	// fields above are never used.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// MetricKind says how a whole-number METRICS field moves.
type MetricKind uint8

const (
	// MetricCounter only grows while the server runs.
	MetricCounter MetricKind = iota
	// MetricGauge goes up and down.
	MetricGauge
)

// MetricsField describes one whole-number field of the METRICS line (every
// field but label and elapsed_secs) and its Prometheus series.
type MetricsField struct {
	// Name is the field's key on the METRICS line.
	Name string
	// Kind is counter or gauge.
	Kind MetricKind
	// Appended is set for the fields this server prints after
	// process_rss_bytes; upstream lines lack them.
	Appended bool
	// PromName is the Prometheus metric name without the namespace
	// ("accepted_connections_total"); several fields may share one name,
	// told apart by PromLabel.
	PromName string
	// PromLabel is the series' one label as {name, value}, or empty.
	PromLabel [2]string
	// Help is the Prometheus help text.
	Help string

	ptr func(*MetricsLine) *uint64 // nil for process_rss_bytes
}

// Value returns the field's value in m; ok is false when m lacks it (a null
// process_rss_bytes, an absent appended field).
func (f MetricsField) Value(m *MetricsLine) (v uint64, ok bool) {
	if f.ptr == nil {
		if m.ProcessRSSBytes == nil {
			return 0, false
		}
		return *m.ProcessRSSBytes, true
	}
	if f.Appended && m.isAbsent(f.Name) {
		return 0, false
	}
	return *f.ptr(m), true
}

// set stores v and marks the field present.
func (f MetricsField) set(m *MetricsLine, v uint64) {
	if f.ptr == nil {
		m.ProcessRSSBytes = &v
		return
	}
	*f.ptr(m) = v
	if f.Appended {
		m.markPresent(f.Name)
	}
}

const (
	shedHelp     = "Connections closed before the TLS handshake, by reason."
	closedHelp   = "Established connections closed, by reason."
	rssSplitHelp = "Resident memory of the server process(es) by kind (Linux RssAnon, RssFile, RssShmem; they add up to process_rss_bytes); 0 when unreadable."
)

// metricsFields is every whole-number field in line order: the 13 of the
// upstream line (process_rss_bytes last), then the appended ones. New fields
// go at the end, so parsers of older lines still read every line.
var metricsFields = [...]MetricsField{
	{Name: "accepted_connections", PromName: "accepted_connections_total", Help: "Connections accepted (every accept()).",
		ptr: func(m *MetricsLine) *uint64 { return &m.AcceptedConnections }},
	{Name: "open_connections", Kind: MetricGauge, PromName: "open_connections", Help: "Sockets open from accept to close, handshaking or established.",
		ptr: func(m *MetricsLine) *uint64 { return &m.OpenConnections }},
	{Name: "established_connections", Kind: MetricGauge, PromName: "established_connections", Help: "Connections past the TLS handshake.",
		ptr: func(m *MetricsLine) *uint64 { return &m.EstablishedConnections }},
	{Name: "handshakes_in_progress", Kind: MetricGauge, PromName: "handshakes_in_progress", Help: "Connections waiting for a handshake slot or in the TLS handshake.",
		ptr: func(m *MetricsLine) *uint64 { return &m.HandshakesInProgress }},
	{Name: "handshake_timeouts", PromName: "handshake_timeouts_total", Help: "Handshake slot waits plus handshakes past TCP_HANDSHAKE_TIMEOUT_SECONDS.",
		ptr: func(m *MetricsLine) *uint64 { return &m.HandshakeTimeouts }},
	{Name: "handshake_rejections", PromName: "handshake_rejections_total", Help: "Failed TLS handshakes.",
		ptr: func(m *MetricsLine) *uint64 { return &m.HandshakeRejections }},
	{Name: "shed_connection_limit", PromName: "shed_connections_total", PromLabel: [2]string{"reason", "connection_limit"}, Help: shedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ShedConnectionLimit }},
	{Name: "shed_handshake_per_source", PromName: "shed_connections_total", PromLabel: [2]string{"reason", "handshake_per_source"}, Help: shedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ShedHandshakePerSource }},
	{Name: "shed_handshake_overflow", PromName: "shed_connections_total", PromLabel: [2]string{"reason", "handshake_overflow"}, Help: shedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ShedHandshakeOverflow }},
	{Name: "shed_handshake_global", PromName: "shed_connections_total", PromLabel: [2]string{"reason", "handshake_global"}, Help: shedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ShedHandshakeGlobal }},
	{Name: "frames_processed", PromName: "frames_processed_total", Help: "Frames dispatched, error responses included.",
		ptr: func(m *MetricsLine) *uint64 { return &m.FramesProcessed }},
	{Name: "frame_buffer_bytes", Kind: MetricGauge, PromName: "frame_buffer_bytes", Help: "Bytes of frame bodies announced and not yet handed to dispatch.",
		ptr: func(m *MetricsLine) *uint64 { return &m.FrameBufferBytes }},
	{Name: "process_rss_bytes", Kind: MetricGauge, PromName: "process_rss_bytes", Help: "Resident set size of the server process(es) (VmRSS); 0 when unreadable."},

	{Name: "established_total", Appended: true, PromName: "established_total", Help: "TLS handshakes completed.",
		ptr: func(m *MetricsLine) *uint64 { return &m.EstablishedTotal }},
	{Name: "parked_connections", Kind: MetricGauge, Appended: true, PromName: "parked_connections", Help: "Established connections parked without a goroutine or buffers.",
		ptr: func(m *MetricsLine) *uint64 { return &m.ParkedConnections }},
	{Name: "rate_limited_responses", Appended: true, PromName: "rate_limited_responses_total", Help: "Public-read requests answered with status 7.",
		ptr: func(m *MetricsLine) *uint64 { return &m.RateLimitedResponses }},
	{Name: "closed_by_peer", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "peer"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedByPeer }},
	{Name: "closed_oversized_frame", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "oversized_frame"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedOversizedFrame }},
	{Name: "closed_malformed_request", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "malformed_request"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedMalformedRequest }},
	{Name: "closed_idle_timeout", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "idle_timeout"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedIdleTimeout }},
	{Name: "closed_io_timeout", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "io_timeout"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedIOTimeout }},
	{Name: "closed_slow_frame_body", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "slow_frame_body"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedSlowFrameBody }},
	{Name: "closed_frame_budget", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "frame_budget"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedFrameBudget }},
	{Name: "closed_oversized_response", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "oversized_response"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedOversizedResponse }},
	{Name: "closed_shutdown", Appended: true, PromName: "closed_connections_total", PromLabel: [2]string{"reason", "shutdown"}, Help: closedHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ClosedShutdown }},
	{Name: "process_rss_anon_bytes", Kind: MetricGauge, Appended: true, PromName: "process_rss_split_bytes", PromLabel: [2]string{"kind", "anon"}, Help: rssSplitHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ProcessRSSAnonBytes }},
	{Name: "process_rss_file_bytes", Kind: MetricGauge, Appended: true, PromName: "process_rss_split_bytes", PromLabel: [2]string{"kind", "file"}, Help: rssSplitHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ProcessRSSFileBytes }},
	{Name: "process_rss_shmem_bytes", Kind: MetricGauge, Appended: true, PromName: "process_rss_split_bytes", PromLabel: [2]string{"kind", "shmem"}, Help: rssSplitHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.ProcessRSSShmemBytes }},
}

// RSSSplitFields names the appended fields that split process_rss_bytes by
// kind, in line order: anonymous, file-backed, shared memory.
var RSSSplitFields = [...]string{"process_rss_anon_bytes", "process_rss_file_bytes", "process_rss_shmem_bytes"}

// SourceCounters is a server's accounting of one configured source prefix
// (TCP_SOURCE_PREFIXES: a name and an address range): what the global
// counters of the same names count, for the connections whose peer address
// lies in the range. On the METRICS line each is a field
// source_<Name>_<counter> ([SourceFieldName]), after every other field of
// this server; on /metrics a series with a prefix="<Name>" label
// ([SourceFields]). On a server whose accounting is exact, Accepted =
// Admitted + Shed() and Admitted = Established + HandshakeRejections +
// HandshakeTimeouts once no handshake is in progress.
type SourceCounters struct {
	// Name is the prefix's name: 1 to 32 of a-z, 0-9, '_' and '-', starting
	// with a letter or digit ([ValidSourcePrefixName]).
	Name string `json:"name"`
	// Accepted counts the accept()s of the prefix's connections.
	Accepted uint64 `json:"accepted"`
	// Admitted counts the connections that passed admission (the connection
	// cap and the handshake limiter) and went on to the TLS handshake.
	Admitted uint64 `json:"admitted"`
	// ShedConnectionLimit, ShedHandshakePerSource, ShedHandshakeOverflow and
	// ShedHandshakeGlobal count the connections refused, by reason.
	ShedConnectionLimit    uint64 `json:"shed_connection_limit"`
	ShedHandshakePerSource uint64 `json:"shed_handshake_per_source"`
	ShedHandshakeOverflow  uint64 `json:"shed_handshake_overflow"`
	ShedHandshakeGlobal    uint64 `json:"shed_handshake_global"`
	// HandshakeRejections and HandshakeTimeouts count failed TLS handshakes
	// and slot waits or handshakes past the timeout.
	HandshakeRejections uint64 `json:"handshake_rejections"`
	HandshakeTimeouts   uint64 `json:"handshake_timeouts"`
	// Established counts the completed TLS handshakes (established_total of
	// the prefix).
	Established uint64 `json:"established"`
	// The closed_* counters count the prefix's established connections that
	// ended, by reason (the global closed_* fields' reasons).
	ClosedByPeer            uint64 `json:"closed_by_peer"`
	ClosedOversizedFrame    uint64 `json:"closed_oversized_frame"`
	ClosedMalformedRequest  uint64 `json:"closed_malformed_request"`
	ClosedIdleTimeout       uint64 `json:"closed_idle_timeout"`
	ClosedIOTimeout         uint64 `json:"closed_io_timeout"`
	ClosedSlowFrameBody     uint64 `json:"closed_slow_frame_body"`
	ClosedFrameBudget       uint64 `json:"closed_frame_budget"`
	ClosedOversizedResponse uint64 `json:"closed_oversized_response"`
	ClosedShutdown          uint64 `json:"closed_shutdown"`
	// RateLimitedResponses counts the status-7 answers of the public-read
	// gate on the prefix's connections.
	RateLimitedResponses uint64 `json:"rate_limited_responses"`
}

// Shed returns the sum of the four shed counters.
func (c SourceCounters) Shed() uint64 {
	return c.ShedConnectionLimit + c.ShedHandshakePerSource + c.ShedHandshakeOverflow + c.ShedHandshakeGlobal
}

// Closed returns the sum of the closed_* counters.
func (c SourceCounters) Closed() uint64 {
	return c.ClosedByPeer + c.ClosedOversizedFrame + c.ClosedMalformedRequest + c.ClosedIdleTimeout + c.ClosedIOTimeout +
		c.ClosedSlowFrameBody + c.ClosedFrameBudget + c.ClosedOversizedResponse + c.ClosedShutdown
}

// Counters returns every counter by its name ([SourceFields] order).
func (c SourceCounters) Counters() map[string]uint64 {
	out := make(map[string]uint64, len(sourceFields))
	for _, f := range sourceFields {
		out[f.Name] = *f.ptr(&c)
	}
	return out
}

// SourceField describes one per-prefix counter: its name (the <counter> of
// source_<prefix>_<counter>) and its Prometheus series, which carries a
// prefix="<name>" label and, where PromLabel is set, that label too.
type SourceField struct {
	// Name is the counter's name ("accepted", "shed_handshake_global", …).
	Name string
	// PromName is the Prometheus metric name without the namespace
	// ("source_accepted_connections_total").
	PromName string
	// PromLabel is the series' label besides prefix, as {name, value}, or
	// empty.
	PromLabel [2]string
	// Help is the Prometheus help text.
	Help string

	ptr func(*SourceCounters) *uint64
}

// Value returns the counter's value in c.
func (f SourceField) Value(c *SourceCounters) uint64 { return *f.ptr(c) }

const (
	sourceShedHelp   = "Connections from a configured source prefix closed before the TLS handshake, by reason."
	sourceClosedHelp = "Established connections from a configured source prefix closed, by reason."
)

// sourceFields is every per-prefix counter in line order. No name is another
// one's tail after an underscore, so a field name splits into prefix and
// counter one way only.
var sourceFields = [...]SourceField{
	{Name: "accepted", PromName: "source_accepted_connections_total", Help: "Connections accepted from a configured source prefix.",
		ptr: func(c *SourceCounters) *uint64 { return &c.Accepted }},
	{Name: "admitted", PromName: "source_admitted_connections_total", Help: "Connections from a configured source prefix that passed admission.",
		ptr: func(c *SourceCounters) *uint64 { return &c.Admitted }},
	{Name: "shed_connection_limit", PromName: "source_shed_connections_total", PromLabel: [2]string{"reason", "connection_limit"}, Help: sourceShedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ShedConnectionLimit }},
	{Name: "shed_handshake_per_source", PromName: "source_shed_connections_total", PromLabel: [2]string{"reason", "handshake_per_source"}, Help: sourceShedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ShedHandshakePerSource }},
	{Name: "shed_handshake_overflow", PromName: "source_shed_connections_total", PromLabel: [2]string{"reason", "handshake_overflow"}, Help: sourceShedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ShedHandshakeOverflow }},
	{Name: "shed_handshake_global", PromName: "source_shed_connections_total", PromLabel: [2]string{"reason", "handshake_global"}, Help: sourceShedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ShedHandshakeGlobal }},
	{Name: "handshake_rejections", PromName: "source_handshake_rejections_total", Help: "Failed TLS handshakes from a configured source prefix.",
		ptr: func(c *SourceCounters) *uint64 { return &c.HandshakeRejections }},
	{Name: "handshake_timeouts", PromName: "source_handshake_timeouts_total", Help: "Handshake slot waits plus handshakes past TCP_HANDSHAKE_TIMEOUT_SECONDS, from a configured source prefix.",
		ptr: func(c *SourceCounters) *uint64 { return &c.HandshakeTimeouts }},
	{Name: "established", PromName: "source_established_total", Help: "TLS handshakes completed from a configured source prefix.",
		ptr: func(c *SourceCounters) *uint64 { return &c.Established }},
	{Name: "closed_by_peer", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "peer"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedByPeer }},
	{Name: "closed_oversized_frame", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "oversized_frame"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedOversizedFrame }},
	{Name: "closed_malformed_request", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "malformed_request"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedMalformedRequest }},
	{Name: "closed_idle_timeout", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "idle_timeout"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedIdleTimeout }},
	{Name: "closed_io_timeout", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "io_timeout"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedIOTimeout }},
	{Name: "closed_slow_frame_body", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "slow_frame_body"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedSlowFrameBody }},
	{Name: "closed_frame_budget", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "frame_budget"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedFrameBudget }},
	{Name: "closed_oversized_response", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "oversized_response"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedOversizedResponse }},
	{Name: "closed_shutdown", PromName: "source_closed_connections_total", PromLabel: [2]string{"reason", "shutdown"}, Help: sourceClosedHelp,
		ptr: func(c *SourceCounters) *uint64 { return &c.ClosedShutdown }},
	{Name: "rate_limited_responses", PromName: "source_rate_limited_responses_total", Help: "Public-read requests answered with status 7 on connections from a configured source prefix.",
		ptr: func(c *SourceCounters) *uint64 { return &c.RateLimitedResponses }},
}

// SourceFields returns the table of per-prefix counters in line order (a
// copy).
func SourceFields() []SourceField { return slices.Clone(sourceFields[:]) }

// LookupSourceField returns the per-prefix counter called name.
func LookupSourceField(name string) (SourceField, bool) {
	for _, f := range sourceFields {
		if f.Name == name {
			return f, true
		}
	}
	return SourceField{}, false
}

// LookupSourceProm returns the per-prefix counter of the Prometheus series
// promName (without the namespace) whose label besides prefix is
// labelName=labelValue ("" and "" for none).
func LookupSourceProm(promName, labelName, labelValue string) (SourceField, bool) {
	for _, f := range sourceFields {
		if f.PromName == promName && f.PromLabel == [2]string{labelName, labelValue} {
			return f, true
		}
	}
	return SourceField{}, false
}

// MaxSourcePrefixNameLen bounds a source prefix's name.
const MaxSourcePrefixNameLen = 32

// ValidSourcePrefixName reports whether name may name a source prefix: 1 to
// 32 of a-z, 0-9, '_' and '-', starting with a letter or digit (so a
// combined run's stream names, "held" or "ddos-1", are prefix names as they
// are).
func ValidSourcePrefixName(name string) bool {
	if name == "" || len(name) > MaxSourcePrefixNameLen || name[0] == '_' || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// sourceFieldPrefix starts every per-prefix field of the METRICS line.
const sourceFieldPrefix = "source_"

// SourceFieldName returns the METRICS field of a prefix's counter:
// source_<prefix>_<counter>.
func SourceFieldName(prefix, counter string) string {
	return sourceFieldPrefix + prefix + "_" + counter
}

// SplitSourceFieldName splits a METRICS field name source_<prefix>_<counter>
// into a valid prefix name and a counter of [SourceFields]; ok is false for
// any other name.
func SplitSourceFieldName(key string) (prefix string, f SourceField, ok bool) {
	rest, found := strings.CutPrefix(key, sourceFieldPrefix)
	if !found {
		return "", SourceField{}, false
	}
	for _, f := range sourceFields {
		if len(rest) > len(f.Name)+1 && strings.HasSuffix(rest, f.Name) && rest[len(rest)-len(f.Name)-1] == '_' {
			p := rest[:len(rest)-len(f.Name)-1]
			if ValidSourcePrefixName(p) {
				return p, f, true
			}
		}
	}
	return "", SourceField{}, false
}

// Source returns the counters of the prefix called name, or nil when the
// reading has none.
func (m *MetricsLine) Source(name string) *SourceCounters {
	for i := range m.Sources {
		if m.Sources[i].Name == name {
			return &m.Sources[i]
		}
	}
	return nil
}

// SetSourceCounter sets the counter called counter of the prefix called
// prefix, adding the prefix (all its counters 0) when the reading has none,
// and reports whether prefix is a valid name and counter a per-prefix
// counter.
func (m *MetricsLine) SetSourceCounter(prefix, counter string, v uint64) bool {
	f, ok := LookupSourceField(counter)
	if !ok || !ValidSourcePrefixName(prefix) {
		return false
	}
	*f.ptr(m.sourceOrAdd(prefix)) = v
	return true
}

func (m *MetricsLine) sourceOrAdd(name string) *SourceCounters {
	if c := m.Source(name); c != nil {
		return c
	}
	m.Sources = append(m.Sources, SourceCounters{Name: name})
	return &m.Sources[len(m.Sources)-1]
}

// SourceNames returns the names of the reading's prefixes, in order.
func (m *MetricsLine) SourceNames() []string {
	out := make([]string, len(m.Sources))
	for i, c := range m.Sources {
		out[i] = c.Name
	}
	return out
}

// upstreamMetricsCount is the number of fields of the upstream line: label,
// elapsed_secs and the table's first 13.
const upstreamMetricsCount = 15

// metricsFieldIndex maps every field name to its position on the line: label
// 0, elapsed_secs 1, then the table's fields from 2.
var metricsFieldIndex = func() map[string]int {
	m := make(map[string]int, 2+len(metricsFields))
	m["label"], m["elapsed_secs"] = 0, 1
	for i, f := range metricsFields {
		m[f.Name] = 2 + i
	}
	return m
}()

// MetricsFields returns the table of every whole-number field in line order
// (a copy).
func MetricsFields() []MetricsField { return slices.Clone(metricsFields[:]) }

// AppendedMetricsFields returns the names of the fields this server prints
// after process_rss_bytes, in order.
func AppendedMetricsFields() []string {
	var out []string
	for _, f := range metricsFields {
		if f.Appended {
			out = append(out, f.Name)
		}
	}
	return out
}

// LookupMetricsField returns the field called name (not label or
// elapsed_secs).
func LookupMetricsField(name string) (MetricsField, bool) {
	i, ok := metricsFieldIndex[name]
	if !ok || i < 2 {
		return MetricsField{}, false
	}
	return metricsFields[i-2], true
}

// IsMetricsCounter reports whether name is a whole-number field of the
// METRICS line: a counter or gauge, process_rss_bytes or an appended field
// (not label or elapsed_secs).
func IsMetricsCounter(name string) bool {
	_, ok := LookupMetricsField(name)
	return ok
}

// SetCounter sets the whole-number field called name (see
// [IsMetricsCounter]), marking it present, and reports whether there is such
// a field.
func (m *MetricsLine) SetCounter(name string, v uint64) bool {
	f, ok := LookupMetricsField(name)
	if ok {
		f.set(m, v)
	}
	return ok
}

// Has reports whether the reading carries the field called name: the
// upstream fields always (process_rss_bytes even when null), an appended
// field unless it is listed in Absent.
func (m *MetricsLine) Has(name string) bool {
	f, ok := LookupMetricsField(name)
	return ok && (!f.Appended || !m.isAbsent(name))
}

func (m *MetricsLine) isAbsent(name string) bool {
	return len(m.Absent) > 0 && slices.Contains(m.Absent, name)
}

func (m *MetricsLine) markPresent(name string) {
	if i := slices.Index(m.Absent, name); i >= 0 {
		m.Absent = slices.Delete(slices.Clone(m.Absent), i, i+1)
		if len(m.Absent) == 0 {
			m.Absent = nil
		}
	}
}

// WithoutAppended returns a reading with only the upstream fields, as an
// upstream Rust server reports: every appended field is zeroed and listed in
// Absent, and the per-prefix counters are dropped. Scrapes start from it and
// mark what they find.
func WithoutAppended(m MetricsLine) MetricsLine {
	for _, f := range metricsFields {
		if f.Appended {
			*f.ptr(&m) = 0
		}
	}
	m.Absent = AppendedMetricsFields()
	m.Sources = nil
	return m
}

// Pending returns the connections accepted but not yet through admission:
// AcceptedConnections minus every outcome counter (EstablishedTotal, the two
// handshake failures and the four shed counters). On a server whose
// accounting is exact it is HandshakesInProgress, and 0 once the server is
// quiet.
func (m MetricsLine) Pending() int64 {
	done := m.EstablishedTotal + m.HandshakeRejections + m.HandshakeTimeouts + m.ShedConnectionLimit +
		m.ShedHandshakePerSource + m.ShedHandshakeOverflow + m.ShedHandshakeGlobal
	return int64(m.AcceptedConnections) - int64(done)
}

// Closed returns the sum of the closed_* counters: established connections
// that have ended. EstablishedTotal = EstablishedConnections + Closed() on
// this server.
func (m MetricsLine) Closed() uint64 {
	return m.ClosedByPeer + m.ClosedOversizedFrame + m.ClosedMalformedRequest + m.ClosedIdleTimeout + m.ClosedIOTimeout +
		m.ClosedSlowFrameBody + m.ClosedFrameBudget + m.ClosedOversizedResponse + m.ClosedShutdown
}

// Admitted returns the server's count of connections that passed admission
// (the limiter), when the server reports one (an appended "admitted" or
// "handshakes_admitted" field), and otherwise accepted minus the sheds, which
// is the same number for a server whose accounting holds.
func (m MetricsLine) Admitted() uint64 {
	for _, k := range []string{"admitted", "handshakes_admitted", "admitted_connections"} {
		if v, ok := m.Extra[k]; ok {
			return uint64(v)
		}
	}
	shed := m.ShedConnectionLimit + m.ShedHandshakePerSource + m.ShedHandshakeOverflow + m.ShedHandshakeGlobal
	if shed > m.AcceptedConnections {
		return 0
	}
	return m.AcceptedConnections - shed
}

// HandshakesCompleted returns the server's cumulative count of completed TLS
// handshakes, when it reports one (established_total, or a numeric field of
// another common name in Extra); ok is false otherwise
// (established_connections is a gauge and cannot stand in).
func (m MetricsLine) HandshakesCompleted() (uint64, bool) {
	// Extra first: a reading from another server, or a result file written
	// before established_total was a field of its own.
	for _, k := range []string{"handshakes_completed", "established_total", "established", "handshakes_ok"} {
		if v, ok := m.Extra[k]; ok {
			return uint64(v), true
		}
	}
	if m.Has("established_total") {
		return m.EstablishedTotal, true
	}
	return 0, false
}

// SumMetricsLines adds several processes' readings into one, as the
// --processes parent reports them: every counter and gauge is summed,
// process_rss_bytes is the sum of the known values (nil when none is known),
// a field absent from any reading is absent from the sum, the per-prefix
// counters are summed prefix by prefix (in the order the prefixes first
// appear), and Extra is dropped. Label and ElapsedSecs are left zero for the
// caller to set.
func SumMetricsLines(lines ...MetricsLine) MetricsLine {
	var t MetricsLine
	var absent []string
	for _, m := range lines {
		for i := range m.Sources {
			c := &m.Sources[i]
			sum := t.sourceOrAdd(c.Name)
			for _, f := range sourceFields {
				*f.ptr(sum) += *f.ptr(c)
			}
		}
		for _, f := range metricsFields {
			v, ok := f.Value(&m)
			switch {
			case ok && f.ptr == nil:
				if t.ProcessRSSBytes != nil {
					v += *t.ProcessRSSBytes
				}
				t.ProcessRSSBytes = &v
			case ok:
				*f.ptr(&t) += v
			case f.Appended && !slices.Contains(absent, f.Name):
				absent = append(absent, f.Name)
			}
		}
	}
	for _, f := range metricsFields { // keep line order
		if slices.Contains(absent, f.Name) {
			t.Absent = append(t.Absent, f.Name)
		}
	}
	return t
}

// AppendMetricsLine appends the METRICS line of m to dst, without a newline:
// [MetricsPrefix] and compact JSON with label, elapsed_secs and the fields of
// [MetricsFields] in order (the appended ones unless Absent), then the
// per-prefix counters (source_<name>_<counter>, prefix by prefix in order,
// each prefix's counters in [SourceFields] order; a prefix whose name is not
// valid is left out), then the Extra fields in key order. elapsed_secs is formatted like serde_json formats an
// f64 ([AppendSerdeFloat]); process_rss_bytes is null when nil.
func AppendMetricsLine(dst []byte, m MetricsLine) []byte {
	dst = append(dst, MetricsPrefix...)
	dst = append(dst, `{"label":`...)
	dst = appendJSONString(dst, m.Label)
	dst = append(dst, `,"elapsed_secs":`...)
	dst = AppendSerdeFloat(dst, m.ElapsedSecs)
	for _, f := range metricsFields {
		v, ok := f.Value(&m)
		switch {
		case ok:
			dst = appendUintField(dst, f.Name, v)
		case !f.Appended: // process_rss_bytes, null
			dst = append(dst, `,"`...)
			dst = append(dst, f.Name...)
			dst = append(dst, `":null`...)
		}
	}
	for i := range m.Sources {
		c := &m.Sources[i]
		if !ValidSourcePrefixName(c.Name) {
			continue
		}
		for _, f := range sourceFields {
			dst = append(dst, ',', '"')
			dst = append(dst, sourceFieldPrefix...)
			dst = append(dst, c.Name...)
			dst = append(dst, '_')
			dst = append(dst, f.Name...)
			dst = append(dst, '"', ':')
			dst = strconv.AppendUint(dst, *f.ptr(c), 10)
		}
	}
	if len(m.Extra) > 0 {
		keys := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			if _, named := metricsFieldIndex[k]; named {
				continue
			}
			if _, _, src := SplitSourceFieldName(k); src {
				continue // the parser never puts one in Extra
			}
			keys = append(keys, k)
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

// FormatMetricsLine returns the METRICS line of m without a newline.
func FormatMetricsLine(m MetricsLine) string { return string(AppendMetricsLine(nil, m)) }

// WriteMetricsLine writes the METRICS line of m with a newline, in one write.
func WriteMetricsLine(w io.Writer, m MetricsLine) error {
	b := AppendMetricsLine(make([]byte, 0, 1024), m)
	_, err := w.Write(append(b, '\n'))
	return err
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
//   - the 15 fields of the upstream line are all present, in their order,
//     before any other field;
//   - label is "running" or "final", elapsed_secs a finite number of seconds
//     (0 or more), every counter and gauge a whole number that fits in 64
//     bits and process_rss_bytes such a number or null;
//   - the appended fields of [MetricsFields], when present, are whole
//     numbers (null counts as absent), in any order after the upstream ones;
//   - the per-prefix fields source_<name>_<counter> (a valid prefix name and
//     a counter of [SourceFields]) are whole numbers or null, in any order
//     after the upstream ones;
//   - no field appears twice.
//
// Appended fields the line lacks are listed in Absent. The per-prefix fields
// go to Sources, prefix by prefix in the order the prefixes first appear (a
// counter of a prefix the line does not give is 0). Other fields are kept
// in Extra when they are finite numbers and skipped otherwise. A line without
// the prefix gives an error wrapping [ErrNotMetricsLine]; every other error
// names the problem.
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
		seen    [2 + len(metricsFields)]bool
		present [2 + len(metricsFields)]bool // seen with a non-null value
		others  map[string]bool              // fields outside the named ones, seen so far
		maxRank = -1                         // highest order rank so far
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
		rank := upstreamMetricsCount
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
		set, err := m.set(key, idx, named, raw)
		if err != nil {
			return MetricsLine{}, err
		}
		if named {
			present[idx] = set
		}
	}
	if _, err := dec.Token(); err != nil {
		return MetricsLine{}, invalidJSON(err)
	}
	if rest := strings.Trim(body[dec.InputOffset():], " \t\r\n"); rest != "" {
		return MetricsLine{}, metricsErrorf("%d unexpected bytes after the JSON object", len(rest))
	}
	var missing []string
	for name, i := range metricsFieldIndex {
		if i < upstreamMetricsCount && !seen[i] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(a, b int) bool { return metricsFieldIndex[missing[a]] < metricsFieldIndex[missing[b]] })
		return MetricsLine{}, metricsErrorf("missing required fields %v", missing)
	}
	for i, f := range metricsFields {
		if f.Appended && !present[2+i] {
			m.Absent = append(m.Absent, f.Name)
		}
	}
	return m, nil
}

// set stores the value of one field and reports whether it held a value
// (not null).
func (m *MetricsLine) set(key string, idx int, named bool, raw json.RawMessage) (bool, error) {
	text := string(raw)
	if !named {
		if prefix, f, ok := SplitSourceFieldName(key); ok {
			if text == "null" {
				return false, nil
			}
			v, err := strconv.ParseUint(text, 10, 64)
			if err != nil {
				return false, metricsErrorf("%s is %s: must be a whole number from 0 to 2^64-1", key, truncate(text, 40))
			}
			*f.ptr(m.sourceOrAdd(prefix)) = v
			return true, nil
		}
		if isJSONNumber(text) {
			if f, err := strconv.ParseFloat(text, 64); err == nil {
				if m.Extra == nil {
					m.Extra = map[string]float64{}
				}
				m.Extra[key] = f
			}
		}
		return false, nil
	}
	switch idx {
	case 0:
		var s string
		if text[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return false, metricsErrorf("label is %s: must be \"running\" or \"final\"", truncate(text, 40))
		}
		if s != "running" && s != "final" {
			return false, metricsErrorf("label is %q: must be \"running\" or \"final\"", truncate(s, 40))
		}
		m.Label = s
		return true, nil
	case 1:
		f, err := strconv.ParseFloat(text, 64)
		if !isJSONNumber(text) || err != nil || f < 0 || math.IsInf(f, 0) {
			return false, metricsErrorf("elapsed_secs is %s: must be a finite number of seconds, 0 or more", truncate(text, 40))
		}
		m.ElapsedSecs = f
		return true, nil
	}
	f := metricsFields[idx-2]
	if text == "null" && (f.ptr == nil || f.Appended) {
		return false, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		if f.ptr == nil {
			return false, metricsErrorf("%s is %s: must be a whole number of bytes or null", key, truncate(text, 40))
		}
		return false, metricsErrorf("%s is %s: must be a whole number from 0 to 2^64-1", key, truncate(text, 40))
	}
	if f.ptr == nil {
		m.ProcessRSSBytes = &v
	} else {
		*f.ptr(m) = v
	}
	return true, nil
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
