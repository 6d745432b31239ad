package linkkeysload

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// The combined command's configuration: its streams, their source ranges, and the checks of both
// (one Validate); the server variable that counts each range under its stream's name.

// CombinedConfig is the combined command. At least one stream is required.
type CombinedConfig struct {
	Target         Target        `json:"target"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	// DDoSTimeout bounds a ddos attempt; 0 means AttemptTimeout.
	DDoSTimeout time.Duration    `json:"ddos_timeout,omitempty"`
	Held        *HeldStream      `json:"held,omitempty"`
	Handshakes  *HandshakeStream `json:"handshakes,omitempty"`
	Requests    *RequestStream   `json:"requests,omitempty"`
	DDoS        []DDoSWave       `json:"ddos,omitempty"`
	// Start is the run's coordinated start (every worker process starts its streams from it); zero
	// starts at once.
	Start time.Time `json:"start,omitzero"`
	// OthersGate, when set, is the Unix socket that closes once the processes running the run's
	// other streams have exited (Run.StreamProcesses): the held population is held until then too.
	// The parent sets it in its workers' specs.
	OthersGate string `json:"others_gate,omitempty"`
}

// HeldStream is the held population.
type HeldStream struct {
	Count       uint32  `json:"count"`
	Concurrency uint32  `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	// HoldSecs is the least time the population is held after its ramp; it is held on until every
	// other stream has ended.
	HoldSecs  uint64      `json:"hold_secs"`
	StartSecs float64     `json:"start_secs,omitempty"`
	Sources   SourceAddrs `json:"sources"`
}

// HandshakeStream is the connect-handshake-close stream.
type HandshakeStream struct {
	Concurrency  uint32      `json:"concurrency"`
	Rate         float64     `json:"rate,omitempty"`
	Resume       bool        `json:"resume,omitempty"`
	StartSecs    float64     `json:"start_secs,omitempty"`
	DurationSecs uint64      `json:"duration_secs"`
	Sources      SourceAddrs `json:"sources"`
}

// RequestStream is the request stream over persistent connections.
type RequestStream struct {
	Connections  uint32      `json:"connections"`
	Pipeline     uint32      `json:"pipeline,omitempty"`
	Rate         float64     `json:"rate,omitempty"`
	Op           string      `json:"op"`
	StartSecs    float64     `json:"start_secs,omitempty"`
	DurationSecs uint64      `json:"duration_secs"`
	Sources      SourceAddrs `json:"sources"`
}

// DDoSWave is one ddos wave: one attempt from each of Sources addresses from Base.
type DDoSWave struct {
	// Name names the wave's stream; empty means "ddos-<n>" (1-based, in order).
	Name        string  `json:"name,omitempty"`
	StartSecs   float64 `json:"start_secs,omitempty"`
	Sources     uint32  `json:"sources"`
	Concurrency uint32  `json:"concurrency"`
	Base        IPv4    `json:"client_ip_base"`
}

// SourceRange is the addresses one stream binds: Count addresses from First.
type SourceRange struct {
	Stream string
	First  IPv4
	Count  uint32
}

// Last returns the range's last address.
func (r SourceRange) Last() IPv4 { return IPv4(uint32(r.First) + max(r.Count, 1) - 1) }

// WaveName returns the stream name of wave i (0-based).
func (c CombinedConfig) WaveName(i int) string {
	if n := c.DDoS[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("ddos-%d", i+1)
}

// SourceRanges lists every stream's source range, in stream order.
func (c CombinedConfig) SourceRanges() []SourceRange {
	var out []SourceRange
	if h := c.Held; h != nil {
		out = append(out, SourceRange{linkkeysresult.StreamHeld, h.Sources.Base, max(h.Sources.Count, 1)})
	}
	if h := c.Handshakes; h != nil {
		out = append(out, SourceRange{linkkeysresult.StreamHandshakes, h.Sources.Base, max(h.Sources.Count, 1)})
	}
	if q := c.Requests; q != nil {
		out = append(out, SourceRange{linkkeysresult.StreamRequests, q.Sources.Base, max(q.Sources.Count, 1)})
	}
	for i, w := range c.DDoS {
		out = append(out, SourceRange{c.WaveName(i), w.Base, w.Sources})
	}
	return out
}

// streamName is what a stream name may be: it becomes a key prefix in results and, on the
// server, a metric-name component.
var streamName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })

// CheckSourceRanges reports every range that wraps inside its /8 (its addresses would not be
// consecutive) and every pair that overlaps, all at once.
func CheckSourceRanges(ranges []SourceRange) error {
	var errs []error
	for _, r := range ranges {
		if uint64(r.First&0xFFFFFF)+uint64(r.Count) > 1<<24 {
			errs = append(errs, fmt.Errorf("stream %s: %d sources from %s run past %s", r.Stream, r.Count, r.First, IPv4(uint32(r.First)|0xFFFFFF)))
		}
	}
	for i := range ranges {
		for j := i + 1; j < len(ranges); j++ {
			a, b := ranges[i], ranges[j]
			if a.First <= b.Last() && b.First <= a.Last() {
				errs = append(errs, fmt.Errorf("streams %s (%s–%s) and %s (%s–%s) share source addresses; give each stream its own range",
					a.Stream, a.First, a.Last(), b.Stream, b.First, b.Last()))
			}
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem of the configuration at once, as a *UsageError.
func (c CombinedConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Held == nil && c.Handshakes == nil && c.Requests == nil && len(c.DDoS) == 0 {
		bad("no stream: give at least one of the held population, the handshake stream, the request stream or a ddos wave")
	}
	offset := func(name string, s float64) {
		if math.IsNaN(s) || s < 0 || s > 86400 {
			bad("stream %s: start offset %v s must be between 0 and 86400", name, s)
		}
	}
	rate := func(name string, r float64) {
		if math.IsNaN(r) || r < 0 || r > 1e9 {
			bad("stream %s: rate %v must be a number from 0 (unpaced) to 1e9 per second", name, r)
		}
	}
	if h := c.Held; h != nil {
		if h.Count == 0 || h.Concurrency == 0 {
			bad("stream held: count %d and concurrency %d must be at least 1", h.Count, h.Concurrency)
		}
		offset("held", h.StartSecs)
		rate("held", h.Rate)
	}
	if h := c.Handshakes; h != nil {
		if h.Concurrency == 0 || h.DurationSecs == 0 {
			bad("stream handshakes: concurrency %d and duration %d s must be at least 1", h.Concurrency, h.DurationSecs)
		}
		offset("handshakes", h.StartSecs)
		rate("handshakes", h.Rate)
	}
	if q := c.Requests; q != nil {
		if q.Connections == 0 || q.DurationSecs == 0 {
			bad("stream requests: connections %d and duration %d s must be at least 1", q.Connections, q.DurationSecs)
		}
		if err := checkOp("--request-op", q.Op); err != nil {
			bad("stream requests: %v", err)
		}
		offset("requests", q.StartSecs)
		rate("requests", q.Rate)
	}
	names := map[string]bool{}
	for _, r := range c.SourceRanges() {
		if !streamName().MatchString(r.Stream) {
			bad("stream name %q: use 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter", r.Stream)
		}
		if names[r.Stream] {
			bad("stream name %q is used twice", r.Stream)
		}
		names[r.Stream] = true
	}
	for i, w := range c.DDoS {
		if w.Sources == 0 || w.Concurrency == 0 {
			bad("stream %s: sources %d and concurrency %d must be at least 1", c.WaveName(i), w.Sources, w.Concurrency)
		}
		offset(c.WaveName(i), w.StartSecs)
	}
	if err := CheckSourceRanges(c.SourceRanges()); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return usagef("combined: %w", errors.Join(errs...))
	}
	return nil
}

// Sockets is the most sockets the run holds at once in total (for the worker count).
func (c CombinedConfig) Sockets() int64 {
	var n int64
	if h := c.Held; h != nil {
		n += int64(h.Count)
	}
	if h := c.Handshakes; h != nil {
		n += int64(h.Concurrency)
	}
	if q := c.Requests; q != nil {
		n += int64(q.Connections)
	}
	for _, w := range c.DDoS {
		n += int64(w.Concurrency)
	}
	return n
}

// SourceUses are the streams' source ranges with the sockets each holds open at once, for
// CheckSources: the held population and the request connections must all be open at once.
func (c CombinedConfig) SourceUses() []SourceUse {
	var out []SourceUse
	if h := c.Held; h != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamHeld, h.Sources.Base, max(h.Sources.Count, 1)}, Sockets: int64(h.Count), MustHold: true})
	}
	if h := c.Handshakes; h != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamHandshakes, h.Sources.Base, max(h.Sources.Count, 1)}, Sockets: int64(h.Concurrency)})
	}
	if q := c.Requests; q != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamRequests, q.Sources.Base, max(q.Sources.Count, 1)}, Sockets: int64(q.Connections), MustHold: true})
	}
	for i, w := range c.DDoS {
		out = append(out, SourceUse{Range: SourceRange{c.WaveName(i), w.Base, w.Sources}, Sockets: int64(w.Concurrency)})
	}
	return out
}

// SourcePrefixes returns the TCP_SOURCE_PREFIXES value under which a server counts each stream's
// source range by the stream's name ("held=127.0.1.0/27,ddos-1=127.6.0.0-127.6.4.175"): a CIDR
// where the range is exactly one, else FIRST-LAST. It is "" for a configuration whose ranges wrap
// inside their /8 (Validate refuses those).
func (c CombinedConfig) SourcePrefixes() string {
	var parts []string
	for _, r := range c.SourceRanges() {
		first, n := uint32(r.First), uint64(max(r.Count, 1))
		if uint64(first&0xFFFFFF)+n > 1<<24 {
			return ""
		}
		last := IPv4(first + uint32(n-1))
		spec := r.First.String() + "-" + last.String()
		if n&(n-1) == 0 && uint64(first)%n == 0 {
			spec = fmt.Sprintf("%s/%d", r.First, 32-bitsLen(n-1))
		}
		parts = append(parts, r.Stream+"="+spec)
	}
	return strings.Join(parts, ",")
}

func bitsLen(v uint64) int {
	n := 0
	for ; v > 0; v >>= 1 {
		n++
	}
	return n
}

// PrefixNote says which of the configuration's streams a server reading counts no source prefix
// for ("" when it counts every one), and the TCP_SOURCE_PREFIXES value that would attribute them.
func (c CombinedConfig) PrefixNote(m linkkeys.MetricsLine) string {
	var missing []string
	for _, name := range c.CombinedNames() {
		if m.Source(name) == nil {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) == 0:
		return ""
	case len(m.Sources) == 0:
		return "the server counts no source prefix, so the streams' server figures are not attributed (only the whole run's); " +
			"start it with " + SourcePrefixesVar + "=" + c.SourcePrefixes() + " for each stream's own"
	}
	return fmt.Sprintf("the server counts source prefixes %s but not %s, whose server figures are not attributed; start it with %s=%s",
		strings.Join(m.SourceNames(), ", "), strings.Join(missing, ", "), SourcePrefixesVar, c.SourcePrefixes())
}

// SourcePrefixesVar is the server variable that names source prefixes (the reference server's
// TCP_SOURCE_PREFIXES).
const SourcePrefixesVar = "TCP_SOURCE_PREFIXES"

// CombinedNames lists the stream names of a configuration, in stream order.
func (c CombinedConfig) CombinedNames() []string {
	var out []string
	for _, r := range c.SourceRanges() {
		out = append(out, r.Stream)
	}
	return out
}
