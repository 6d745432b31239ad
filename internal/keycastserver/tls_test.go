package keycastserver_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// newTLSClient is newClient for a server from kctest.StartTLS: it trusts the server's
// self-signed certificate and offers h2 and http/1.1 by ALPN, as net/http does by default.
func newTLSClient(t testing.TB, srv *kctest.Server) *client {
	c := newClient(t, srv)
	c.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.CertPool}, ForceAttemptHTTP2: true}
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

const (
	fastTLS = `keycast_http_fastpath_connections_total{transport="tls"}`
	fastTCP = `keycast_http_fastpath_connections_total{transport="tcp"}`
	hsOK    = `keycast_http_tls_handshakes_total{outcome="ok"}`
	hsFail  = `keycast_http_tls_handshakes_total{outcome="failed"}`
	hsTime  = `keycast_http_tls_handshakes_total{outcome="timeout"}`
)

// TestTLSServesBothPaths: over TLS, net/http answers registration and OAuth (with an https
// redirect URI on the server's own host), the fast path answers /api/nostr on a fresh
// connection, ALPN settles on http/1.1 when the client offers h2 too, and the metrics show
// which path served the TLS connections.
func TestTLSServesBothPaths(t *testing.T) {
	srv := kctest.StartTLS(t, keycastserver.Config{})
	c := newTLSClient(t, srv)
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("URL %s", srv.URL)
	}
	a := c.register("tls@test.local", nil)
	tr := c.grant(a, keycast.LoadtestScope) // redirect_uri https://127.0.0.1:<port>/callback
	before := c.metrics()
	if before[fastTLS] != 0 {
		t.Fatalf("fast path counted a TLS connection before any /api/nostr request: %v", before[fastTLS])
	}

	// A fresh connection whose first request is the fast path's shape.
	conn, err := tls.Dial("tcp", srv.Addr, &tls.Config{RootCAs: srv.CertPool, NextProtos: []string{"h2", "http/1.1"}, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN: negotiated %q, want http/1.1 (the server offers nothing else)", p)
	}
	if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Fatalf("TLS version %x", v)
	}
	br := bufio.NewReader(conn)
	body := `{"method":"get_public_key","params":[]}`
	for i := range 3 { // three requests on one connection: the fast path keeps it
		fmt.Fprintf(conn, "POST /api/nostr HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			srv.Addr, tr.AccessToken, len(body), body)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), a.pubkey) {
			t.Fatalf("request %d: %d %s", i, res.StatusCode, b)
		}
	}
	m := c.metrics()
	if m[fastTLS] != 1 || m[fastTCP] != 0 {
		t.Fatalf("fast path connections: tls %d tcp %d, want 1 and 0", m[fastTLS], m[fastTCP])
	}
	if m[keycast.MetricHTTPRPCSuccess]-before[keycast.MetricHTTPRPCSuccess] != 3 {
		t.Fatalf("rpc successes %d → %d, want +3", before[keycast.MetricHTTPRPCSuccess], m[keycast.MetricHTTPRPCSuccess])
	}
	if m[hsOK] < 2 || m[hsFail] != 0 || m[hsTime] != 0 {
		t.Fatalf("handshakes ok %d failed %d timeout %d", m[hsOK], m[hsFail], m[hsTime])
	}

	// net/http over TLS, through the client that offers h2: HTTP/1.1 it is.
	res, err := c.hc.Get(srv.URL + keycast.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 1 || res.TLS == nil || res.TLS.NegotiatedProtocol != "http/1.1" {
		t.Fatalf("health over TLS: %s, ALPN %+v", res.Proto, res.TLS)
	}

	// A client that speaks plain HTTP to the TLS port fails the handshake, counted.
	pc, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(pc, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, pc)
	pc.Close()
	if m := c.metrics(); m[hsFail] != 1 {
		t.Fatalf("plain HTTP to the TLS port: failed handshakes %d, want 1", m[hsFail])
	}
}

// TestTLSRedirectRule: over TLS the token exchange accepts an https redirect URI on the server's
// own host (what setup sends against an https target) and keeps upstream's refusal of http on
// any host that is not local.
func TestTLSRedirectRule(t *testing.T) {
	srv := kctest.StartTLS(t, keycastserver.Config{})
	c := newTLSClient(t, srv)
	a := c.register("redirect@test.local", nil)
	tr := c.grant(a, keycast.LoadtestScope)
	tok, err := keycast.ParseUCAN(tr.AccessToken)
	if err != nil || tok.Facts.RedirectOrigin != srv.URL {
		t.Fatalf("access token redirect_origin %q (%v), want %s", tok.Facts.RedirectOrigin, err, srv.URL)
	}
	for _, redirect := range []string{"http://198.18.0.1/callback", "http://keycast.example/callback"} {
		req := keycast.AuthorizeRequest{Approved: true, ClientID: keycast.LoadtestClientID, RedirectURI: redirect, Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req, "Cookie", keycast.SessionCookieName+"="+a.session)
		var ar keycast.AuthorizeResponse
		r.json(t, &ar)
		r = c.token(ar.Code, redirect, "")
		if r.status != 400 || !strings.Contains(string(r.body), "use https") {
			t.Fatalf("token with redirect_uri %s: %d %s, want 400 naming https", redirect, r.status, r.body)
		}
	}
}

// TestTLSHandshakeTimeout: a client that opens a connection to the TLS port and stalls, before
// its ClientHello or halfway through it, is cut at the header timeout and counted.
func TestTLSHandshakeTimeout(t *testing.T) {
	const limit = 300 * time.Millisecond
	srv := kctest.StartTLS(t, keycastserver.Config{HeaderTimeout: limit})
	c := newTLSClient(t, srv)
	for i, send := range [][]byte{nil, {0x16, 0x03, 0x01, 0x02, 0x00, 0x01}} {
		conn, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn.Write(send)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		took := time.Since(start)
		conn.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("stall %d: the server kept a stalled handshake for 20 s (header timeout %v)", i, limit)
		}
		if took < limit*9/10 {
			t.Fatalf("stall %d: cut after %v, before the header timeout %v", i, took, limit)
		}
		if m := c.metrics(); m[hsTime] != uint64(i+1) {
			t.Fatalf("stall %d: timed-out handshakes %d, want %d", i, m[hsTime], i+1)
		}
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func keyPEM(t *testing.T, cert tls.Certificate) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestLoadTLSCertificate: bad certificate files give errors naming the file and the problem; an
// expired certificate loads with a warning.
func TestLoadTLSCertificate(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	certA, pemA, err := keycastserver.SelfSignedCertificate([]string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	certB, _, _ := keycastserver.SelfSignedCertificate([]string{"localhost"}, now)
	old, oldPEM, _ := keycastserver.SelfSignedCertificate([]string{"localhost"}, now.Add(-2*keycastserver.SelfSignedLifetime))
	goodCert := writeFile(t, dir, "a.crt", pemA)
	goodKey := writeFile(t, dir, "a.key", keyPEM(t, certA))
	otherKey := writeFile(t, dir, "b.key", keyPEM(t, certB))
	notPEM := writeFile(t, dir, "junk", []byte("hello, not a certificate\n"))
	big := writeFile(t, dir, "big", make([]byte, 1<<20+1))
	tests := []struct {
		name, cert, key string
		want            string // "" = loads
	}{
		{"good", goodCert, goodKey, ""},
		{"missing cert", filepath.Join(dir, "nope.crt"), goodKey, "--tls-cert: open"},
		{"missing key", goodCert, filepath.Join(dir, "nope.key"), "--tls-key: open"},
		{"cert not PEM", notPEM, goodKey, "holds no PEM certificate"},
		{"key not PEM", goodCert, notPEM, "holds no PEM private key"},
		{"swapped", goodKey, goodCert, "swapped"},
		{"key of another certificate", goodCert, otherKey, "does not belong to the certificate"},
		{"too large", big, goodKey, "larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, warns, err := keycastserver.LoadTLSCertificate(tt.cert, tt.key, now)
			if tt.want == "" {
				if err != nil || len(warns) != 0 || cert.Leaf == nil {
					t.Fatalf("err %v warnings %v", err, warns)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "keycastserver: ") {
				t.Fatalf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("expired warns", func(t *testing.T) {
		c := writeFile(t, dir, "old.crt", oldPEM)
		k := writeFile(t, dir, "old.key", keyPEM(t, old))
		_, warns, err := keycastserver.LoadTLSCertificate(c, k, now)
		if err != nil || len(warns) != 1 || !strings.Contains(warns[0], "expired") {
			t.Fatalf("err %v warnings %v, want one warning naming the expiry", err, warns)
		}
	})
}

func TestTLSOptionsValidate(t *testing.T) {
	tests := []struct {
		o    keycastserver.TLSOptions
		want string
	}{
		{keycastserver.TLSOptions{}, ""},
		{keycastserver.TLSOptions{CertFile: "c", KeyFile: "k"}, ""},
		{keycastserver.TLSOptions{SelfSigned: "127.0.0.1", CertOut: "ca.pem"}, ""},
		{keycastserver.TLSOptions{CertFile: "c"}, "go together"},
		{keycastserver.TLSOptions{KeyFile: "k"}, "go together"},
		{keycastserver.TLSOptions{SelfSigned: "localhost", CertFile: "c", KeyFile: "k"}, "not both"},
		{keycastserver.TLSOptions{CertOut: "ca.pem"}, "give --tls-self-signed"},
		{keycastserver.TLSOptions{SelfSigned: "https://x.example"}, "--tls-self-signed: host"},
	}
	for _, tt := range tests {
		err := tt.o.Validate()
		var ue *keycastserver.TLSUsageError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.o, err)
		case tt.want != "" && (err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: %v, want a usage error containing %q", tt.o, err, tt.want)
		}
	}
}

func TestParseTLSHosts(t *testing.T) {
	tests := []struct {
		in   string
		want string // joined with ",", or "error: …"
	}{
		{"127.0.0.1", "127.0.0.1"},
		{" localhost , 127.0.0.1,LOCALHOST.,", "localhost,127.0.0.1"},
		{"::1,[::1],[2001:db8::1]", "::1,2001:db8::1"},
		{"::ffff:198.18.0.1", "198.18.0.1"},
		{"keycast-1.test.example", "keycast-1.test.example"},
		{"", "error: no host given"},
		{" , ", "error: no host given"},
		{"fe80::1%eth0", "error: zone"},
		{"[127.0.0.1]", "error: brackets are for IPv6"},
		{"127.0.0.1:3000", "error: neither an IP address nor a DNS name"},
		{"https://x.example", "error: neither"},
		{"-bad.example", "error: hyphen"},
		{"a..b", "error: 1 to 63"},
		{"under_score.example", "error: not allowed in a DNS name"},
		{"bücher.example", "error: xn--"},
		{"999.1.1.1", "error: ends in a number"},
		{strings.Repeat("a", 64) + ".example", "error: 1 to 63"},
		{strings.Repeat("a,", 3000), "error: at most 4096"},
	}
	var many []string
	for i := range 65 {
		many = append(many, fmt.Sprintf("h%d.example", i))
	}
	tests = append(tests, struct{ in, want string }{strings.Join(many, ","), "error: more than 64 hosts"})
	for _, tt := range tests {
		got, err := keycastserver.ParseTLSHosts(tt.in)
		if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("ParseTLSHosts(%.40q) = %v, %v; want an error containing %q", tt.in, got, err, want)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tt.want {
			t.Errorf("ParseTLSHosts(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseTLSHosts: any input is refused with a message or gives at most 64 hosts, each of
// which parses again to itself.
func FuzzParseTLSHosts(f *testing.F) {
	for _, s := range []string{"127.0.0.1,localhost", "[::1]", "a.b.c", "x%y", "1.2.3.4.5", "::ffff:1.2.3.4", ",,,", "fe80::1%lo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := keycastserver.ParseTLSHosts(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "keycastserver: ") || len(err.Error()) > 400 {
				t.Fatalf("error %q", err)
			}
			return
		}
		if len(hosts) == 0 || len(hosts) > 64 {
			t.Fatalf("%d hosts", len(hosts))
		}
		again, err := keycastserver.ParseTLSHosts(strings.Join(hosts, ","))
		if err != nil || strings.Join(again, ",") != strings.Join(hosts, ",") {
			t.Fatalf("%q → %v → %v, %v", s, hosts, again, err)
		}
	})
}
