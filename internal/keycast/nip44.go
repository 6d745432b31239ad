package keycast

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/btcsuite/btcd/btcec/v2"
	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/hkdf"
)

// NIP-44 v2 limits.
const (
	NIP44Version      = 2
	NIP44MinPlaintext = 1
	NIP44MaxPlaintext = 65535
	nip44MinPayload   = 132   // base64 length of the smallest message
	nip44MaxPayload   = 87472 // base64 length of the largest message
	nip44MinRaw       = 99    // 1 + 32 + 2+32 + 32
	nip44MaxRaw       = 65603 // 1 + 32 + 2+65536 + 32
)

var nip44Salt = []byte("nip44-v2")

// SharedX returns the x coordinate of sk·P where P = lift_x(pk): the
// unhashed ECDH secret NIP-04 and NIP-44 start from.
func SharedX(sk SecretKey, pk PublicKey) ([32]byte, error) {
	var out [32]byte
	var d btcec.ModNScalar
	if d.SetBytes((*[32]byte)(&sk)) != 0 || d.IsZero() {
		return out, ErrInvalidSecretKey
	}
	p, ok := liftX(&pk)
	if !ok {
		return out, fmt.Errorf("keycast: public key %s is not a secp256k1 point", pk.Hex())
	}
	var r btcec.JacobianPoint
	btcec.ScalarMultNonConst(&d, &p, &r)
	if (r.X.IsZero() && r.Y.IsZero()) || r.Z.IsZero() {
		return out, errors.New("keycast: ECDH result is the point at infinity")
	}
	r.ToAffine()
	r.X.PutBytes(&out)
	return out, nil
}

// NIP44ConversationKey returns HKDF-extract(salt "nip44-v2", shared x). It is
// symmetric (A's secret with B's key equals B's secret with A's key) and can
// be cached per (user, peer).
func NIP44ConversationKey(sk SecretKey, pk PublicKey) ([32]byte, error) {
	x, err := SharedX(sk, pk)
	if err != nil {
		return [32]byte{}, err
	}
	var ck [32]byte
	copy(ck[:], hkdf.Extract(sha256.New, x[:], nip44Salt))
	return ck, nil
}

// nip44MessageKeys expands the conversation key with the nonce into the
// ChaCha20 key, ChaCha20 nonce and HMAC key.
func nip44MessageKeys(convKey *[32]byte, nonce []byte) (chachaKey [32]byte, chachaNonce [12]byte, hmacKey [32]byte, err error) {
	var buf [76]byte
	if _, err = io.ReadFull(hkdf.Expand(sha256.New, convKey[:], nonce), buf[:]); err != nil {
		return
	}
	copy(chachaKey[:], buf[:32])
	copy(chachaNonce[:], buf[32:44])
	copy(hmacKey[:], buf[44:])
	return
}

// NIP44PaddedLen is calc_padded_len of NIP-44 v2 for an unpadded length >= 1.
func NIP44PaddedLen(n int) int {
	if n <= 32 {
		return 32
	}
	nextPower := 1
	for nextPower < n { // smallest power of two >= n, i.e. 1 << (floor(log2(n-1)) + 1)
		nextPower <<= 1
	}
	chunk := 32
	if nextPower > 256 {
		chunk = nextPower / 8
	}
	return chunk * ((n-1)/chunk + 1)
}

// NIP44Encrypt encrypts plaintext (1..65535 bytes) with the conversation key.
// nonce nil draws 32 random bytes; a fixed nonce is for test vectors only.
func NIP44Encrypt(plaintext string, convKey [32]byte, nonce *[32]byte) (string, error) {
	n := len(plaintext)
	if n < NIP44MinPlaintext || n > NIP44MaxPlaintext {
		return "", fmt.Errorf("keycast: NIP-44 plaintext is %d bytes; want 1 to %d", n, NIP44MaxPlaintext)
	}
	var nn [32]byte
	if nonce != nil {
		nn = *nonce
	} else if _, err := rand.Read(nn[:]); err != nil {
		return "", fmt.Errorf("keycast: reading a NIP-44 nonce: %w", err)
	}
	ck, cn, hk, err := nip44MessageKeys(&convKey, nn[:])
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-44 key expansion: %w", err)
	}
	padded := NIP44PaddedLen(n)
	raw := make([]byte, 1+32+2+padded+32)
	raw[0] = NIP44Version
	copy(raw[1:33], nn[:])
	body := raw[33 : 33+2+padded]
	binary.BigEndian.PutUint16(body, uint16(n))
	copy(body[2:], plaintext)
	c, err := chacha20.NewUnauthenticatedCipher(ck[:], cn[:])
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-44 cipher: %w", err)
	}
	c.XORKeyStream(body, body)
	mac := hmac.New(sha256.New, hk[:])
	mac.Write(nn[:])
	mac.Write(body)
	mac.Sum(raw[:33+2+padded])
	return base64.StdEncoding.EncodeToString(raw), nil
}

// NIP-44 decryption errors.
var (
	ErrNIP44UnknownVersion = errors.New("keycast: NIP-44 unknown encryption version")
	ErrNIP44InvalidMAC     = errors.New("keycast: NIP-44 invalid MAC")
	ErrNIP44InvalidPadding = errors.New("keycast: NIP-44 invalid padding")
	ErrNIP44InvalidPayload = errors.New("keycast: NIP-44 invalid payload")
)

// NIP44Decrypt checks and decrypts a NIP-44 v2 payload.
func NIP44Decrypt(payload string, convKey [32]byte) (string, error) {
	pl := len(payload)
	if pl == 0 {
		return "", fmt.Errorf("%w: empty payload", ErrNIP44InvalidPayload)
	}
	if payload[0] == '#' {
		return "", fmt.Errorf("%w: payload starts with '#'", ErrNIP44UnknownVersion)
	}
	if pl < nip44MinPayload || pl > nip44MaxPayload {
		return "", fmt.Errorf("%w: length %d is outside %d..%d", ErrNIP44InvalidPayload, pl, nip44MinPayload, nip44MaxPayload)
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", fmt.Errorf("%w: invalid base64: %v", ErrNIP44InvalidPayload, err)
	}
	dl := len(raw)
	if dl < nip44MinRaw || dl > nip44MaxRaw {
		return "", fmt.Errorf("%w: decoded length %d is outside %d..%d", ErrNIP44InvalidPayload, dl, nip44MinRaw, nip44MaxRaw)
	}
	if raw[0] != NIP44Version {
		return "", fmt.Errorf("%w: %d", ErrNIP44UnknownVersion, raw[0])
	}
	nonce := raw[1:33]
	body := raw[33 : dl-32]
	gotMAC := raw[dl-32:]
	ck, cn, hk, err := nip44MessageKeys(&convKey, nonce)
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-44 key expansion: %w", err)
	}
	mac := hmac.New(sha256.New, hk[:])
	mac.Write(nonce)
	mac.Write(body)
	var want [32]byte
	if !hmac.Equal(mac.Sum(want[:0]), gotMAC) {
		return "", ErrNIP44InvalidMAC
	}
	c, err := chacha20.NewUnauthenticatedCipher(ck[:], cn[:])
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-44 cipher: %w", err)
	}
	plain := make([]byte, len(body))
	c.XORKeyStream(plain, body)
	if len(plain) < 2 {
		return "", ErrNIP44InvalidPadding
	}
	n := int(binary.BigEndian.Uint16(plain))
	if n < NIP44MinPlaintext || len(plain) != 2+NIP44PaddedLen(n) {
		return "", fmt.Errorf("%w: length prefix %d does not match %d padded bytes", ErrNIP44InvalidPadding, n, len(plain)-2)
	}
	return string(plain[2 : 2+n]), nil
}
