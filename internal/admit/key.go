package admit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
)

// SourceKey is the opaque identity of a normalised request source: the
// SHA-256 of its canonical string. Two peers that normalise to the same
// canonical string share every per-source budget. It is derived only from
// the transport peer (or the address a trusted proxy forwards), never from
// request content, so a caller cannot spend someone else's budget.
type SourceKey [32]byte

// String returns the key in lower-case hex.
func (k SourceKey) String() string { return hex.EncodeToString(k[:]) }

// compact is the 8-byte id used for window membership and shard selection:
// the first 8 bytes of the key read little-endian.
func (k *SourceKey) compact() uint64 { return binary.LittleEndian.Uint64(k[:8]) }

// maxCanonicalLen bounds "v6:" + the longest IPv6 text form + "/128".
const maxCanonicalLen = 64

// CanonicalSource returns the canonical string a peer address hashes to:
// "v4:a.b.c.d" for IPv4 (and for IPv4-mapped IPv6, which is IPv4 arriving on
// a dual-stack socket), "v6:<network>/<prefix>" for IPv6 masked to
// ipv6Prefix bits (clamped to 0..128; any zone is dropped), and
// "raw:invalid IP" for the zero Addr, so every unknown peer shares one
// bucket.
func CanonicalSource(ip netip.Addr, ipv6Prefix int) string {
	var buf [maxCanonicalLen]byte
	return string(appendCanonical(buf[:0], ip, ipv6Prefix))
}

func appendCanonical(dst []byte, ip netip.Addr, ipv6Prefix int) []byte {
	if !ip.IsValid() {
		return append(dst, "raw:invalid IP"...)
	}
	ip = ip.Unmap()
	if ip.Is4() {
		dst = append(dst, "v4:"...)
		return ip.AppendTo(dst)
	}
	ip = ip.WithZone("")
	bits := min(max(ipv6Prefix, 0), 128)
	// Prefix only fails for bits outside 0..128, which the clamp rules out.
	network, _ := ip.Prefix(bits)
	dst = append(dst, "v6:"...)
	dst = network.Addr().AppendTo(dst)
	dst = append(dst, '/')
	return strconv.AppendUint(dst, uint64(bits), 10)
}

// KeyForAddr returns the SourceKey of a peer address, normalising IPv6 to
// ipv6Prefix bits (see CanonicalSource). It does not allocate.
func KeyForAddr(ip netip.Addr, ipv6Prefix int) SourceKey {
	var buf [maxCanonicalLen]byte
	return sha256.Sum256(appendCanonical(buf[:0], ip, ipv6Prefix))
}

// KeyForString returns the SourceKey of a peer address given as text. A
// string that is not a plain IP address (including one with a zone, which
// LinkKeys' address parser rejects) hashes as "raw:<s>", so every such
// source shares one bucket instead of bypassing the limiter.
func KeyForString(s string, ipv6Prefix int) SourceKey {
	if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
		return KeyForAddr(ip, ipv6Prefix)
	}
	h := sha256.New()
	h.Write([]byte("raw:"))
	h.Write([]byte(s))
	var k SourceKey
	h.Sum(k[:0])
	return k
}
