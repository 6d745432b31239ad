package keycast

import (
	"fmt"
	"github.com/loadproof/loadproof/internal/textclip"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
)

// DIDPrefix starts every Keycast did:key ("z" is the multibase base58btc tag).
const DIDPrefix = "did:key:z"

// didMulticodec is the two-byte prefix Keycast puts before the raw 32-byte
// x-only key (the secp256k1-pub multicodec varint 0xe7 0x01). Standard
// did:key would use the 33-byte compressed key; Keycast does not.
var didMulticodec = [2]byte{0xe7, 0x01}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Rev = func() (t [128]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, c := range base58Alphabet {
		t[c] = int8(i)
	}
	return t
}()

// DIDKey returns Keycast's did:key for pk:
// "did:key:z" + base58btc(0xE7 0x01 || 32-byte x-only key).
func DIDKey(pk PublicKey) string {
	var in [34]byte
	in[0], in[1] = didMulticodec[0], didMulticodec[1]
	copy(in[2:], pk[:])
	return DIDPrefix + base58Encode(in[:])
}

// ParseDIDKey parses a Keycast did:key and returns the x-only key. It checks
// the prefix, the base58 alphabet, the 0xE7 0x01 multicodec, the 32-byte
// length and that the key is a curve point.
func ParseDIDKey(s string) (PublicKey, error) {
	pk, _, err := parseDIDKeyPoint(s)
	return pk, err
}

// parseDIDKeyPoint is ParseDIDKey that also returns the lifted point, so a
// verifier does not compute the square root twice.
func parseDIDKeyPoint(s string) (PublicKey, btcec.JacobianPoint, error) {
	var none btcec.JacobianPoint
	if !strings.HasPrefix(s, DIDPrefix) {
		return PublicKey{}, none, fmt.Errorf("keycast: DID %q does not start with %q", textclip.String(s, 80), DIDPrefix)
	}
	enc := s[len(DIDPrefix):]
	if len(enc) == 0 || len(enc) > 60 {
		return PublicKey{}, none, fmt.Errorf("keycast: DID %q has a base58 part of %d characters; want about 47", textclip.String(s, 80), len(enc))
	}
	raw, err := base58Decode(enc)
	if err != nil {
		return PublicKey{}, none, fmt.Errorf("keycast: DID %q: %w", textclip.String(s, 80), err)
	}
	if len(raw) != 34 || raw[0] != didMulticodec[0] || raw[1] != didMulticodec[1] {
		return PublicKey{}, none, fmt.Errorf("keycast: DID %q is not a secp256k1 x-only key (want multicodec 0xe7 0x01 and 32 key bytes, got %d bytes)", textclip.String(s, 80), len(raw))
	}
	var pk PublicKey
	copy(pk[:], raw[2:])
	pt, ok := liftX(&pk)
	if !ok {
		return PublicKey{}, none, fmt.Errorf("keycast: DID %q holds a key that is not a secp256k1 point", textclip.String(s, 80))
	}
	return pk, pt, nil
}

// base58Encode is the Bitcoin base58 encoding (leading zero bytes become '1').
func base58Encode(in []byte) string {
	zeros := 0
	for zeros < len(in) && in[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) < 1.37
	size := (len(in)-zeros)*137/100 + 1
	buf := make([]byte, size)
	high := size - 1
	for _, b := range in[zeros:] {
		carry := int(b)
		j := size - 1
		for ; j > high || carry != 0; j-- {
			carry += 256 * int(buf[j])
			buf[j] = byte(carry % 58)
			carry /= 58
		}
		high = j
	}
	i := 0
	for i < size && buf[i] == 0 {
		i++
	}
	out := make([]byte, zeros+size-i)
	for k := range zeros {
		out[k] = '1'
	}
	for k := zeros; i < size; i, k = i+1, k+1 {
		out[k] = base58Alphabet[buf[i]]
	}
	return string(out)
}

func base58Decode(s string) ([]byte, error) {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	size := (len(s)-zeros)*733/1000 + 1 // log(58)/log(256) < 0.733
	buf := make([]byte, size)
	for i := zeros; i < len(s); i++ {
		c := s[i]
		if c >= 128 || base58Rev[c] < 0 {
			return nil, fmt.Errorf("invalid base58 character %q at position %d", c, i)
		}
		carry := int(base58Rev[c])
		for j := size - 1; j >= 0; j-- {
			carry += 58 * int(buf[j])
			buf[j] = byte(carry)
			carry >>= 8
		}
		if carry != 0 {
			return nil, fmt.Errorf("base58 value overflows")
		}
	}
	i := 0
	for i < size && buf[i] == 0 {
		i++
	}
	out := make([]byte, zeros+size-i)
	copy(out[zeros:], buf[i:])
	return out, nil
}
