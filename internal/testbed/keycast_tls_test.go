//go:build e2e

package testbed_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/testbed"
)

// kcServer is a Keycast reference server serving https in a host of the bed.
type kcServer struct {
	Host *testbed.Host
	URL  string // https://HOST:PORT on the bridge
	CA   string // PEM file the clients trust with --ca-cert
	Dir  string // the server's --data-dir
	Proc *testbed.Proc
}

// startKeycastTLS starts the Keycast reference server in h on h's bridge address at port, serving
// https with tlsArgs (--tls-self-signed … or --tls-cert/--tls-key), and waits for its listening line.
func startKeycastTLS(t *testing.T, bin string, h *testbed.Host, port, ca string, tlsArgs ...string) *kcServer {
	t.Helper()
	s := &kcServer{Host: h, URL: "https://" + h.Addr + ":" + port, CA: ca, Dir: t.TempDir()}
	s.Proc = h.Start(t, bin, append([]string{"server", "--addr", h.Addr + ":" + port, "--data-dir", s.Dir}, tlsArgs...)...)
	testbed.WaitFor(t, 20*time.Second, "keycast server listening on "+s.URL, func() bool {
		select {
		case <-s.Proc.Done():
			t.Fatalf("the Keycast server exited: %v\n%s", s.Proc.Err(), s.Proc.Output())
		default:
		}
		return strings.Contains(s.Proc.Output(), "listening on "+s.URL)
	})
	return s
}

// kcMetrics reads the Keycast server's /api/metrics from inside host h (helper mode http-get,
// trusting the server's CA), so the test has the server's own counters, not a client's copy.
func kcMetrics(ctx context.Context, t *testing.T, h *testbed.Host, s *kcServer) keycastresult.ServerMetrics {
	t.Helper()
	out, err := helperCmd(ctx, h, "http-get", s.URL+"/api/metrics|"+s.CA).Output()
	if err != nil {
		t.Fatalf("reading the Keycast server's /api/metrics from %s: %v\n%s", h.Name, err, out)
	}
	m, _, err := keycastload.ParseMetrics(out)
	if err != nil {
		t.Fatalf("the Keycast server's /api/metrics: %v\n%s", err, out)
	}
	return m
}

// writeTestCA makes a CA and a server certificate it signs for ip, and writes ca.pem, cert.pem and
// key.pem in dir: a "given" certificate, as an operator's own PKI would issue.
func writeTestCA(t *testing.T, dir, ip string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "loadproof field test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// kcSetupHTTP runs HTTP-mode `setup` over https from h: the OAuth flow registers users through the
// server itself, with an https redirect URI on the server's own host.
func kcSetupHTTP(ctx context.Context, t *testing.T, h *testbed.Host, bin string, s *kcServer, users string, n int) {
	t.Helper()
	out, err := h.Run(ctx, bin, "setup", "--mode", "http", "--url", s.URL, "--ca-cert", s.CA,
		"--users", fmt.Sprint(n), "--concurrency", "4", "--output", users)
	if err != nil {
		t.Fatalf("HTTP-mode setup over https from %s: %v\n%s", h.Name, err, out)
	}
	uf, err := keycast.ReadUsersFile(users)
	if err != nil {
		t.Fatal(err)
	}
	if len(uf.Users) != n {
		t.Fatalf("setup wrote %d users, want %d\n%s", len(uf.Users), n, out)
	}
}

// writeFieldPlan writes a capacity plan of the six phases against target, each a couple of
// seconds of get-public-key, and returns its path.
func writeFieldPlan(t *testing.T, dir, target, users string, concurrency int) string {
	t.Helper()
	p, err := capacity.ReadPlan("../../docs/capacity-plan.example.json")
	if err != nil {
		t.Fatal(err)
	}
	p.TargetURL, p.UsersFile = target, users
	p.EnvironmentParity = "loadproof field test: the reference server and its clients in separate network namespaces of one machine."
	for i := range p.Phases {
		ph := &p.Phases[i]
		ph.DurationSeconds, ph.RampUpSeconds, ph.Concurrency = 1, 0, concurrency
		ph.Method = keycast.MethodGetPublicKey
		ph.IntentionalShedding = nil
		// Latency across namespaces on a shared box says nothing about a deployment: the test
		// judges the counts, not the SLO, so only error rates may fail a phase.
		ph.MaxLatencyP95Ms = 60_000
	}
	p.Objectives.LatencyP95Ms = 60_000
	p.StopConditions.MaxLatencyP95Ms = 60_000
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readEvidence reads a capacity bundle's evidence and verifies the bundle against its manifest.
func readEvidence(t *testing.T, dir string) *capacity.Evidence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, capacity.EvidenceFile))
	if err != nil {
		t.Fatalf("no evidence: %v", err)
	}
	ev, err := capacity.ReadEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := capacity.VerifyBundle(dir); err != nil {
		t.Errorf("bundle: %v", err)
	}
	return ev
}

// evidenceRequests sums the phases' requests and checks that each phase ran to its end with every
// request successful.
func evidenceRequests(t *testing.T, ev *capacity.Evidence, out string) uint64 {
	t.Helper()
	if ev.StopReason != "" || len(ev.Phases) != 6 {
		t.Fatalf("evidence: stop %q after %d phases, want all 6\n%s", ev.StopReason, len(ev.Phases), out)
	}
	var total uint64
	for _, ph := range ev.Phases {
		r := ph.Results
		if r == nil || r.Summary.TotalRequests == 0 || r.Summary.SuccessfulRequests != r.Summary.TotalRequests || r.Summary.ConnectFailures != 0 {
			t.Fatalf("phase %s: %+v, want every request of at least one successful\n%s", ph.Name, r, out)
		}
		total += r.Summary.TotalRequests
	}
	return total
}

// TestKeycastTLSAcrossHosts: the Keycast reference server in host 1 serving https on 198.18.0.1
// with its own (self-signed) certificate, the clients in host 2 trusting it with --ca-cert.
// HTTP-mode setup registers users through the OAuth flow with an https redirect URI (the same
// setup against the plain-HTTP server is refused for its http redirect URI); `run` and `capacity`
// (which needs --allow-host for the host) complete every request, and the server's /api/metrics
// counts exactly the requests the clients made.
func TestKeycastTLSAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs the Keycast server and clients")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 2})
	bin := testbed.Build(t, "./cmd/keycast-loadtest")["keycast-loadtest"]
	server, client := bed.Hosts[0], bed.Hosts[1]
	dir := t.TempDir()
	ca := filepath.Join(dir, "server-ca.pem")
	srv := startKeycastTLS(t, bin, server, "3443", ca, "--tls-self-signed", server.Addr, "--tls-cert-out", ca)
	plain := server.Start(t, bin, "server", "--addr", server.Addr+":3000", "--data-dir", t.TempDir())
	testbed.WaitFor(t, 20*time.Second, "the plain-HTTP keycast server", func() bool {
		return strings.Contains(plain.Output(), "listening on http://"+server.Addr+":3000")
	})

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	// Off localhost, HTTP-mode setup needs https: over plain HTTP the server's OAuth rule refuses
	// the http redirect URI.
	out, err := client.Run(ctx, bin, "setup", "--mode", "http", "--url", "http://"+server.Addr+":3000", "--users", "1",
		"--output", filepath.Join(dir, "plain-users.json"))
	if err == nil || !strings.Contains(string(out), "https") {
		t.Fatalf("HTTP-mode setup over plain HTTP from another host: %v, want the https refusal\n%s", err, out)
	}
	// Without the server's CA the certificate is refused.
	out, err = client.Run(ctx, bin, "setup", "--mode", "http", "--url", srv.URL, "--users", "1", "--output", filepath.Join(dir, "noca.json"))
	if err == nil || !strings.Contains(string(out), "certificate") {
		t.Fatalf("setup over https without --ca-cert: %v, want a certificate error\n%s", err, out)
	}

	users := filepath.Join(dir, "users.json")
	kcSetupHTTP(ctx, t, client, bin, srv, users, 6)

	// run: a fixed number of requests, all counted by the server.
	before := kcMetrics(ctx, t, client, srv)
	const n = 120
	results := filepath.Join(dir, "run.json")
	out, err = client.Run(ctx, bin, "run", "--url", srv.URL, "--ca-cert", srv.CA, "--users-file", users, "--duration", "0",
		"--requests", fmt.Sprint(n), "--concurrency", "4", "--ramp-up", "0", "--output", results)
	if err != nil {
		t.Fatalf("run over https from host 2: %v\n%s", err, out)
	}
	r, err := keycastresult.Read(results)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.TotalRequests != n || r.Summary.SuccessfulRequests != n {
		t.Fatalf("run: %d requests, %d successful, want %d of %d\n%s", r.Summary.TotalRequests, r.Summary.SuccessfulRequests, n, n, out)
	}
	after := kcMetrics(ctx, t, client, srv)
	if d := after.HTTPRPCRequestsTotal - before.HTTPRPCRequestsTotal; d != n {
		t.Errorf("the server counted %d RPC requests over the run, the client %d", d, n)
	}
	if d := after.HTTPRPCSuccess - before.HTTPRPCSuccess; d != n {
		t.Errorf("the server counted %d successful RPC requests, the client %d", d, n)
	}
	if r.Machines[0].Run == nil || r.Machines[0].Run.SharedStack {
		t.Errorf("the client's counters should be its own host's stack: %+v", r.Machines[0].Run)
	}

	// capacity: refused without --allow-host, then the six phases over https.
	plan := writeFieldPlan(t, dir, srv.URL, users, 3)
	out, err = client.Run(ctx, bin, "capacity", "--plan", plan, "--ca-cert", srv.CA, "--output", filepath.Join(dir, "refused"))
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--allow-host") {
		t.Fatalf("capacity against %s without --allow-host: exit %d, want 2 naming --allow-host\n%s", server.Addr, code, out)
	}
	before = kcMetrics(ctx, t, client, srv)
	evDir := filepath.Join(dir, "evidence")
	out, err = client.Run(ctx, bin, "capacity", "--plan", plan, "--ca-cert", srv.CA, "--allow-host", server.Addr, "--output", evDir)
	if code := exitCode(err); code != 0 {
		t.Fatalf("capacity over https: exit %d, want 0\n%s", code, out)
	}
	total := evidenceRequests(t, readEvidence(t, evDir), string(out))
	after = kcMetrics(ctx, t, client, srv)
	if d := after.HTTPRPCRequestsTotal - before.HTTPRPCRequestsTotal; d != total {
		t.Errorf("the server counted %d RPC requests over the capacity run, the six phases %d", d, total)
	}
	t.Logf("https across the bridge: run %d requests, capacity %d over six phases, server counts equal", n, total)
}

// exitCode is the exit status in a Host.Run error (0 for none, -1 when it is not an exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
