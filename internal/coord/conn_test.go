package coord

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

func runServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// TestConnectNkey: --nats-nkey authenticates with an nkey seed file; without it the server refuses.
func TestConnectNkey(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	path := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s := runServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	nc, err := Connect(ConnConfig{URL: s.ClientURL(), NkeyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := Connect(ConnConfig{URL: s.ClientURL()}); err == nil {
		t.Error("connected without the nkey")
	}
}

// TestConnectTLS: --nats-ca trusts a server whose certificate it signs; a client without it fails.
func TestConnectTLS(t *testing.T) {
	t.Parallel()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	s := runServer(t, &server.Options{TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, Authorization: "tok"})
	url := "tls://" + s.Addr().String()
	nc, err := Connect(ConnConfig{URL: url, Token: "tok", CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := Connect(ConnConfig{URL: url, Token: "tok"}); err == nil {
		t.Error("connected to a TLS server whose CA the client was not given")
	}
}
