package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/loadproof/loadproof/internal/atomicfile"
)

// Key and signature files are small; readers refuse anything larger before parsing it.
const (
	// MaxKeyBytes caps a PEM key file.
	MaxKeyBytes = 16 << 10
	// MaxSignatureBytes caps a signature file.
	MaxSignatureBytes = 16 << 10
)

// SignatureFormat is the version of the signature file's JSON form.
const SignatureFormat = "loadproof.signature/v1"

// SignatureSuffix is added to a result file's name for its detached signature
// (results.json → results.json.sig).
const SignatureSuffix = ".sig"

// PEM block types of the key files: the standard PKCS #8 private key and PKIX public key, so
// `openssl pkey` reads them too.
const (
	privatePEMType = "PRIVATE KEY"
	publicPEMType  = "PUBLIC KEY"
)

// Fingerprint is the SHA-256 of the raw 32-byte Ed25519 public key, in lower-case hex: how a
// signature names its key and how a person compares keys.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// GenerateKey makes an Ed25519 key pair from rand (crypto/rand when nil).
func GenerateKey(r io.Reader) (ed25519.PublicKey, ed25519.PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	pub, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, nil, fmt.Errorf("evidence: generating an Ed25519 key: %w", err)
	}
	return pub, priv, nil
}

// EncodePrivateKey returns priv as a PEM "PRIVATE KEY" block (PKCS #8).
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("evidence: encoding the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: privatePEMType, Bytes: der}), nil
}

// EncodePublicKey returns pub as a PEM "PUBLIC KEY" block (PKIX).
func EncodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("evidence: encoding the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: publicPEMType, Bytes: der}), nil
}

// WriteKeyPair writes prefix.key (the private key, mode 0600) and prefix.pub (the public key, 0644)
// and returns the public key's fingerprint. It refuses to replace an existing key file.
func WriteKeyPair(prefix string, r io.Reader) (string, error) {
	pub, priv, err := GenerateKey(r)
	if err != nil {
		return "", err
	}
	kb, err := EncodePrivateKey(priv)
	if err != nil {
		return "", err
	}
	pb, err := EncodePublicKey(pub)
	if err != nil {
		return "", err
	}
	for _, p := range []string{prefix + ".key", prefix + ".pub"} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("evidence: %s exists; keygen never replaces a key (remove it or choose another --out)", p)
		}
	}
	if err := atomicfile.Write(prefix+".key", kb, 0o600); err != nil {
		return "", fmt.Errorf("evidence: writing the private key: %w", err)
	}
	if err := atomicfile.Write(prefix+".pub", pb, 0o644); err != nil {
		return "", fmt.Errorf("evidence: writing the public key: %w", err)
	}
	return Fingerprint(pub), nil
}

func onePEM(b []byte, want, what string) ([]byte, error) {
	if len(b) > MaxKeyBytes {
		return nil, fmt.Errorf("evidence: %s is %d bytes, over the %d-byte cap of a key file", what, len(b), MaxKeyBytes)
	}
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("evidence: %s is not a PEM file (want a %q block, as `loadproof keygen` writes)", what, want)
	}
	if blk.Type != want {
		return nil, fmt.Errorf("evidence: %s holds a %q PEM block; want %q", what, blk.Type, want)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("evidence: %s has data after its %q block; a key file holds one key", what, want)
	}
	return blk.Bytes, nil
}

// ParsePrivateKey reads a PEM PKCS #8 Ed25519 private key (what keygen writes). what names the file
// in messages.
func ParsePrivateKey(b []byte, what string) (ed25519.PrivateKey, error) {
	der, err := onePEM(b, privatePEMType, what)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s: not a PKCS #8 private key: %w", what, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("evidence: %s holds a %T, not an Ed25519 key", what, k)
	}
	return priv, nil
}

// ParsePublicKey reads a PEM PKIX Ed25519 public key (what keygen writes). what names the file in
// messages.
func ParsePublicKey(b []byte, what string) (ed25519.PublicKey, error) {
	der, err := onePEM(b, publicPEMType, what)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s: not a PKIX public key: %w", what, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("evidence: %s holds a %T, not an Ed25519 key", what, k)
	}
	return pub, nil
}

// ReadPrivateKey reads and parses a private key file (--sign-key).
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := readCapped(path, MaxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading the signing key: %w", err)
	}
	return ParsePrivateKey(b, path)
}

// ReadPublicKey reads and parses a public key file (verify --key).
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := readCapped(path, MaxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading the public key: %w", err)
	}
	return ParsePublicKey(b, path)
}

// Signature is a detached signature file (evidence.sig in a bundle, FILE.sig beside a result). The
// signed message is SignedMessage(SignedFile, SHA-256 of the file's bytes); the public key travels
// with it so a reader without the key can still tell which key signed and that the signature holds
// for it, and a reader with the key (--key) knows the signer.
type Signature struct {
	Format    string `json:"format"`
	Algorithm string `json:"algorithm"`
	// SignedFile is the base name of the signed file (manifest.json for a bundle).
	SignedFile string `json:"signed_file"`
	// SignedSHA256 is the SHA-256 of the signed file's bytes, hex.
	SignedSHA256 string `json:"signed_sha256"`
	// PublicKey is the raw 32-byte Ed25519 public key, standard base64.
	PublicKey string `json:"public_key"`
	// KeyFingerprint is Fingerprint of PublicKey.
	KeyFingerprint string `json:"key_fingerprint"`
	// Signature is the 64-byte Ed25519 signature, standard base64.
	Signature string `json:"signature"`
}

// SignedMessage is what the signature covers: the format, the signed file's base name and its
// SHA-256 (hex), joined by NUL bytes. Binding the name keeps a signature of one file from passing
// for another's.
func SignedMessage(name, sha256Hex string) []byte {
	return []byte(SignatureFormat + "\x00" + name + "\x00" + sha256Hex)
}

// Sign signs data, the content of the file named name (its base name).
func Sign(priv ed25519.PrivateKey, name string, data []byte) *Signature {
	sum := sha256.Sum256(data)
	return SignDigest(priv, name, hex.EncodeToString(sum[:]))
}

// SignDigest signs the file named name whose SHA-256 (hex) is h.
func SignDigest(priv ed25519.PrivateKey, name, h string) *Signature {
	pub := priv.Public().(ed25519.PublicKey)
	return &Signature{Format: SignatureFormat, Algorithm: "ed25519", SignedFile: name, SignedSHA256: h,
		PublicKey: base64.StdEncoding.EncodeToString(pub), KeyFingerprint: Fingerprint(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, SignedMessage(name, h)))}
}

// Encode returns the signature file's bytes.
func (s *Signature) Encode() []byte {
	b, _ := json.MarshalIndent(s, "", "  ") // plain strings: cannot fail
	return append(b, '\n')
}

// ParseSignature decodes a signature file strictly: known fields only, the v1 format, Ed25519, a
// 32-byte key whose fingerprint matches and a 64-byte signature. what names the file in messages.
func ParseSignature(b []byte, what string) (*Signature, error) {
	if len(b) > MaxSignatureBytes {
		return nil, fmt.Errorf("evidence: %s is %d bytes, over the %d-byte cap of a signature file", what, len(b), MaxSignatureBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Signature
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("evidence: %s is not a signature file: %w", what, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("evidence: %s has data after its JSON object", what)
	}
	var errs []error
	if s.Format != SignatureFormat {
		errs = append(errs, fmt.Errorf("format %q is not %q", s.Format, SignatureFormat))
	}
	if s.Algorithm != "ed25519" {
		errs = append(errs, fmt.Errorf("algorithm %q is not ed25519", s.Algorithm))
	}
	if !ValidMemberName(s.SignedFile) {
		errs = append(errs, fmt.Errorf("signed_file %q is not a plain file name", s.SignedFile))
	}
	if h, err := hex.DecodeString(s.SignedSHA256); err != nil || len(h) != sha256.Size {
		errs = append(errs, errors.New("signed_sha256 is not 64 hex digits"))
	}
	if pub, err := base64.StdEncoding.DecodeString(s.PublicKey); err != nil || len(pub) != ed25519.PublicKeySize {
		errs = append(errs, errors.New("public_key is not a base64 32-byte Ed25519 key"))
	} else if Fingerprint(pub) != s.KeyFingerprint {
		errs = append(errs, fmt.Errorf("key_fingerprint %q is not the SHA-256 of public_key", s.KeyFingerprint))
	}
	if sig, err := base64.StdEncoding.DecodeString(s.Signature); err != nil || len(sig) != ed25519.SignatureSize {
		errs = append(errs, errors.New("signature is not a base64 64-byte Ed25519 signature"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("evidence: %s is not a valid signature file: %w", what, errors.Join(errs...))
	}
	return &s, nil
}

// Check verifies s against data, the content of the file named name. trusted, when set, is the
// key the signer must hold (verify --key); without it the signature is checked against the key it
// carries, which proves the file unchanged since that key signed it, not who holds the key.
func (s *Signature) Check(name string, data []byte, trusted ed25519.PublicKey) error {
	sum := sha256.Sum256(data)
	return s.CheckDigest(name, hex.EncodeToString(sum[:]), trusted)
}

// CheckDigest is Check for a file whose SHA-256 (hex) is h.
func (s *Signature) CheckDigest(name, h string, trusted ed25519.PublicKey) error {
	if s.SignedFile != name {
		return fmt.Errorf("evidence: the signature is of %q, not of %q", s.SignedFile, name)
	}
	if h != s.SignedSHA256 {
		return fmt.Errorf("evidence: %s has SHA-256 %s; the signature covers %s: the file changed after it was signed", name, h, s.SignedSHA256)
	}
	pub, _ := base64.StdEncoding.DecodeString(s.PublicKey) // checked by ParseSignature
	sig, _ := base64.StdEncoding.DecodeString(s.Signature)
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, SignedMessage(s.SignedFile, s.SignedSHA256), sig) {
		return fmt.Errorf("evidence: the signature of %s does not verify with key %s", name, s.KeyFingerprint)
	}
	if trusted != nil && Fingerprint(trusted) != s.KeyFingerprint {
		return fmt.Errorf("evidence: %s is signed by key %s, not by the given key %s", name, s.KeyFingerprint, Fingerprint(trusted))
	}
	return nil
}

// SignFile writes path+".sig", the detached signature of the file at path (a result file).
func SignFile(path string, priv ed25519.PrivateKey) error {
	h, _, err := hashFile(path)
	if err != nil {
		return fmt.Errorf("evidence: signing: %w", err)
	}
	s := SignDigest(priv, baseName(path), h)
	if err := atomicfile.Write(path+SignatureSuffix, s.Encode(), 0o644); err != nil {
		return fmt.Errorf("evidence: writing the signature: %w", err)
	}
	return nil
}

// SignBundle writes dir/evidence.sig, the detached signature of the bundle's manifest.
func SignBundle(dir string, priv ed25519.PrivateKey) error {
	b, err := readCapped(dir+string(os.PathSeparator)+ManifestFile, MaxManifestBytes)
	if err != nil {
		return fmt.Errorf("evidence: signing the manifest: %w", err)
	}
	s := Sign(priv, ManifestFile, b)
	if err := atomicfile.Write(dir+string(os.PathSeparator)+SignatureFile, s.Encode(), 0o644); err != nil {
		return fmt.Errorf("evidence: failed to write evidence bundle: %w", err)
	}
	return nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if os.IsPathSeparator(p[i]) {
			return p[i+1:]
		}
	}
	return p
}
