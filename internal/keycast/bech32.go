package keycast

import (
	"fmt"
	"strings"
)

// bech32 (BIP-173, checksum constant 1) as NIP-19 uses it for nsec and npub.
// Only the 32-byte key payloads are needed, so this is deliberately small.

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var bech32Rev = func() (t [128]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, c := range bech32Charset {
		t[c] = int8(i)
	}
	return t
}()

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		b := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (b>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func bech32HRPExpand(hrp string) []byte {
	out := make([]byte, 0, len(hrp)*2+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

// convertBits regroups bits; pad adds zero bits at the end (encoding) and
// without pad leftover bits must be fewer than from and all zero (decoding).
func convertBits(data []byte, from, to uint, pad bool) ([]byte, bool) {
	acc, bits := uint32(0), uint(0)
	maxv := uint32(1)<<to - 1
	out := make([]byte, 0, len(data)*int(from)/int(to)+1)
	for _, v := range data {
		if uint32(v)>>from != 0 {
			return nil, false
		}
		acc = acc<<from | uint32(v)
		bits += from
		for bits >= to {
			bits -= to
			out = append(out, byte(acc>>bits&maxv))
		}
	}
	if pad {
		if bits > 0 {
			out = append(out, byte(acc<<(to-bits)&maxv))
		}
	} else if bits >= from || acc<<(to-bits)&maxv != 0 {
		return nil, false
	}
	return out, true
}

func encodeBech32(hrp string, data []byte) string {
	five, _ := convertBits(data, 8, 5, true)
	values := append(bech32HRPExpand(hrp), five...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(values) ^ 1
	var b strings.Builder
	b.Grow(len(hrp) + 1 + len(five) + 6)
	b.WriteString(hrp)
	b.WriteByte('1')
	for _, v := range five {
		b.WriteByte(bech32Charset[v])
	}
	for i := range 6 {
		b.WriteByte(bech32Charset[(mod>>(5*(5-i)))&31])
	}
	return b.String()
}

// decodeBech32Key decodes a bech32 string with the wanted human-readable part
// and a 32-byte payload.
func decodeBech32Key(wantHRP, s string) ([32]byte, error) {
	var out [32]byte
	if len(s) > 90 {
		return out, fmt.Errorf("keycast: bech32 %s string is %d characters; the limit is 90", wantHRP, len(s))
	}
	lower, upper := strings.ToLower(s), strings.ToUpper(s)
	if s != lower && s != upper {
		return out, fmt.Errorf("keycast: bech32 %s string mixes upper and lower case", wantHRP)
	}
	s = lower
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) {
		return out, fmt.Errorf("keycast: bech32 %s string has no separator or a checksum shorter than 6 characters", wantHRP)
	}
	hrp := s[:sep]
	if hrp != wantHRP {
		return out, fmt.Errorf("keycast: bech32 prefix is %q; want %q", hrp, wantHRP)
	}
	values := make([]byte, 0, len(s)-sep-1)
	for i := sep + 1; i < len(s); i++ {
		c := s[i]
		if c >= 128 || bech32Rev[c] < 0 {
			return out, fmt.Errorf("keycast: bech32 %s string has invalid character %q at position %d", wantHRP, c, i)
		}
		values = append(values, byte(bech32Rev[c]))
	}
	if bech32Polymod(append(bech32HRPExpand(hrp), values...)) != 1 {
		return out, fmt.Errorf("keycast: bech32 %s checksum does not match; the string is mistyped or truncated", wantHRP)
	}
	data, ok := convertBits(values[:len(values)-6], 5, 8, false)
	if !ok {
		return out, fmt.Errorf("keycast: bech32 %s payload has invalid padding", wantHRP)
	}
	if len(data) != 32 {
		return out, fmt.Errorf("keycast: bech32 %s payload is %d bytes; want 32", wantHRP, len(data))
	}
	copy(out[:], data)
	return out, nil
}
