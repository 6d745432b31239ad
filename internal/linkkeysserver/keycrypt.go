package linkkeysserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/argon2"
)

// Private-key blob layout (the LinkKeys v2 layout, docs/protocol-linkkeys.md,
// Storage):
//
//	"LK2\x01" | m_cost u32be (KiB) | t_cost u32be | p_cost u32be | salt (16) | nonce (12) | AES-256-GCM ciphertext+tag
//
// The AES key is Argon2id(passphrase, salt, t, m, p) with a 32-byte output.
// The legacy headerless layout salt | nonce | ciphertext, with the default
// costs, is accepted on decryption.
const (
	keyBlobMagic  = "LK2\x01"
	keySaltLen    = 16
	keyNonceLen   = 12
	keyHeaderLen  = len(keyBlobMagic) + 12
	defaultMCost  = 19456
	defaultTCost  = 3
	defaultPCost  = 1
	maxMCost      = 1 << 20 // KiB, so 1 GiB; a blob asking for more is refused, not obeyed
	maxTCost      = 64
	maxPCost      = 64
	gcmOverhead   = 16
	minKeyBlobLen = keySaltLen + keyNonceLen + gcmOverhead
)

// ErrWrongPassphrase is returned (wrapped) by DecryptPrivateKey when the blob
// does not open under the passphrase.
var ErrWrongPassphrase = errors.New("linkkeysserver: private key does not decrypt with DOMAIN_KEY_PASSPHRASE (wrong passphrase, or a corrupt row)")

// EncryptPrivateKey encrypts plaintext (a 32-byte key seed) under a key
// derived from passphrase with Argon2id (m=19456 KiB, t=3, p=1) and returns
// the v2 blob.
func EncryptPrivateKey(plaintext, passphrase []byte) ([]byte, error) {
	if len(passphrase) == 0 {
		return nil, errors.New("linkkeysserver: encrypting a private key needs a non-empty passphrase (set DOMAIN_KEY_PASSPHRASE)")
	}
	blob := make([]byte, keyHeaderLen+keySaltLen+keyNonceLen, keyHeaderLen+keySaltLen+keyNonceLen+len(plaintext)+gcmOverhead)
	copy(blob, keyBlobMagic)
	binary.BigEndian.PutUint32(blob[4:], defaultMCost)
	binary.BigEndian.PutUint32(blob[8:], defaultTCost)
	binary.BigEndian.PutUint32(blob[12:], defaultPCost)
	salt := blob[keyHeaderLen : keyHeaderLen+keySaltLen]
	nonce := blob[keyHeaderLen+keySaltLen:]
	if _, err := rand.Read(blob[keyHeaderLen:]); err != nil {
		return nil, fmt.Errorf("linkkeysserver: encrypting a private key: %w", err)
	}
	aead, err := keyAEAD(passphrase, salt, defaultMCost, defaultTCost, defaultPCost)
	if err != nil {
		return nil, err
	}
	return aead.Seal(blob, nonce, plaintext, nil), nil
}

// keyBlob is a parsed private-key blob.
type keyBlob struct {
	m, t, p         uint32
	salt, nonce, ct []byte
}

// parseKeyBlob splits a v2 or legacy blob and checks its cost parameters
// against sane bounds, before any expensive work.
func parseKeyBlob(blob []byte) (keyBlob, error) {
	k := keyBlob{m: defaultMCost, t: defaultTCost, p: defaultPCost}
	body := blob
	if len(blob) >= len(keyBlobMagic) && string(blob[:len(keyBlobMagic)]) == keyBlobMagic {
		if len(blob) < keyHeaderLen+minKeyBlobLen {
			return keyBlob{}, fmt.Errorf("linkkeysserver: private key blob has %d bytes, too short for the v2 layout", len(blob))
		}
		k.m = binary.BigEndian.Uint32(blob[4:])
		k.t = binary.BigEndian.Uint32(blob[8:])
		k.p = binary.BigEndian.Uint32(blob[12:])
		if k.p == 0 || k.p > maxPCost || k.m < 8*k.p || k.m > maxMCost || k.t == 0 || k.t > maxTCost {
			return keyBlob{}, fmt.Errorf("linkkeysserver: private key blob asks for Argon2id m=%d t=%d p=%d: outside the accepted 8p..%d KiB, 1..%d passes, 1..%d lanes",
				k.m, k.t, k.p, maxMCost, maxTCost, maxPCost)
		}
		body = blob[keyHeaderLen:]
	} else if len(blob) < minKeyBlobLen {
		return keyBlob{}, fmt.Errorf("linkkeysserver: private key blob has %d bytes, too short for any layout", len(blob))
	}
	k.salt, k.nonce, k.ct = body[:keySaltLen], body[keySaltLen:keySaltLen+keyNonceLen], body[keySaltLen+keyNonceLen:]
	return k, nil
}

// DecryptPrivateKey opens a blob made by EncryptPrivateKey (or the legacy
// headerless layout). Cost parameters above sane bounds are refused before
// any work is done.
func DecryptPrivateKey(blob, passphrase []byte) ([]byte, error) {
	k, err := parseKeyBlob(blob)
	if err != nil {
		return nil, err
	}
	if len(passphrase) == 0 {
		return nil, errors.New("linkkeysserver: the stored private key is encrypted; set DOMAIN_KEY_PASSPHRASE")
	}
	aead, err := keyAEAD(passphrase, k.salt, k.m, k.t, uint8(k.p))
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, k.nonce, k.ct, nil)
	if err != nil {
		return nil, ErrWrongPassphrase
	}
	return pt, nil
}

func keyAEAD(passphrase, salt []byte, m, t uint32, p uint8) (cipher.AEAD, error) {
	k := argon2.IDKey(passphrase, salt, t, m, p, 32)
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: private key cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: private key cipher: %w", err)
	}
	return aead, nil
}
