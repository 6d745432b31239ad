package keycast

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// NIP04Encrypt encrypts plaintext from sk to pk per NIP-04: AES-256-CBC with
// the unhashed ECDH x coordinate as key, a random 16-byte IV and PKCS#7
// padding, written "base64(ciphertext)?iv=base64(iv)".
func NIP04Encrypt(sk SecretKey, pk PublicKey, plaintext string) (string, error) {
	key, err := SharedX(sk, pk)
	if err != nil {
		return "", err
	}
	var iv [16]byte
	if _, err := rand.Read(iv[:]); err != nil {
		return "", fmt.Errorf("keycast: reading a NIP-04 IV: %w", err)
	}
	return nip04EncryptIV(key, iv, plaintext)
}

func nip04EncryptIV(key [32]byte, iv [16]byte, plaintext string) (string, error) {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-04 cipher: %w", err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	buf := make([]byte, len(plaintext)+pad)
	copy(buf, plaintext)
	for i := len(plaintext); i < len(buf); i++ {
		buf[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, iv[:]).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf) + "?iv=" + base64.StdEncoding.EncodeToString(iv[:]), nil
}

// ErrNIP04Invalid is the class of NIP04Decrypt errors.
var ErrNIP04Invalid = errors.New("keycast: invalid NIP-04 payload")

// NIP04Decrypt decrypts a NIP-04 payload sent to sk by pk.
func NIP04Decrypt(sk SecretKey, pk PublicKey, payload string) (string, error) {
	ctB64, ivB64, ok := strings.Cut(payload, "?iv=")
	if !ok {
		return "", fmt.Errorf("%w: no \"?iv=\" separator", ErrNIP04Invalid)
	}
	ct, err := base64.StdEncoding.DecodeString(ctB64)
	if err != nil {
		return "", fmt.Errorf("%w: ciphertext is not base64: %v", ErrNIP04Invalid, err)
	}
	iv, err := base64.StdEncoding.DecodeString(ivB64)
	if err != nil {
		return "", fmt.Errorf("%w: iv is not base64: %v", ErrNIP04Invalid, err)
	}
	if len(iv) != aes.BlockSize {
		return "", fmt.Errorf("%w: iv is %d bytes; want 16", ErrNIP04Invalid, len(iv))
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return "", fmt.Errorf("%w: ciphertext is %d bytes; want a non-zero multiple of 16", ErrNIP04Invalid, len(ct))
	}
	key, err := SharedX(sk, pk)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return "", fmt.Errorf("keycast: NIP-04 cipher: %w", err)
	}
	plain := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, ct)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > aes.BlockSize {
		return "", fmt.Errorf("%w: bad padding (wrong key or corrupted data)", ErrNIP04Invalid)
	}
	for _, b := range plain[len(plain)-pad:] {
		if int(b) != pad {
			return "", fmt.Errorf("%w: bad padding (wrong key or corrupted data)", ErrNIP04Invalid)
		}
	}
	return string(plain[:len(plain)-pad]), nil
}
