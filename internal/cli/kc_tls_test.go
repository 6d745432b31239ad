package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// privateCA makes a CA and a certificate it signs for 127.0.0.1 and localhost; it returns the
// server certificate and the CA's PEM.
func privateCA(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "loadproof test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "staging proxy"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// tlsProxy is a TLS-terminating reverse proxy in front of target, offering HTTP/2 and HTTP/1.1 by
// ALPN as a Cloud Run frontend does, and recording the protocol of every request by path.
type tlsProxy struct {
	*httptest.Server
	mu     sync.Mutex
	protos map[string]map[string]int // path → proto → count
}

func newTLSProxy(t *testing.T, target string, cert tls.Certificate) *tlsProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &tlsProxy{protos: map[string]map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if p.protos[r.URL.Path] == nil {
			p.protos[r.URL.Path] = map[string]int{}
		}
		p.protos[r.URL.Path][r.Proto]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	p.EnableHTTP2 = true
	p.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	p.StartTLS()
	t.Cleanup(p.Close)
	return p
}

func (p *tlsProxy) seen(path string) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.protos[path] {
		out[k] = v
	}
	return out
}

// TestKeycastToolThroughATLSProxyWithAPrivateCA is issue 13 item 5: a staging target behind a
// private CA worked only through SSL_CERT_FILE. setup, run and report go through a real
// TLS-terminating proxy (httputil.ReverseProxy, a generated CA) in front of the reference server with
// --ca-cert; --insecure-skip-verify works too and is recorded; the run's fast client speaks
// HTTP/1.1 while setup's net/http client negotiates HTTP/2, as docs/reliability.md says.
func TestKeycastToolThroughATLSProxyWithAPrivateCA(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	cert, caPEM := privateCA(t)
	proxy := newTLSProxy(t, srv.URL, cert)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(caPEM)
	users := filepath.Join(dir, "users.json")
	code, _, errs := kcRun(t, "setup", "--url", proxy.URL, "--ca-cert", ca, "--mode", "http", "-n", "2", "-c", "2", "-o", users)
	if code != ExitOK {
		t.Fatalf("setup through the proxy: exit %d\n%s", code, errs)
	}
	if uf, err := keycast.ReadUsersFile(users); err != nil || len(uf.Users) != 2 {
		t.Fatalf("users %v %v", uf, err)
	}
	results := filepath.Join(dir, "results.json")
	code, _, errs = kcRun(t, "run", "--url", proxy.URL, "--ca-cert", ca, "--users-file", users, "-d", "0", "-n", "20", "-c", "2", "--ramp-up", "0",
		"-m", "get-public-key", "-o", results)
	if code != ExitOK {
		t.Fatalf("run through the proxy: exit %d\n%s", code, errs)
	}
	r, err := keycastresult.Read(results)
	if err != nil || r.Summary.SuccessfulRequests != 20 || r.ServerMetrics == nil {
		t.Fatalf("results %+v %v", r, err)
	}
	if tl := r.Metadata.TLS; tl == nil || tl.CACert != ca || tl.CACertSHA256 != hex.EncodeToString(sum[:]) || tl.InsecureSkipVerify {
		t.Fatalf("metadata tls %+v", r.Metadata.TLS)
	}
	code, out, _ := kcRun(t, "report", "-i", results)
	if code != ExitOK || !strings.Contains(out, "Success Rate:  100.0%") {
		t.Fatalf("report exit %d:\n%s", code, out)
	}
	if got := proxy.seen(keycast.PathNostr); got["HTTP/1.1"] != 20 || len(got) != 1 {
		t.Errorf("run's requests reached the proxy as %v; the fast client speaks HTTP/1.1 only", got)
	}
	if got := proxy.seen(keycast.PathRegister); got["HTTP/2.0"] != 2 {
		t.Errorf("setup's registrations reached the proxy as %v; net/http negotiates HTTP/2 by ALPN", got)
	}

	// Without the CA the certificate is refused: verification is on by default.
	code, _, errs = kcRun(t, "run", "--url", proxy.URL, "--users-file", users, "-d", "0", "-n", "2", "--ramp-up", "0", "-o", filepath.Join(dir, "r2.json"))
	if code != ExitCouldNotRun || !strings.Contains(errs, "certificate") {
		t.Fatalf("run without --ca-cert: exit %d\n%s", code, errs)
	}
	// --insecure-skip-verify works and is recorded.
	code, _, errs = kcRun(t, "run", "--url", proxy.URL, "--insecure-skip-verify", "--users-file", users, "-d", "0", "-n", "4", "--ramp-up", "0", "-o", filepath.Join(dir, "r3.json"))
	if code != ExitOK {
		t.Fatalf("run --insecure-skip-verify: exit %d\n%s", code, errs)
	}
	if r, err := keycastresult.Read(filepath.Join(dir, "r3.json")); err != nil || r.Metadata.TLS == nil || !r.Metadata.TLS.InsecureSkipVerify {
		t.Fatalf("insecure not recorded: %+v %v", r, err)
	}
}

func TestKeycastInsecureSkipVerifyIsRefusedForProductionHosts(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "t"}}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--url", "https://login.divine.video", "--insecure-skip-verify", "--users-file", users, "-o", filepath.Join(dir, "r.json")},
		{"run", "--url", "https://KEYCAST.divine.video./", "--insecure-skip-verify", "--users-file", users, "-o", filepath.Join(dir, "r.json")},
		{"setup", "--url", "https://login.divine.video", "--insecure-skip-verify", "-o", users},
		{"profile", "--url", "https://keycast.divine.video", "--pprof-url", "http://127.0.0.1:1", "--insecure-skip-verify", "--output", dir},
	} {
		code, _, errs := kcRun(t, args...)
		if code != ExitUsage || !strings.Contains(errs, "--insecure-skip-verify is refused for the production host") {
			t.Errorf("%v: exit %d\n%s", args, code, errs)
		}
	}
	code, _, errs := kcRun(t, "run", "--ca-cert", filepath.Join(dir, "none.pem"), "--users-file", users, "-o", filepath.Join(dir, "r.json"))
	if code != ExitUsage || !strings.Contains(errs, "--ca-cert") {
		t.Errorf("missing CA file: exit %d\n%s", code, errs)
	}
	code, _, errs = kcRun(t, "run", "--ca-cert", users, "--users-file", users, "-o", filepath.Join(dir, "r.json"))
	if code != ExitUsage || !strings.Contains(errs, "no PEM certificate") {
		t.Errorf("CA file without a certificate: exit %d\n%s", code, errs)
	}
}
