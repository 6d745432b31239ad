package linkkeys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Fingerprint returns the pin of an Ed25519 key: the lowercase hex SHA-256 of
// its 32 raw bytes (64 characters). It equals the fp= value in the domain's
// _linkkeys TXT record and DomainPublicKey.Fingerprint.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// SelfSignedCert builds a self-signed certificate for domain (subject CN and
// the single DNS SAN) signed by key, with no chain. Zero notBefore or
// notAfter default to one hour ago and ten years from now. The returned
// certificate has Leaf set.
func SelfSignedCert(domain string, key ed25519.PrivateKey, notBefore, notAfter time.Time) (tls.Certificate, error) {
	if len(key) != ed25519.PrivateKeySize {
		return tls.Certificate{}, fmt.Errorf("linkkeys: self-signed certificate: Ed25519 private key has %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if domain == "" {
		return tls.Certificate{}, errors.New("linkkeys: self-signed certificate: empty domain; pass the server's domain name (e.g. loadtest.local)")
	}
	now := time.Now()
	if notBefore.IsZero() {
		notBefore = now.Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = now.AddDate(10, 0, 0)
	}
	if !notAfter.After(notBefore) {
		return tls.Certificate{}, fmt.Errorf("linkkeys: self-signed certificate: notAfter %s is not after notBefore %s", notAfter.Format(time.RFC3339), notBefore.Format(time.RFC3339))
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("linkkeys: self-signed certificate: serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: domain},
		DNSNames:              []string{domain},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	pub := key.Public()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("linkkeys: self-signed certificate for %q: %w", domain, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("linkkeys: self-signed certificate for %q: parsing it back: %w", domain, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// curves is the key-exchange preference of both sides. X25519 first because
// it is the cheapest group and the one rustls (ring provider) prefers; P-256
// as a fallback. Leaving CurvePreferences nil would let Go 1.24+ offer and
// prefer the hybrid X25519MLKEM768, which roughly doubles handshake CPU and
// the ClientHello size, and which the upstream server does not use, so a
// handshake-rate measurement would no longer be comparable.
var curves = []tls.CurveID{tls.X25519, tls.CurveP256}

// ServerTLSConfig returns the server configuration: the given certificate,
// TLS 1.2 and 1.3, no client certificates, no ALPN, session tickets on (so
// clients can resume) and X25519-first key exchange (see curves).
func ServerTLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{cert},
		MinVersion:       tls.VersionTLS12,
		MaxVersion:       tls.VersionTLS13,
		ClientAuth:       tls.NoClientCert,
		CurvePreferences: curves,
	}
}

// FingerprintMismatchError reports a server certificate whose key
// fingerprint is not among the pinned ones.
type FingerprintMismatchError struct {
	Got  string   // fingerprint of the presented certificate key
	Want []string // the pinned fingerprints
}

func (e *FingerprintMismatchError) Error() string {
	want := "(none)"
	if len(e.Want) > 0 {
		want = strings.Join(e.Want, ", ")
	}
	return fmt.Sprintf("linkkeys: server certificate fingerprint %s does not match pinned %s; check that the info file belongs to the running server", e.Got, want)
}

// ClientTLSConfig returns a client configuration that trusts a server by
// fingerprint pinning instead of a CA, like the upstream client: chain and
// name checks are off (InsecureSkipVerify) and VerifyConnection accepts the
// leaf only if the current time is inside its validity window, its key is
// Ed25519 and its [Fingerprint] is one of fingerprints (compared
// case-insensitively). With no fingerprints every server is rejected.
// ServerName is sent as SNI but not checked. No ALPN is offered. The caller
// may set ClientSessionCache afterwards to enable resumption; resumed
// connections are checked the same way.
func ClientTLSConfig(serverName string, fingerprints ...string) *tls.Config {
	pins := make([]string, len(fingerprints))
	for i, f := range fingerprints {
		pins[i] = strings.ToLower(strings.TrimSpace(f))
	}
	return &tls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true, // replaced by the pin check in VerifyConnection
		MinVersion:         tls.VersionTLS12,
		MaxVersion:         tls.VersionTLS13,
		CurvePreferences:   curves,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, pins, time.Now())
		},
	}
}

func verifyPinned(certs []*x509.Certificate, pins []string, now time.Time) error {
	if len(certs) == 0 {
		return errors.New("linkkeys: server presented no certificate")
	}
	leaf := certs[0]
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("linkkeys: server certificate is not valid at %s (valid %s to %s); the server must present a current certificate",
			now.UTC().Format(time.RFC3339), leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	pub, ok := leaf.PublicKey.(ed25519.PublicKey)
	if !ok {
		return fmt.Errorf("linkkeys: server certificate key is %T, want Ed25519", leaf.PublicKey)
	}
	got := Fingerprint(pub)
	for _, p := range pins {
		if p == got {
			return nil
		}
	}
	return &FingerprintMismatchError{Got: got, Want: append([]string(nil), pins...)}
}
