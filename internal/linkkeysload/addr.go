package linkkeysload

import (
	"fmt"
	"net/netip"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// IPv4 is an IPv4 address as a 32-bit number (the first octet in the high byte).
type IPv4 uint32

// Addr returns the address as a netip.Addr.
func (a IPv4) Addr() netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// String renders dotted decimal.
func (a IPv4) String() string { return a.Addr().String() }

// NthLoopbackAddr returns the n-th address after base, wrapped inside base's /8: the low 24 bits
// are (base + n) mod 2^24 and the first octet is base's. For a base in 127.0.0.0/8 this is the
// seed's address arithmetic (with base 127.255.255.255, n = 1 gives 127.0.0.0); the seed forced the
// first octet to 127 whatever the base, where loadproof keeps it, so a load machine's own addresses
// (an interface's, or a prefix routed to lo) can be the sources of a run against another host.
func NthLoopbackAddr(base IPv4, n uint32) IPv4 {
	return IPv4((uint32(base)+n)&0x00FF_FFFF | uint32(base)&0xFF00_0000)
}

// ParseIPv4 parses dotted-decimal IPv4 the way the seed's client does: exactly four decimal octets
// 0..255 separated by dots, no leading zeros (other than "0" itself), no spaces, no IPv6. On failure
// the error reads like the seed's: `invalid --client-ip-base "x": invalid IPv4 address syntax`, with
// flag naming the flag.
func ParseIPv4(flag, s string) (IPv4, error) {
	a, ok := parseIPv4(s)
	if !ok {
		return 0, fmt.Errorf("invalid %s %s: invalid IPv4 address syntax", flag, linkkeysresult.RustDebugString(s))
	}
	return a, nil
}

func parseIPv4(s string) (IPv4, bool) {
	var out uint32
	octets := 0
	i := 0
	for octets < 4 {
		if octets > 0 {
			if i >= len(s) || s[i] != '.' {
				return 0, false
			}
			i++
		}
		start := i
		v := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 3 {
			v = v*10 + int(s[i]-'0')
			i++
		}
		n := i - start
		if n == 0 || v > 255 || (n > 1 && s[start] == '0') {
			return 0, false
		}
		out = out<<8 | uint32(v)
		octets++
	}
	if i != len(s) {
		return 0, false
	}
	return IPv4(out), true
}

// SourceAddrs describes the source addresses of a run: attempt i binds NthLoopbackAddr(Base, i %
// Count). Count below 1 counts as 1, as in the seed.
type SourceAddrs struct {
	Base  IPv4
	Count uint32
}

// For returns the source address of global attempt index i.
func (s SourceAddrs) For(i int64) IPv4 {
	c := uint64(max(s.Count, 1))
	return NthLoopbackAddr(s.Base, uint32(uint64(i)%c))
}

// In returns the part of the source addresses that segment seg owns: its Range of the Count
// addresses, so no two segments of a split run (processes or machines) share a source, and the N
// parts together are every address of the run. With fewer addresses than segments some segments
// would own none; they all share every address then, as the whole run does.
func (s SourceAddrs) In(seg engine.Segment) SourceAddrs {
	if seg.Count <= 1 {
		return s
	}
	start, n := seg.Range(int64(max(s.Count, 1)))
	if n == 0 {
		return s
	}
	return SourceAddrs{Base: NthLoopbackAddr(s.Base, uint32(start)), Count: uint32(n)}
}
