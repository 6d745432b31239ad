package linkkeysserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/loadproof/loadproof/internal/envvar"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Source prefixes (TCP_SOURCE_PREFIXES, this server's addition): named address ranges under which
// the server counts, besides its global counters, the accounting of the connections whose peer
// address falls in each range: accepted, admitted, shed by reason, handshake rejections and
// timeouts, handshakes completed, closed by reason and public-read rate-limited responses
// (linkkeys.SourceCounters). A load test that gives each of its streams its own source range (the
// combined command) reads each stream's own accounting from them, exactly, however many streams
// see failures. The counters are kept where the global ones are counted: the accept loop looks the
// peer up once per accepted connection (a scan of at most MaxSourcePrefixes ranges), and the
// connection remembers its prefix in one byte. With no prefix configured nothing is looked up.

// SourcePrefixesVar is the variable that configures the source prefixes.
const SourcePrefixesVar = "TCP_SOURCE_PREFIXES"

// MaxSourcePrefixes bounds the configured source prefixes.
const MaxSourcePrefixes = 16

// SourcePrefix is one named source range: every address from First to Last, inclusive, of one
// family (IPv4 or IPv6). A CIDR is the range of its addresses.
type SourcePrefix struct {
	Name        string
	First, Last netip.Addr
}

// String returns the prefix as TCP_SOURCE_PREFIXES spells it: NAME=CIDR when the range is exactly
// one CIDR ("held=127.1.0.0/16", "one=127.0.0.9/32"), else NAME=FIRST-LAST.
func (p SourcePrefix) String() string { return p.Name + "=" + p.Range() }

// Range returns the range alone, as String spells it.
func (p SourcePrefix) Range() string {
	if c, ok := rangeCIDR(p.First, p.Last); ok {
		return c.String()
	}
	return p.First.String() + "-" + p.Last.String()
}

// Contains reports whether a is in the range.
func (p SourcePrefix) Contains(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return p.First.BitLen() == a.BitLen() && p.First.Compare(a) <= 0 && a.Compare(p.Last) <= 0
}

// rangeCIDR returns the CIDR whose addresses are exactly first..last, if there is one.
func rangeCIDR(first, last netip.Addr) (netip.Prefix, bool) {
	if !first.IsValid() || first.BitLen() != last.BitLen() {
		return netip.Prefix{}, false
	}
	for bits := first.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(first, bits)
		if p.Masked().Addr() != first {
			break
		}
		if lastOf(p) == last {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// lastOf returns the last address of a masked prefix.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// FormatSourcePrefixes returns the prefixes as one TCP_SOURCE_PREFIXES value.
func FormatSourcePrefixes(ps []SourcePrefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// sourcePrefixForm is what a TCP_SOURCE_PREFIXES value may be, for error messages.
var sourcePrefixForm = fmt.Sprintf("a comma-separated list of NAME=CIDR, NAME=FIRST-LAST or NAME=ADDRESS "+
	"(NAME 1 to %d of a-z, 0-9, '_' and '-', starting with a letter or digit), at most %d, "+
	"no name twice and no two ranges sharing an address, such as held=127.1.0.0/16,ddos-1=127.2.0.1-127.2.4.176",
	linkkeys.MaxSourcePrefixNameLen, MaxSourcePrefixes)

// ParseSourcePrefixes parses a TCP_SOURCE_PREFIXES value: comma-separated entries NAME=CIDR (host
// bits are ignored, as in PUBLIC_READ_TRUSTED_PROXIES), NAME=FIRST-LAST (an inclusive range of one
// family) or NAME=ADDRESS (one address); white space around entries and parts is ignored, an empty
// entry is skipped, and a blank value is no prefix. IPv4-mapped IPv6 addresses are taken as IPv4,
// like the peer addresses they are matched against. Every problem is returned (see
// CheckSourcePrefixes for the rules across entries), each as a sentence naming the entry.
func ParseSourcePrefixes(raw string) ([]SourcePrefix, []string) {
	var out []SourcePrefix
	var problems []string
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, spec, ok := strings.Cut(entry, "=")
		name, spec = strings.TrimSpace(name), strings.TrimSpace(spec)
		if !ok {
			problems = append(problems, fmt.Sprintf("entry %q has no '=': give NAME=RANGE", entry))
			continue
		}
		p, err := parseSourceRange(spec)
		if err != "" {
			problems = append(problems, fmt.Sprintf("entry %q: %s", entry, err))
			continue
		}
		p.Name = name
		out = append(out, p)
	}
	problems = append(problems, CheckSourcePrefixes(out)...)
	return out, problems
}

func parseSourceRange(spec string) (SourcePrefix, string) {
	switch {
	case strings.Contains(spec, "/"):
		c, err := netip.ParsePrefix(spec)
		if err != nil || c.Addr().Zone() != "" {
			return SourcePrefix{}, fmt.Sprintf("%q is not a CIDR", spec)
		}
		c = c.Masked()
		if c.Addr().Is4In6() && c.Bits() >= 96 {
			c = netip.PrefixFrom(c.Addr().Unmap(), c.Bits()-96)
		}
		return SourcePrefix{First: c.Addr(), Last: lastOf(c)}, ""
	case strings.Contains(spec, "-"):
		a, b, _ := strings.Cut(spec, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || first.Zone() != "" || last.Zone() != "" {
			return SourcePrefix{}, fmt.Sprintf("%q is not a range FIRST-LAST of two IP addresses", spec)
		}
		first, last = first.Unmap(), last.Unmap()
		if first.BitLen() != last.BitLen() {
			return SourcePrefix{}, fmt.Sprintf("range %q mixes IPv4 and IPv6", spec)
		}
		if last.Less(first) {
			return SourcePrefix{}, fmt.Sprintf("range %q ends before it starts", spec)
		}
		return SourcePrefix{First: first, Last: last}, ""
	}
	a, err := netip.ParseAddr(spec)
	if err != nil || a.Zone() != "" {
		return SourcePrefix{}, fmt.Sprintf("%q is not an IP address, CIDR or range FIRST-LAST", spec)
	}
	a = a.Unmap()
	return SourcePrefix{First: a, Last: a}, ""
}

// CheckSourcePrefixes returns every problem of a set of prefixes: a name that is not 1 to 32 of
// a-z, 0-9, '_' and '-' starting with a letter or digit, a name used twice, a range that is not
// FIRST <= LAST of one family, two ranges sharing an address, more than MaxSourcePrefixes.
func CheckSourcePrefixes(ps []SourcePrefix) []string {
	var problems []string
	if len(ps) > MaxSourcePrefixes {
		problems = append(problems, fmt.Sprintf("%d prefixes are more than the %d a server counts", len(ps), MaxSourcePrefixes))
	}
	seen := map[string]bool{}
	for i, p := range ps {
		if !linkkeys.ValidSourcePrefixName(p.Name) {
			problems = append(problems, fmt.Sprintf("name %q of %s is not 1 to %d of a-z, 0-9, '_' and '-' starting with a letter or digit",
				p.Name, p.Range(), linkkeys.MaxSourcePrefixNameLen))
		} else if seen[p.Name] {
			problems = append(problems, fmt.Sprintf("name %q is given twice", p.Name))
		}
		seen[p.Name] = true
		if !p.First.IsValid() || !p.Last.IsValid() || p.First.BitLen() != p.Last.BitLen() || p.Last.Less(p.First) ||
			p.First.Is4In6() || p.Last.Is4In6() || p.First.Zone() != "" || p.Last.Zone() != "" {
			problems = append(problems, fmt.Sprintf("prefix %q: %s to %s is not a range of one family, first address first", p.Name, p.First, p.Last))
			continue
		}
		for _, q := range ps[:i] {
			if q.First.IsValid() && q.Last.IsValid() && q.First.BitLen() == p.First.BitLen() &&
				p.First.Compare(q.Last) <= 0 && q.First.Compare(p.Last) <= 0 {
				problems = append(problems, fmt.Sprintf("prefixes %q (%s) and %q (%s) share addresses; a connection must count under one prefix",
					q.Name, q.Range(), p.Name, p.Range()))
			}
		}
	}
	return problems
}

// envSourcePrefixes reads TCP_SOURCE_PREFIXES; every problem is its own *envvar.Error.
func envSourcePrefixes(getenv func(string) string) ([]SourcePrefix, []error) {
	raw := getenv(SourcePrefixesVar)
	if envvar.IsBlank(raw) {
		return nil, nil
	}
	ps, problems := ParseSourcePrefixes(raw)
	var errs []error
	for _, p := range problems {
		errs = append(errs, &envvar.Error{Name: SourcePrefixesVar, Value: raw, Accepted: p + "; must be " + sourcePrefixForm})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return ps, nil
}

// shedReason indexes a prefix's shed counters.
type shedReason uint8

const (
	shedConnLimit shedReason = iota
	shedPerSource
	shedOverflow
	shedGlobal
	numShedReasons
)

// sourceCounts are one prefix's counters, on cache lines of their own.
type sourceCounts struct {
	accepted     atomic.Uint64
	admitted     atomic.Uint64
	shed         [numShedReasons]atomic.Uint64
	hsRejections atomic.Uint64
	hsTimeouts   atomic.Uint64
	established  atomic.Uint64
	closed       [numCloseReasons]atomic.Uint64
	rateLimited  atomic.Uint64
	_            [64]byte
}

// sourceRange is a prefix's range in the form the accept loop matches fastest.
type sourceRange struct {
	v4       bool
	lo4, hi4 uint32
	lo, hi   netip.Addr
}

// sourceSet is the server's configured prefixes and their counters. Index 0 means "no prefix";
// prefix i is index i+1, which fits the byte a connection keeps.
type sourceSet struct {
	names  []string
	ranges []sourceRange
	counts []sourceCounts
}

func newSourceSet(ps []SourcePrefix) *sourceSet {
	if len(ps) == 0 {
		return nil
	}
	s := &sourceSet{counts: make([]sourceCounts, len(ps))}
	for _, p := range ps {
		r := sourceRange{v4: p.First.Is4(), lo: p.First, hi: p.Last}
		if r.v4 {
			a, b := p.First.As4(), p.Last.As4()
			r.lo4, r.hi4 = binary.BigEndian.Uint32(a[:]), binary.BigEndian.Uint32(b[:])
		}
		s.names = append(s.names, p.Name)
		s.ranges = append(s.ranges, r)
	}
	return s
}

// match returns the index of the prefix a (an unmapped peer address) falls in, or 0.
func (s *sourceSet) match(a netip.Addr) uint8 {
	if a.Is4() {
		b := a.As4()
		v := binary.BigEndian.Uint32(b[:])
		for i := range s.ranges {
			if r := &s.ranges[i]; r.v4 && r.lo4 <= v && v <= r.hi4 {
				return uint8(i + 1)
			}
		}
		return 0
	}
	a = a.WithZone("")
	for i := range s.ranges {
		if r := &s.ranges[i]; !r.v4 && r.lo.Compare(a) <= 0 && a.Compare(r.hi) <= 0 {
			return uint8(i + 1)
		}
	}
	return 0
}

// at returns the counters of index i (not 0).
func (s *sourceSet) at(i uint8) *sourceCounts { return &s.counts[i-1] }

// line returns every prefix's counters, in configured order.
func (s *sourceSet) line() []linkkeys.SourceCounters {
	if s == nil {
		return nil
	}
	out := make([]linkkeys.SourceCounters, len(s.names))
	for i, name := range s.names {
		c := &s.counts[i]
		o := &out[i]
		o.Name = name
		o.Accepted, o.Admitted = c.accepted.Load(), c.admitted.Load()
		o.ShedConnectionLimit, o.ShedHandshakePerSource = c.shed[shedConnLimit].Load(), c.shed[shedPerSource].Load()
		o.ShedHandshakeOverflow, o.ShedHandshakeGlobal = c.shed[shedOverflow].Load(), c.shed[shedGlobal].Load()
		o.HandshakeRejections, o.HandshakeTimeouts = c.hsRejections.Load(), c.hsTimeouts.Load()
		o.Established = c.established.Load()
		o.RateLimitedResponses = c.rateLimited.Load()
		var m linkkeys.MetricsLine
		for r := range numCloseReasons {
			*r.field(&m) = c.closed[r].Load()
		}
		o.ClosedByPeer, o.ClosedOversizedFrame, o.ClosedMalformedRequest = m.ClosedByPeer, m.ClosedOversizedFrame, m.ClosedMalformedRequest
		o.ClosedIdleTimeout, o.ClosedIOTimeout, o.ClosedSlowFrameBody = m.ClosedIdleTimeout, m.ClosedIOTimeout, m.ClosedSlowFrameBody
		o.ClosedFrameBudget, o.ClosedOversizedResponse, o.ClosedShutdown = m.ClosedFrameBudget, m.ClosedOversizedResponse, m.ClosedShutdown
	}
	return out
}

// errSourcePrefixes wraps Config.Validate's problems with the prefixes.
func errSourcePrefixes(problems []string) error {
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Errorf("linkkeysserver: Config.SourcePrefixes: %s", p)
	}
	return errors.Join(errs...)
}
