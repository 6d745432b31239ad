package keycast

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/loadproof/loadproof/internal/boundedfile"
)

// MasterKey is the 32-byte AES-256-GCM key of Keycast's file key manager. It
// seals user secret keys at rest as nonce(12) || ciphertext || tag(16).
type MasterKey [32]byte

// String hides the key from logs.
func (MasterKey) String() string { return "MasterKey(redacted)" }

// GoString hides the key from %#v.
func (k MasterKey) GoString() string { return k.String() }

// GenerateMasterKey returns a random master key.
func GenerateMasterKey() (MasterKey, error) {
	var k MasterKey
	if _, err := rand.Read(k[:]); err != nil {
		return MasterKey{}, fmt.Errorf("keycast: reading random bytes for a master key: %w", err)
	}
	return k, nil
}

// ParseMasterKey decodes the base64 (standard alphabet, padding optional)
// content of a master.key file, ignoring surrounding white space.
func ParseMasterKey(content []byte) (MasterKey, error) {
	s := bytes.TrimSpace(content)
	raw, err := base64.StdEncoding.DecodeString(string(s))
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(string(s))
	}
	if err != nil {
		return MasterKey{}, fmt.Errorf("keycast: master key is not base64: %v; want the base64 of 32 random bytes (e.g. openssl rand -base64 32)", err)
	}
	if len(raw) != 32 {
		return MasterKey{}, fmt.Errorf("keycast: master key decodes to %d bytes; want 32 (e.g. openssl rand -base64 32)", len(raw))
	}
	return MasterKey(raw), nil
}

// LoadOrCreateMasterKey reads the base64 master key at path, or creates the
// file (mode 0600, base64 without a trailing newline) with a new random key
// when it does not exist. created tells which happened. A file that is not
// the base64 of exactly 32 bytes is refused, never overwritten.
func LoadOrCreateMasterKey(path string) (key MasterKey, created bool, err error) {
	content, err := boundedfile.Read(path, boundedfile.Key)
	if err == nil {
		k, perr := ParseMasterKey(content)
		if perr != nil {
			return MasterKey{}, false, fmt.Errorf("%w (file %s)", perr, path)
		}
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return MasterKey{}, false, fmt.Errorf("keycast: reading master key %s: %w", path, err)
	}
	k, err := GenerateMasterKey()
	if err != nil {
		return MasterKey{}, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: use theirs.
			return LoadOrCreateMasterKey(path)
		}
		return MasterKey{}, false, fmt.Errorf("keycast: creating master key %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(k[:])); err != nil {
		f.Close()
		os.Remove(path)
		return MasterKey{}, false, fmt.Errorf("keycast: writing master key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return MasterKey{}, false, fmt.Errorf("keycast: writing master key %s: %w", path, err)
	}
	return k, true, nil
}

// AEAD returns the AES-256-GCM cipher of k; keep it to avoid re-expanding the
// key on every call (Seal and Open do that).
func (k MasterKey) AEAD() cipher.AEAD {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic("keycast: aes.NewCipher with a 32-byte key failed: " + err.Error())
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic("keycast: cipher.NewGCM failed: " + err.Error())
	}
	return g
}

// Seal encrypts plain as random nonce(12) || ciphertext || tag(16).
func (k MasterKey) Seal(plain []byte) ([]byte, error) {
	return SealWith(k.AEAD(), plain)
}

// Open decrypts the output of Seal.
func (k MasterKey) Open(sealed []byte) ([]byte, error) {
	return OpenWith(k.AEAD(), sealed)
}

// SealWith is Seal with a cached AEAD from MasterKey.AEAD.
func SealWith(g cipher.AEAD, plain []byte) ([]byte, error) {
	out := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("keycast: reading a GCM nonce: %w", err)
	}
	return g.Seal(out, out, plain, nil), nil
}

// OpenWith is Open with a cached AEAD from MasterKey.AEAD.
func OpenWith(g cipher.AEAD, sealed []byte) ([]byte, error) {
	ns := g.NonceSize()
	if len(sealed) < ns+g.Overhead() {
		return nil, fmt.Errorf("keycast: sealed key is %d bytes; want at least %d (nonce and tag)", len(sealed), ns+g.Overhead())
	}
	plain, err := g.Open(nil, sealed[:ns], sealed[ns:], nil)
	if err != nil {
		return nil, errors.New("keycast: sealed key does not decrypt with this master key (wrong master.key or corrupted data)")
	}
	return plain, nil
}
