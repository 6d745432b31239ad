package linkkeys

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testwait"
)

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tlsServer serves TLS on 127.0.0.1:0 and reports each server-side
// handshake result on the returned channel.
func tlsServer(t *testing.T, cfg *tls.Config) (addr string, results <-chan error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			err = c.(*tls.Conn).Handshake()
			if err == nil {
				// One byte of application data, which reaches the client
				// after any TLS 1.3 session ticket; then wait for its close.
				_, _ = c.Write([]byte{'k'})
				var b [1]byte
				_, _ = c.Read(b[:])
			}
			_ = c.Close()
			ch <- err
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String(), ch
}

func dial(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

func TestSelfSignedCert(t *testing.T) {
	key := newKey(t)
	cert, err := SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if leaf.Subject.CommonName != "loadtest.local" || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "loadtest.local" {
		t.Fatalf("CN %q SAN %v", leaf.Subject.CommonName, leaf.DNSNames)
	}
	if len(cert.Certificate) != 1 || leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) != nil {
		t.Fatal("certificate is not a single self-signed cert")
	}
	if got, want := Fingerprint(leaf.PublicKey.(ed25519.PublicKey)), Fingerprint(key.Public().(ed25519.PublicKey)); got != want || len(got) != 64 || strings.ToLower(got) != got {
		t.Fatalf("fingerprint %q, want %q (64 lowercase hex)", got, want)
	}
	if now := time.Now(); !leaf.NotBefore.Before(now) || !leaf.NotAfter.After(now.AddDate(9, 0, 0)) {
		t.Fatalf("default validity %v .. %v", leaf.NotBefore, leaf.NotAfter)
	}
	bad := []struct {
		name   string
		domain string
		key    ed25519.PrivateKey
		nb, na time.Time
	}{
		{"short key", "d", key[:10], time.Time{}, time.Time{}},
		{"empty domain", "", key, time.Time{}, time.Time{}},
		{"inverted window", "d", key, time.Now(), time.Now().Add(-time.Hour)},
	}
	for _, tt := range bad {
		if _, err := SelfSignedCert(tt.domain, tt.key, tt.nb, tt.na); err == nil || !strings.HasPrefix(err.Error(), "linkkeys: ") {
			t.Errorf("%s: error = %v", tt.name, err)
		}
	}
}

func TestFingerprintKnownValue(t *testing.T) {
	// SHA-256 of 32 zero bytes.
	if got := Fingerprint(make(ed25519.PublicKey, 32)); got != "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925" {
		t.Fatalf("Fingerprint = %s", got)
	}
}

func TestTLSPinning(t *testing.T) {
	key := newKey(t)
	cert, err := SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	fp := Fingerprint(key.Public().(ed25519.PublicKey))
	addr, results := tlsServer(t, ServerTLSConfig(cert))
	other := Fingerprint(newKey(t).Public().(ed25519.PublicKey))

	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			// Accepts the right pin, among others, in upper case, with a
			// server name that does not match the certificate.
			cfg := ClientTLSConfig("not-the-cert-name.example", other, strings.ToUpper(fp))
			cfg.MaxVersion = version
			cs, err := dial(addr, cfg)
			if err != nil {
				t.Fatalf("pinned handshake failed: %v", err)
			}
			if cs.Version != version || cs.NegotiatedProtocol != "" || cs.ServerName != "not-the-cert-name.example" {
				t.Fatalf("version %x ALPN %q SNI %q", cs.Version, cs.NegotiatedProtocol, cs.ServerName)
			}
			if err := testwait.Recv(t, results, testwait.Long, "the server side's handshake result"); err != nil {
				t.Fatalf("server handshake: %v", err)
			}

			cfg = ClientTLSConfig("loadtest.local", other)
			cfg.MaxVersion = version
			_, err = dial(addr, cfg)
			var fme *FingerprintMismatchError
			if !errors.As(err, &fme) {
				t.Fatalf("wrong pin: error %v is not a *FingerprintMismatchError", err)
			}
			if fme.Got != fp || len(fme.Want) != 1 || fme.Want[0] != other {
				t.Fatalf("mismatch error %+v", fme)
			}
			want := "linkkeys: server certificate fingerprint " + fp + " does not match pinned " + other
			if !strings.HasPrefix(fme.Error(), want) {
				t.Fatalf("message %q, want prefix %q", fme.Error(), want)
			}
			testwait.Recv(t, results, testwait.Long, "the server side's handshake result") // it fails too; its error is not ours to judge

			_, err = dial(addr, ClientTLSConfig("loadtest.local"))
			if !errors.As(err, &fme) || !strings.Contains(err.Error(), "(none)") {
				t.Fatalf("no pins: %v", err)
			}
			testwait.Recv(t, results, testwait.Long, "the server side's handshake result")
		})
	}
}

func TestTLSResumptionStillPinned(t *testing.T) {
	key := newKey(t)
	cert, _ := SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	addr, results := tlsServer(t, ServerTLSConfig(cert))
	cache := tls.NewLRUClientSessionCache(8)
	cfg := ClientTLSConfig("loadtest.local", Fingerprint(key.Public().(ed25519.PublicKey)))
	cfg.ClientSessionCache = cache
	resumed := false
	for i := 0; i < 3 && !resumed; i++ {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The TLS 1.3 ticket arrives after the handshake, ahead of the
		// server's data byte, so reading that byte stores the ticket.
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		resumed = c.ConnectionState().DidResume
		_ = c.Close()
		testwait.Recv(t, results, testwait.Long, "the server side's handshake result")
	}
	if !resumed {
		t.Fatal("no connection resumed with a ClientSessionCache set")
	}
	// Resumption must not bypass the pin: a config pinning another key with
	// the same cache is refused.
	bad := ClientTLSConfig("loadtest.local", Fingerprint(newKey(t).Public().(ed25519.PublicKey)))
	bad.ClientSessionCache = cache
	var fme *FingerprintMismatchError
	if _, err := dial(addr, bad); !errors.As(err, &fme) {
		t.Fatalf("resumed connection with a wrong pin: %v", err)
	}
	testwait.Recv(t, results, testwait.Long, "the server side's handshake result")
}

func TestTLSRejectsExpiredAndNotYetValid(t *testing.T) {
	key := newKey(t)
	fp := Fingerprint(key.Public().(ed25519.PublicKey))
	now := time.Now()
	windows := []struct {
		name   string
		nb, na time.Time
	}{
		{"expired", now.Add(-2 * time.Hour), now.Add(-time.Hour)},
		{"not yet valid", now.Add(time.Hour), now.Add(2 * time.Hour)},
	}
	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			cert, err := SelfSignedCert("loadtest.local", key, w.nb, w.na)
			if err != nil {
				t.Fatal(err)
			}
			addr, results := tlsServer(t, ServerTLSConfig(cert))
			_, err = dial(addr, ClientTLSConfig("loadtest.local", fp))
			if err == nil || !strings.Contains(err.Error(), "is not valid at") {
				t.Fatalf("error = %v, want a validity-window error", err)
			}
			var fme *FingerprintMismatchError
			if errors.As(err, &fme) {
				t.Fatal("validity failure reported as a fingerprint mismatch")
			}
			testwait.Recv(t, results, testwait.Long, "the server side's handshake result")
		})
	}
}

func TestVerifyPinnedRejectsNonEd25519(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "d"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	if err := verifyPinned([]*x509.Certificate{leaf}, []string{"x"}, time.Now()); err == nil || !strings.Contains(err.Error(), "want Ed25519") {
		t.Fatalf("error = %v", err)
	}
	if err := verifyPinned(nil, []string{"x"}, time.Now()); err == nil {
		t.Fatal("no certificate accepted")
	}
}

func TestTLSConfigs(t *testing.T) {
	cert, _ := SelfSignedCert("d", newKey(t), time.Time{}, time.Time{})
	s := ServerTLSConfig(cert)
	c := ClientTLSConfig("d", "ab")
	for name, cfg := range map[string]*tls.Config{"server": s, "client": c} {
		if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 || len(cfg.NextProtos) != 0 {
			t.Errorf("%s: versions %x..%x ALPN %v", name, cfg.MinVersion, cfg.MaxVersion, cfg.NextProtos)
		}
		if len(cfg.CurvePreferences) == 0 || cfg.CurvePreferences[0] != tls.X25519 {
			t.Errorf("%s: curves %v, want X25519 first", name, cfg.CurvePreferences)
		}
	}
	if s.ClientAuth != tls.NoClientCert || s.SessionTicketsDisabled {
		t.Errorf("server: client auth %v, tickets disabled %v", s.ClientAuth, s.SessionTicketsDisabled)
	}
	if c.ServerName != "d" || !c.InsecureSkipVerify || c.VerifyConnection == nil {
		t.Errorf("client: %+v", c)
	}
}

// Exercise the pin check on a raw net.Pipe too, so a misbehaving listener
// cannot hide a failure.
func TestTLSOverPipe(t *testing.T) {
	pipeHandshake(t)
}

// pipeHandshake completes a handshake between our two configurations over a net.Pipe (both ends
// closed when the test ends) and returns the client side.
func pipeHandshake(t *testing.T) *tls.Conn {
	t.Helper()
	key := newKey(t)
	cert, _ := SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	done := make(chan error, 1)
	go func() { done <- tls.Server(a, ServerTLSConfig(cert)).Handshake() }()
	c := tls.Client(b, ClientTLSConfig("loadtest.local", Fingerprint(key.Public().(ed25519.PublicKey))))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, done, testwait.Long, "the server side's handshake"); err != nil {
		t.Fatal(err)
	}
	return c
}

// What a full handshake between our two configurations negotiates, which the crypto benchmarks
// (handshake_bench_test.go) model: TLS 1.3, X25519 alone (no hybrid, no P-256 key share), a
// SHA-256 cipher suite and the server's Ed25519 certificate key, so one Ed25519 CertificateVerify.
func TestTLSNegotiatesX25519Ed25519(t *testing.T) {
	c := pipeHandshake(t)
	cs := c.ConnectionState()
	if cs.Version != tls.VersionTLS13 || cs.CurveID != tls.X25519 || cs.DidResume {
		t.Errorf("version %s, key exchange %v, resumed %v; want TLS 1.3, X25519, a full handshake",
			tls.VersionName(cs.Version), cs.CurveID, cs.DidResume)
	}
	if cs.CipherSuite != tls.TLS_AES_128_GCM_SHA256 && cs.CipherSuite != tls.TLS_CHACHA20_POLY1305_SHA256 {
		t.Errorf("cipher suite %s, want a SHA-256 suite", tls.CipherSuiteName(cs.CipherSuite))
	}
	if _, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey); !ok {
		t.Errorf("server certificate key %T, want Ed25519", cs.PeerCertificates[0].PublicKey)
	}
}
