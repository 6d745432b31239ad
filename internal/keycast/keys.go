package keycast

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
)

// SecretKey is a secp256k1 secret key: a big-endian scalar in [1, n-1].
type SecretKey [32]byte

// PublicKey is an x-only (BIP-340, Nostr) public key: the 32-byte big-endian x
// coordinate of a point whose y coordinate is taken to be even.
type PublicKey [32]byte

// ErrInvalidSecretKey is returned for a secret key that is zero or not below
// the curve order.
var ErrInvalidSecretKey = errors.New("keycast: secret key is zero or not below the secp256k1 curve order; generate a new key")

// GenerateSecretKey returns a fresh random secret key from crypto/rand.
func GenerateSecretKey() (SecretKey, error) {
	var sk SecretKey
	for range 16 {
		if _, err := rand.Read(sk[:]); err != nil {
			return SecretKey{}, fmt.Errorf("keycast: reading random bytes for a secret key: %w", err)
		}
		if sk.Valid() {
			return sk, nil
		}
	}
	// 16 rejections in a row has probability below 2^-2000: the source is broken.
	return SecretKey{}, errors.New("keycast: random source produced 16 invalid secret keys in a row; check the system random generator")
}

// MustGenerateSecretKey is GenerateSecretKey for tests and tools that cannot
// continue without a key; it panics if the random source fails.
func MustGenerateSecretKey() SecretKey {
	sk, err := GenerateSecretKey()
	if err != nil {
		panic(err)
	}
	return sk
}

// Valid reports whether sk is a usable secret key (non-zero and below n).
func (sk SecretKey) Valid() bool {
	var s btcec.ModNScalar
	overflow := s.SetBytes((*[32]byte)(&sk))
	return overflow == 0 && !s.IsZero()
}

// ParseSecretKey parses 64 hex characters (either case) or a bech32 "nsec1…"
// string, after trimming surrounding white space, and checks the scalar range.
func ParseSecretKey(s string) (SecretKey, error) {
	s = strings.TrimSpace(s)
	var sk SecretKey
	switch {
	case len(s) == 64:
		if _, err := hex.Decode(sk[:], []byte(s)); err != nil {
			return SecretKey{}, fmt.Errorf("keycast: secret key is not valid hex: %v; want 64 hex characters or nsec1…", err)
		}
	case strings.HasPrefix(strings.ToLower(s), "nsec1"):
		data, err := decodeBech32Key("nsec", s)
		if err != nil {
			return SecretKey{}, err
		}
		sk = data
	default:
		return SecretKey{}, fmt.Errorf("keycast: secret key has %d characters and no nsec1 prefix; want 64 hex characters or nsec1…", len(s))
	}
	if !sk.Valid() {
		return SecretKey{}, ErrInvalidSecretKey
	}
	return sk, nil
}

// Hex returns the 64 lower-case hex characters of sk.
func (sk SecretKey) Hex() string { return hex.EncodeToString(sk[:]) }

// String hides the key so that it never ends up in a log by accident.
func (sk SecretKey) String() string { return "SecretKey(redacted)" }

// GoString hides the key from %#v as well.
func (sk SecretKey) GoString() string { return sk.String() }

// Public returns the x-only public key of sk. It costs one scalar base
// multiplication; hold a [Signer] to avoid repeating it. An invalid key gives
// the zero PublicKey.
func (sk SecretKey) Public() PublicKey {
	var d btcec.ModNScalar
	if d.SetBytes((*[32]byte)(&sk)) != 0 || d.IsZero() {
		return PublicKey{}
	}
	var p btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&d, &p)
	p.ToAffine()
	var pk PublicKey
	p.X.PutBytes((*[32]byte)(&pk))
	return pk
}

// Hex returns the 64 lower-case hex characters of pk.
func (pk PublicKey) Hex() string { return hex.EncodeToString(pk[:]) }

// String returns pk.Hex().
func (pk PublicKey) String() string { return pk.Hex() }

// IsZero reports whether pk is the zero value (never a valid key).
func (pk PublicKey) IsZero() bool { return pk == PublicKey{} }

// MarshalText encodes pk as hex, so PublicKey fields read naturally in JSON.
func (pk PublicKey) MarshalText() ([]byte, error) { return []byte(pk.Hex()), nil }

// UnmarshalText parses hex with ParsePublicKey.
func (pk *PublicKey) UnmarshalText(b []byte) error {
	p, err := ParsePublicKey(string(b))
	if err != nil {
		return err
	}
	*pk = p
	return nil
}

// ParsePublicKey parses 64 hex characters (either case) and checks that they
// are the x coordinate of a point on secp256k1.
func ParsePublicKey(s string) (PublicKey, error) {
	var pk PublicKey
	if len(s) != 64 {
		return PublicKey{}, fmt.Errorf("keycast: public key has %d characters; want 64 hex characters", len(s))
	}
	if _, err := hex.Decode(pk[:], []byte(s)); err != nil {
		return PublicKey{}, fmt.Errorf("keycast: public key is not valid hex: %v", err)
	}
	if _, ok := liftX(&pk); !ok {
		return PublicKey{}, fmt.Errorf("keycast: public key %s is not the x coordinate of a secp256k1 point", s)
	}
	return pk, nil
}

// ParseNpub parses a bech32 "npub1…" string and checks the point.
func ParseNpub(s string) (PublicKey, error) {
	data, err := decodeBech32Key("npub", strings.TrimSpace(s))
	if err != nil {
		return PublicKey{}, err
	}
	pk := PublicKey(data)
	if _, ok := liftX(&pk); !ok {
		return PublicKey{}, fmt.Errorf("keycast: npub %s is not a secp256k1 point", s)
	}
	return pk, nil
}

// EncodeNsec returns the bech32 "nsec1…" form of sk.
func EncodeNsec(sk SecretKey) string { return encodeBech32("nsec", sk[:]) }

// EncodeNpub returns the bech32 "npub1…" form of pk.
func EncodeNpub(pk PublicKey) string { return encodeBech32("npub", pk[:]) }

// liftX returns the point with x coordinate pk and even y (BIP-340 lift_x).
func liftX(pk *PublicKey) (btcec.JacobianPoint, bool) {
	var x, y btcec.FieldVal
	if x.SetBytes((*[32]byte)(pk)) != 0 {
		return btcec.JacobianPoint{}, false
	}
	if !btcec.DecompressY(&x, false, &y) {
		return btcec.JacobianPoint{}, false
	}
	y.Normalize()
	var one btcec.FieldVal
	one.SetInt(1)
	return btcec.MakeJacobianPoint(&x, &y, &one), true
}
