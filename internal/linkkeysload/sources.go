package linkkeysload

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/engine"
)

// A run's source addresses must be this machine's: any address of 127.0.0.0/8 on Linux, or the
// addresses of an interface, or a prefix routed to lo ("ip route add local PREFIX dev lo", the way a
// load machine owns a block). CheckSources proves it before anything is sent, so a run against
// another host does not turn into thousands of EADDRNOTAVAIL attempts.

// SourceUse is one source range of a run and how hard it is used: the sockets its addresses hold
// open at once toward the target, in all (a held population's count, a loop's concurrency).
type SourceUse struct {
	Range SourceRange
	// Sockets is the most sockets the range has open at once.
	Sockets int64
	// MustHold says every one of Sockets must be open at once (a held population): exceeding the
	// ephemeral-port budget then cannot work, and is an error rather than a warning.
	MustHold bool
}

// InSegment returns the uses of segment seg of a run: each range cut to the segment's addresses
// (SourceAddrs.In) and its sockets to the segment's share. The whole run's uses (seg.Count ≤ 1)
// come back as they are; uses itself is not changed.
func InSegment(uses []SourceUse, seg engine.Segment) []SourceUse {
	if seg.Count <= 1 {
		return uses
	}
	out := make([]SourceUse, len(uses))
	for i, u := range uses {
		part := SourceAddrs{Base: u.Range.First, Count: u.Range.Count}.In(seg)
		u.Range.First, u.Range.Count = part.Base, part.Count
		u.Sockets = seg.Share(u.Sockets)
		out[i] = u
	}
	return out
}

// ConnectionsSources is connections' default source count: enough source addresses that none needs
// more handshakes than the server's default per-source burst (TCP_HANDSHAKE_BURST) for count
// connections, the preflight connection included, and never fewer than DefaultClientIPCount; at
// most the default distinct-source threshold, past which the server goes into protection mode (a
// count that needs more than that is refused by design whatever the sources).
func ConnectionsSources(count uint32, preflight bool) uint32 {
	lim := admit.HandshakeDefaults()
	// Attempts go round-robin from the first source, which also makes the preflight connection:
	// it takes ⌈count/n⌉ attempts, plus one.
	per := max(uint64(lim.Burst), 2)
	if preflight {
		per--
	}
	n := (uint64(count) + per - 1) / per
	n = min(max(n, DefaultClientIPCount), lim.DistinctSourceThreshold)
	return uint32(n)
}

// maxBindProbes bounds the addresses CheckSources binds per range: all of a small range, an even
// spread of a large one.
const maxBindProbes = 64

// probeAddrs returns the addresses of r to probe: all of them up to maxBindProbes, else an even
// spread including the first and the last.
func probeAddrs(r SourceRange) []IPv4 {
	n := uint64(max(r.Count, 1))
	if n <= maxBindProbes {
		out := make([]IPv4, 0, n)
		for i := range n {
			out = append(out, NthLoopbackAddr(r.First, uint32(i)))
		}
		return out
	}
	out := make([]IPv4, 0, maxBindProbes)
	for i := range uint64(maxBindProbes) {
		out = append(out, NthLoopbackAddr(r.First, uint32(i*(n-1)/(maxBindProbes-1))))
	}
	return out
}

// CanBind reports whether this machine can bind a TCP socket to a (port chosen by the kernel):
// nil when it can, else the bind error (EADDRNOTAVAIL for an address it does not have).
func CanBind(a IPv4) error {
	ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(a.Addr(), 0)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// CheckSources checks, before a run, that every source range can reach target from this machine:
// a loopback source cannot reach a non-loopback target; every address of a range up to 64, or an
// even spread of 64 of a larger one, must bind (see CanBind). A failure is a *UsageError naming
// the first missing addresses and how to add them. It also states the ephemeral-port budget per
// (source, destination) pair: where a range's sockets per source exceed the local port range,
// it returns a warning, or an error when the range must hold them all at once. bind (nil: CanBind)
// is what tests substitute.
func CheckSources(target netip.AddrPort, uses []SourceUse, bind func(IPv4) error) (warnings []string, err error) {
	if bind == nil {
		bind = CanBind
	}
	var errs []string
	for _, u := range uses {
		r := u.Range
		r.Count = max(r.Count, 1)
		if !target.Addr().IsLoopback() && r.First.Addr().IsLoopback() {
			errs = append(errs, fmt.Sprintf("stream %s: source addresses %s+%d are loopback addresses, which cannot reach %s; "+
				"give a source base of this machine's own addresses (an interface's, or a prefix routed with `ip route add local PREFIX dev lo`)",
				r.Stream, r.First, r.Count, target.Addr()))
			continue
		}
		var missing []IPv4
		var why error
		probes := probeAddrs(r)
		for _, a := range probes {
			if err := bind(a); err != nil {
				if why == nil {
					why = err
				}
				missing = append(missing, a)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, missingMessage(r, probes, missing, why))
		}
	}
	if len(errs) > 0 {
		return nil, usagef("%s", strings.Join(errs, "; "))
	}
	size, ok := LocalPortRange()
	if !ok {
		return nil, nil
	}
	for _, u := range uses {
		per := (u.Sockets + int64(max(u.Range.Count, 1)) - 1) / int64(max(u.Range.Count, 1))
		if per <= size {
			continue
		}
		msg := fmt.Sprintf("stream %s: %d sockets over %d source addresses is %d per (source, destination) pair, above the %d ephemeral ports of "+
			"net.ipv4.ip_local_port_range", u.Range.Stream, u.Sockets, max(u.Range.Count, 1), per, size)
		need := (u.Sockets + size - 1) / size
		if u.MustHold {
			errs = append(errs, msg+fmt.Sprintf(": it cannot hold them all; give at least %d source addresses or widen the port range", need))
			continue
		}
		warnings = append(warnings, msg+fmt.Sprintf(": attempts beyond it fail with EADDRNOTAVAIL; %d source addresses would be enough", need))
	}
	if len(errs) > 0 {
		return warnings, usagef("%s", strings.Join(errs, "; "))
	}
	return warnings, nil
}

// missingMessage names the first missing addresses of a range and the commands that add them.
func missingMessage(r SourceRange, probes, missing []IPv4, why error) string {
	var errno syscall.Errno
	cause := why.Error()
	if errors.As(why, &errno) {
		cause = errno.Error()
	}
	shown := missing[:min(len(missing), 4)]
	names := make([]string, len(shown))
	for i, a := range shown {
		names[i] = a.String()
	}
	more := ""
	if len(missing) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(missing)-len(shown))
	}
	return fmt.Sprintf("stream %s: this machine cannot bind source address %s%s (%d of the %d checked of %s+%d; %s): "+
		"add each with `ip addr add %s/32 dev IFACE`, or the whole range with `ip route add local %s dev lo`",
		r.Stream, strings.Join(names, ", "), more, len(missing), len(probes), r.First, r.Count, cause, shown[0], coveringPrefix(r))
}

// coveringPrefix is the smallest CIDR prefix holding every address of r.
func coveringPrefix(r SourceRange) netip.Prefix {
	first := uint32(r.First)
	last := uint32(r.Last())
	bitsLen := 32 - bits.LeadingZeros32(first^last)
	p, _ := r.First.Addr().Prefix(32 - bitsLen)
	return p
}

// LocalPortRange returns the size of net.ipv4.ip_local_port_range: the ephemeral ports one source
// address has toward one destination address and port. ok is false where it cannot be read.
func LocalPortRange() (size int64, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err1 := strconv.ParseInt(f[0], 10, 64)
	hi, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, false
	}
	return hi - lo + 1, true
}
