package linkkeys

import (
	"slices"
	"strings"
)

// Per-prefix accounting on the METRICS line: a server counts each configured source prefix apart
// (source_<prefix>_<counter> fields), so a load client can check its own share exactly.

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
