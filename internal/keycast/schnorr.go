package keycast

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// BIP-340 tagged hashes: SHA-256(SHA-256(tag) || SHA-256(tag) || data). The
// 64-byte prefix is computed once per tag.
var (
	tagAux       = tagPrefix("BIP0340/aux")
	tagNonce     = tagPrefix("BIP0340/nonce")
	tagChallenge = tagPrefix("BIP0340/challenge")

	// zeroAuxMask is taggedHash("BIP0340/aux", 32 zero bytes). libsecp256k1
	// treats a NULL aux_rand32 exactly like 32 zero bytes, which is what
	// Keycast's sign_schnorr_no_aux_rand (UCAN signing) produces.
	zeroAuxMask = taggedHash(&tagAux, make([]byte, 32))
)

func tagPrefix(tag string) [64]byte {
	h := sha256.Sum256([]byte(tag))
	var p [64]byte
	copy(p[:32], h[:])
	copy(p[32:], h[:])
	return p
}

// taggedHash hashes prefix||parts in a stack buffer for the usual sizes (the
// largest BIP-340 input is 96 bytes plus the 64-byte prefix).
func taggedHash(prefix *[64]byte, parts ...[]byte) [32]byte {
	var buf [64 + 128]byte
	b := append(buf[:0], prefix[:]...)
	for _, p := range parts {
		b = append(b, p...)
	}
	return sha256.Sum256(b)
}

// Signer holds a secret key in the form BIP-340 signing needs (the scalar
// already negated when the public point has odd y) together with its x-only
// public key, so each signature costs one scalar base multiplication. A Signer
// is immutable and safe for concurrent use.
type Signer struct {
	d      btcec.ModNScalar // adjusted secret scalar
	dBytes [32]byte         // bytes of d, used for the aux mask
	pub    PublicKey
	pubHex string // pub in lower-case hex, computed once: every signed event carries it
	sk     SecretKey
}

// NewSigner prepares sk for repeated signing. It returns nil for an invalid
// key; use NewSignerChecked when the key comes from outside.
func NewSigner(sk SecretKey) *Signer {
	s, err := NewSignerChecked(sk)
	if err != nil {
		return nil
	}
	return s
}

// NewSignerChecked is NewSigner with an error for a key that is zero or not
// below the curve order.
func NewSignerChecked(sk SecretKey) (*Signer, error) {
	s := &Signer{sk: sk}
	if s.d.SetBytes((*[32]byte)(&sk)) != 0 || s.d.IsZero() {
		return nil, ErrInvalidSecretKey
	}
	var p btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&s.d, &p)
	p.ToAffine()
	p.X.PutBytes((*[32]byte)(&s.pub))
	if p.Y.IsOdd() {
		s.d.Negate()
	}
	s.d.PutBytes(&s.dBytes)
	s.pubHex = s.pub.Hex()
	return s, nil
}

// Public returns the signer's x-only public key.
func (s *Signer) Public() PublicKey { return s.pub }

// SecretKey returns the key the signer was made from (needed for ECDH).
func (s *Signer) SecretKey() SecretKey { return s.sk }

// Sign returns the BIP-340 signature of msg32 with no auxiliary randomness
// (equivalent to 32 zero aux bytes), so equal inputs give equal signatures.
// This is the mode Keycast uses for UCAN tokens.
func (s *Signer) Sign(msg32 [32]byte) ([64]byte, error) {
	return s.sign(msg32[:], &zeroAuxMask)
}

// SignAux returns the BIP-340 signature of msg32 with the given auxiliary
// random data; nil means no aux data, as in Sign.
func (s *Signer) SignAux(msg32 [32]byte, aux *[32]byte) ([64]byte, error) {
	if aux == nil {
		return s.sign(msg32[:], &zeroAuxMask)
	}
	mask := taggedHash(&tagAux, aux[:])
	return s.sign(msg32[:], &mask)
}

// SignMessage signs a message of any length per BIP-340 (the current
// revision allows messages other than 32-byte digests); aux nil means no aux
// data. Nostr and UCAN sign 32-byte digests: use Sign or SignAux for those.
func (s *Signer) SignMessage(msg []byte, aux *[32]byte) ([64]byte, error) {
	if aux == nil {
		return s.sign(msg, &zeroAuxMask)
	}
	mask := taggedHash(&tagAux, aux[:])
	return s.sign(msg, &mask)
}

// SignRandom signs msg32 with 32 fresh bytes from crypto/rand as aux data, as
// rust-nostr's event signing does (signatures are not reproducible).
func (s *Signer) SignRandom(msg32 [32]byte) ([64]byte, error) {
	var aux [32]byte
	if _, err := rand.Read(aux[:]); err != nil {
		return [64]byte{}, fmt.Errorf("keycast: reading aux randomness for a signature: %w", err)
	}
	return s.SignAux(msg32, &aux)
}

// sign implements BIP-340 Sign with the aux mask tagged_hash("BIP0340/aux", a)
// already computed.
func (s *Signer) sign(msg []byte, auxMask *[32]byte) ([64]byte, error) {
	var sig [64]byte
	var t [32]byte
	for i := range t {
		t[i] = s.dBytes[i] ^ auxMask[i]
	}
	nonce := taggedHash(&tagNonce, t[:], s.pub[:], msg)
	var k btcec.ModNScalar
	k.SetBytes(&nonce)
	if k.IsZero() {
		// Probability 2^-256; BIP-340 says to fail.
		return sig, fmt.Errorf("keycast: BIP-340 nonce is zero for this message; sign again with other aux data")
	}
	var r btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&k, &r)
	r.ToAffine()
	if r.Y.IsOdd() {
		k.Negate()
	}
	r.X.PutBytes((*[32]byte)(sig[:32]))
	eh := taggedHash(&tagChallenge, sig[:32], s.pub[:], msg)
	var e btcec.ModNScalar
	e.SetBytes(&eh)
	e.Mul(&s.d).Add(&k)
	e.PutBytes((*[32]byte)(sig[32:]))
	k.Zero()
	return sig, nil
}

// SignSchnorr signs msg32 with sk per BIP-340 using aux as auxiliary random
// data; aux nil means no aux data (treated as 32 zero bytes, like
// libsecp256k1's NULL aux_rand32). Hold a [Signer] when signing repeatedly.
func SignSchnorr(sk SecretKey, msg32 [32]byte, aux *[32]byte) ([64]byte, error) {
	s, err := NewSignerChecked(sk)
	if err != nil {
		return [64]byte{}, err
	}
	return s.SignAux(msg32, aux)
}

// VerifySchnorr reports whether sig is a valid BIP-340 signature of msg32 by
// pk. A pk that is not a curve point, r not below p or s not below n all give
// false.
func VerifySchnorr(pk PublicKey, msg32 [32]byte, sig [64]byte) bool {
	return verifySchnorr(&pk, msg32[:], &sig)
}

// VerifySchnorrMessage is VerifySchnorr for a message of any length.
func VerifySchnorrMessage(pk PublicKey, msg []byte, sig [64]byte) bool {
	return verifySchnorr(&pk, msg, &sig)
}

func verifySchnorr(pk *PublicKey, msg []byte, sig *[64]byte) bool {
	p, ok := liftX(pk)
	if !ok {
		return false
	}
	return verifySchnorrPoint(pk, &p, msg, sig)
}

// verifySchnorrPoint is BIP-340 Verify with P = lift_x(pk) already computed.
func verifySchnorrPoint(pk *PublicKey, p *btcec.JacobianPoint, msg []byte, sig *[64]byte) bool {
	var r btcec.FieldVal
	if r.SetBytes((*[32]byte)(sig[:32])) != 0 {
		return false
	}
	var sc btcec.ModNScalar
	if sc.SetBytes((*[32]byte)(sig[32:])) != 0 {
		return false
	}
	eh := taggedHash(&tagChallenge, sig[:32], pk[:], msg)
	var e btcec.ModNScalar
	e.SetBytes(&eh)
	e.Negate()
	var sg, ep, rr btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&sc, &sg)
	btcec.ScalarMultNonConst(&e, p, &ep)
	btcec.AddNonConst(&sg, &ep, &rr)
	if (rr.X.IsZero() && rr.Y.IsZero()) || rr.Z.IsZero() {
		return false
	}
	rr.ToAffine()
	if rr.Y.IsOdd() {
		return false
	}
	return rr.X.Equals(&r)
}
