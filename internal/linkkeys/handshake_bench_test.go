package linkkeys

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
)

// The public-key crypto of one full TLS 1.3 handshake as our configurations negotiate it
// (TestTLSNegotiatesX25519Ed25519: X25519, TLS_AES_128_GCM_SHA256, an Ed25519 certificate), one
// operation per benchmark, through the same library calls crypto/tls makes:
//
//	server: X25519 key generation + X25519 shared secret + Ed25519 sign of its CertificateVerify
//	client: X25519 key generation + X25519 shared secret + Ed25519 verify of that signature
//
// BenchmarkHandshakeCryptoServer and BenchmarkHandshakeCryptoClient run each side's three
// operations in a row; with server and client on one core each, full handshakes per second cannot
// exceed 1 / max(server ns/op, client ns/op), and each side alone cannot exceed 1 / its own ns/op
// per core-second. bench/linkkeys-handshake-pinned.sh runs these beside the end-to-end run and
// prints the share of that bound reached. The rest of a handshake (key schedule, transcript hash,
// record encryption, the session ticket, certificate parsing, sockets, the runtime) is what the
// end-to-end figure adds.

// cpuPerOp adds the metric cpu-ns/op to b: the process's CPU time over the loop divided by b.N.
// With -test.cpu 1 that is the operation's own CPU (plus the little the runtime spends beside
// it), which, unlike ns/op, does not grow when other processes share the core.
// Call it before the loop; call the returned function after it.
func cpuPerOp(b *testing.B) func() {
	start := machine.ProcessCPU()
	return func() {
		if d := machine.ProcessCPU() - start; start > 0 && b.N > 0 {
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

// certificateVerifyInput is what TLS 1.3 signs in the server's CertificateVerify (RFC 8446,
// 4.4.3): 64 spaces, the context string, a zero byte and the transcript hash, SHA-256 for
// TLS_AES_128_GCM_SHA256: 130 bytes.
func certificateVerifyInput() []byte {
	transcript := sha256.Sum256([]byte("ClientHello..Certificate"))
	msg := make([]byte, 0, 64+33+1+sha256.Size)
	for range 64 {
		msg = append(msg, ' ')
	}
	msg = append(msg, "TLS 1.3, server CertificateVerify"...)
	msg = append(msg, 0)
	return append(msg, transcript[:]...)
}

// hsKeys are the long-lived inputs of the per-handshake operations: the server's certificate key
// and a peer's X25519 public key share.
type hsKeys struct {
	sign ed25519.PrivateKey
	pub  ed25519.PublicKey
	peer *ecdh.PublicKey
	msg  []byte
	sig  []byte
}

func newHSKeys(b *testing.B) hsKeys {
	b.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	peer, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msg := certificateVerifyInput()
	sig, err := priv.Sign(rand.Reader, msg, crypto.Hash(0))
	if err != nil {
		b.Fatal(err)
	}
	return hsKeys{sign: priv, pub: pub, peer: peer.PublicKey(), msg: msg, sig: sig}
}

// x25519Share is one side's key exchange as crypto/tls does it (key_schedule.go, ecdhKeyExchange):
// a fresh key pair, its public share encoded, the peer's share decoded and the shared secret.
func x25519Share(b *testing.B, peer []byte) {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	_ = k.PublicKey().Bytes()
	pk, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.ECDH(pk); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkX25519KeyGen(b *testing.B) {
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		_ = k.PublicKey().Bytes()
	}
}

func BenchmarkX25519SharedSecret(b *testing.B) {
	keys := newHSKeys(b)
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := k.ECDH(keys.peer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519SignCertificateVerify signs through crypto.Signer, as crypto/tls does with the
// certificate's key (the expanded key is cached by crypto/ed25519 after the first use).
func BenchmarkEd25519SignCertificateVerify(b *testing.B) {
	keys := newHSKeys(b)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := keys.sign.Sign(rand.Reader, keys.msg, crypto.Hash(0)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519VerifyCertificateVerify(b *testing.B) {
	keys := newHSKeys(b)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if !ed25519.Verify(keys.pub, keys.msg, keys.sig) {
			b.Fatal("signature does not verify")
		}
	}
}

// BenchmarkHandshakeCryptoServer is the server's share of one full handshake: key generation,
// shared secret, CertificateVerify signature.
func BenchmarkHandshakeCryptoServer(b *testing.B) {
	keys := newHSKeys(b)
	peer := keys.peer.Bytes()
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		x25519Share(b, peer)
		if _, err := keys.sign.Sign(rand.Reader, keys.msg, crypto.Hash(0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandshakeCryptoClient is the client's share: key generation, shared secret, verifying
// the server's CertificateVerify signature.
func BenchmarkHandshakeCryptoClient(b *testing.B) {
	keys := newHSKeys(b)
	peer := keys.peer.Bytes()
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		x25519Share(b, peer)
		if !ed25519.Verify(keys.pub, keys.msg, keys.sig) {
			b.Fatal("signature does not verify")
		}
	}
}

// BenchmarkTLSHandshakeInMemory is one whole full handshake of our two configurations over
// net.Pipe in this process (both sides' CPU, no sockets, no server): the library's cost around
// the crypto above, for comparison with the two per-side benchmarks' sum.
func BenchmarkTLSHandshakeInMemory(b *testing.B) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	srv := ServerTLSConfig(cert)
	cli := ClientTLSConfig("loadtest.local", Fingerprint(key.Public().(ed25519.PublicKey)))
	done := make(chan error, 1)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		a, c := net.Pipe()
		go func() { done <- tls.Server(a, srv).Handshake() }()
		err := tls.Client(c, cli).Handshake()
		serr := <-done
		_, _ = a.Close(), c.Close()
		if err != nil || serr != nil {
			b.Fatalf("client: %v; server: %v", err, serr)
		}
	}
}
