package linkkeys

// The METRICS line of the load-test server (the upstream fields:
// docs/protocol-linkkeys.md, METRICS line; the ones appended after them:
// docs/upstream-differences.md), written by linkkeysserver and read by
// linkkeysload and by the --processes parent. One field table (metricsFields)
// drives the line's order, the parser, the sums of several processes and the
// Prometheus names, so none of them can drift from the others.

import (
	"errors"
	"slices"
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

	// The server host's TCP counters for the network namespace the server
	// runs in, as differences since the server started (never below 0):
	// TcpExt ListenOverflows, ListenDrops, TCPDSACKRecv and SyncookiesSent
	// (/proc/net/netstat) and Tcp RetransSegs (/proc/net/snmp). They count
	// every socket of the namespace, the server's and any other's. Absent
	// when the server cannot read them (off Linux, or /proc unreadable).
	HostTCPListenOverflows uint64 `json:"host_tcp_listen_overflows"`
	HostTCPListenDrops     uint64 `json:"host_tcp_listen_drops"`
	HostTCPRetransSegs     uint64 `json:"host_tcp_retrans_segs"`
	HostTCPDSACKRecv       uint64 `json:"host_tcp_dsack_recv"`
	HostTCPSyncookiesSent  uint64 `json:"host_tcp_syncookies_sent"`

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
	// Host is set for the fields that count for the server's host (its
	// network namespace) rather than its process: every process of one
	// server reports the same counter, so [SumMetricsLines] takes the
	// largest instead of adding them.
	Host bool
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
	hostTCPHelp  = " on the server host's network namespace since the server started (kernel TCP counters; every socket of the namespace)."
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
	{Name: "host_tcp_listen_overflows", Appended: true, Host: true, PromName: "host_tcp_listen_overflows_total", Help: "Listen queue overflows (TcpExt ListenOverflows)" + hostTCPHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.HostTCPListenOverflows }},
	{Name: "host_tcp_listen_drops", Appended: true, Host: true, PromName: "host_tcp_listen_drops_total", Help: "Connection requests dropped at listen (TcpExt ListenDrops)" + hostTCPHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.HostTCPListenDrops }},
	{Name: "host_tcp_retrans_segs", Appended: true, Host: true, PromName: "host_tcp_retrans_segs_total", Help: "TCP segments retransmitted (Tcp RetransSegs)" + hostTCPHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.HostTCPRetransSegs }},
	{Name: "host_tcp_dsack_recv", Appended: true, Host: true, PromName: "host_tcp_dsack_recv_total", Help: "Duplicate SACKs received: retransmissions the peer already had (TcpExt TCPDSACKRecv)" + hostTCPHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.HostTCPDSACKRecv }},
	{Name: "host_tcp_syncookies_sent", Appended: true, Host: true, PromName: "host_tcp_syncookies_sent_total", Help: "SYN cookies sent (TcpExt SyncookiesSent)" + hostTCPHelp,
		ptr: func(m *MetricsLine) *uint64 { return &m.HostTCPSyncookiesSent }},
}

// RSSSplitFields names the appended fields that split process_rss_bytes by
// kind, in line order: anonymous, file-backed, shared memory.
var RSSSplitFields = [...]string{"process_rss_anon_bytes", "process_rss_file_bytes", "process_rss_shmem_bytes"}

// HostTCPFields names the appended fields of the server host's TCP counters,
// in line order: listen overflows, listen drops, retransmitted segments,
// DSACKs received, SYN cookies sent.
var HostTCPFields = [...]string{"host_tcp_listen_overflows", "host_tcp_listen_drops", "host_tcp_retrans_segs", "host_tcp_dsack_recv", "host_tcp_syncookies_sent"}

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
