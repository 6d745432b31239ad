package keycastserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/textclip"
)

// TLS on the listener.
//
// ServeTLS is Serve with a TLS handshake in front of every accepted connection: the handshake
// runs in the connection's own goroutine under a deadline of HeaderTimeout (a client that opens
// a connection and sends nothing, or stalls mid-handshake, holds its slot under MaxConnections
// no longer than a client that stalls in a request head), and the resulting *tls.Conn goes to
// the fast path or net/http exactly as a plain connection would. The fast path reads and writes
// it through the tls.Conn (its raw read(2)/write(2) applies to plain TCP only). ALPN offers only
// http/1.1: both paths speak HTTP/1.1, so a client asking for h2 falls back to it.
//
// The certificate comes from PEM files (LoadTLSCertificate) or is made in memory
// (SelfSignedCertificate) for tests and demos, whose certificate the clients then trust with
// --ca-cert.

const (
	// maxTLSFileBytes caps a certificate or key file: a chain of a few certificates is some
	// kilobytes, and a larger file is a mistake (a wrong path), not a certificate.
	maxTLSFileBytes = 1 << 20
	// maxTLSHostsLen and maxTLSHosts bound a --tls-self-signed host list.
	maxTLSHostsLen = 4096
	maxTLSHosts    = 64
	// SelfSignedLifetime is how long a self-signed certificate is valid.
	SelfSignedLifetime = 30 * 24 * time.Hour
)

// TLSOptions say where the server's TLS certificate comes from; the zero value serves plain
// HTTP. They are the server command's --tls-* flags.
type TLSOptions struct {
	// CertFile and KeyFile are PEM files: the certificate (chain, leaf first) and its private key.
	CertFile, KeyFile string
	// SelfSigned, when not empty, is a comma-separated list of DNS names and IP addresses
	// (ParseTLSHosts) for which a self-signed certificate is made in memory at start.
	SelfSigned string
	// CertOut, with SelfSigned, is where the self-signed certificate is written (PEM), for the
	// clients' --ca-cert.
	CertOut string
}

// Enabled reports whether the options ask for TLS.
func (o TLSOptions) Enabled() bool { return o != (TLSOptions{}) }

// TLSUsageError is a contradictory or incomplete set of TLS options (a usage error: exit 2).
type TLSUsageError struct{ Msg string }

func (e *TLSUsageError) Error() string { return "keycastserver: " + e.Msg }

// Validate reports options that cannot work together, before any file is read.
func (o TLSOptions) Validate() error {
	switch {
	case o.SelfSigned != "" && (o.CertFile != "" || o.KeyFile != ""):
		return &TLSUsageError{"--tls-self-signed makes its own certificate; give it or --tls-cert with --tls-key, not both"}
	case (o.CertFile == "") != (o.KeyFile == ""):
		return &TLSUsageError{"--tls-cert and --tls-key go together: give the certificate file and its private key file"}
	case o.CertOut != "" && o.SelfSigned == "":
		return &TLSUsageError{"--tls-cert-out writes the certificate --tls-self-signed makes; give --tls-self-signed HOST[,HOST…] too"}
	}
	if o.SelfSigned != "" {
		if _, err := ParseTLSHosts(o.SelfSigned); err != nil {
			return &TLSUsageError{"--tls-self-signed: " + strings.TrimPrefix(err.Error(), "keycastserver: ")}
		}
	}
	return nil
}

// Load returns the server's TLS configuration (nil when the options are the zero value): it
// reads the certificate files or makes the self-signed certificate and writes it to CertOut.
// warnings are problems that do not stop the server (an expired certificate) for the caller to
// log.
func (o TLSOptions) Load(now time.Time) (conf *tls.Config, warnings []string, err error) {
	if !o.Enabled() {
		return nil, nil, nil
	}
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	var cert tls.Certificate
	if o.SelfSigned != "" {
		hosts, _ := ParseTLSHosts(o.SelfSigned)
		var certPEM []byte
		cert, certPEM, err = SelfSignedCertificate(hosts, now)
		if err != nil {
			return nil, nil, err
		}
		if o.CertOut != "" {
			if err := atomicfile.Write(o.CertOut, certPEM, 0o644); err != nil {
				return nil, nil, fmt.Errorf("keycastserver: --tls-cert-out %s: %w", o.CertOut, err)
			}
		}
	} else {
		cert, warnings, err = LoadTLSCertificate(o.CertFile, o.KeyFile, now)
		if err != nil {
			return nil, nil, err
		}
	}
	return TLSConfig(cert), warnings, nil
}

// TLSConfig is the server's TLS configuration for cert: TLS 1.2 or later, ALPN http/1.1 only.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
}

// readCapped reads a file of at most maxTLSFileBytes.
func readCapped(flag, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keycastserver: %s: %w", flag, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTLSFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("keycastserver: %s %s: %w", flag, path, err)
	}
	if len(b) > maxTLSFileBytes {
		return nil, fmt.Errorf("keycastserver: %s %s is larger than %d bytes; a PEM certificate or key is a few kilobytes (is this the right file?)", flag, path, maxTLSFileBytes)
	}
	return b, nil
}

// LoadTLSCertificate reads a PEM certificate (chain, leaf first) and its PEM private key. Errors
// say which file is wrong and how: not readable, too large, no PEM block of the kind expected,
// a certificate that does not parse, a key that does not belong to the certificate. A
// certificate outside its validity period (expired, or not yet valid at now) loads with a
// warning: clients will refuse it, but a test may mean to show that.
func LoadTLSCertificate(certFile, keyFile string, now time.Time) (tls.Certificate, []string, error) {
	certPEM, err := readCapped("--tls-cert", certFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := readCapped("--tls-key", keyFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if !hasPEMBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		hint := ""
		if hasPEMBlock(certPEM, isKeyBlock) {
			hint = " (it holds a private key: are --tls-cert and --tls-key swapped?)"
		}
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: --tls-cert %s holds no PEM certificate (want a -----BEGIN CERTIFICATE----- block)%s", certFile, hint)
	}
	if !hasPEMBlock(keyPEM, isKeyBlock) {
		hint := ""
		if hasPEMBlock(keyPEM, func(t string) bool { return t == "CERTIFICATE" }) {
			hint = " (it holds a certificate: are --tls-cert and --tls-key swapped?)"
		}
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: --tls-key %s holds no PEM private key (want a -----BEGIN PRIVATE KEY-----, EC PRIVATE KEY or RSA PRIVATE KEY block)%s", keyFile, hint)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return tls.Certificate{}, nil, fmt.Errorf("keycastserver: --tls-key %s does not belong to the certificate in --tls-cert %s (%w); give the key the certificate was issued for", keyFile, certFile, err)
		}
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: --tls-cert %s with --tls-key %s: %w", certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("keycastserver: --tls-cert %s: %w", certFile, err)
		}
		cert.Leaf = leaf
	}
	var warnings []string
	switch {
	case now.After(leaf.NotAfter):
		warnings = append(warnings, fmt.Sprintf("--tls-cert %s expired on %s; clients that verify it will refuse the connection", certFile, leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		warnings = append(warnings, fmt.Sprintf("--tls-cert %s is not valid before %s; clients that verify it will refuse the connection", certFile, leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	return cert, warnings, nil
}

func isKeyBlock(t string) bool { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }

// hasPEMBlock reports whether b holds a PEM block whose type passes want.
func hasPEMBlock(b []byte, want func(string) bool) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if want(blk.Type) {
			return true
		}
	}
}

// ParseTLSHosts reads a --tls-self-signed list: comma-separated DNS names (letters, digits and
// hyphens in dot-separated labels of at most 63 characters, 253 in all; a trailing dot is
// dropped) and IP addresses (IPv6 with or without brackets, no zone). Names are lower-cased and
// repeats dropped. The list is at most 4096 bytes and 64 hosts.
func ParseTLSHosts(s string) ([]string, error) {
	if len(s) > maxTLSHostsLen {
		return nil, fmt.Errorf("keycastserver: host list is %d bytes; at most %d", len(s), maxTLSHostsLen)
	}
	var out []string
	seen := map[string]bool{}
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		c, err := canonicalTLSHost(h)
		if err != nil {
			return nil, err
		}
		if seen[c] {
			continue
		}
		if len(out) == maxTLSHosts {
			return nil, fmt.Errorf("keycastserver: more than %d hosts in the list", maxTLSHosts)
		}
		seen[c] = true
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("keycastserver: no host given; name the DNS names and IP addresses clients connect to, e.g. 127.0.0.1,localhost")
	}
	return out, nil
}

// canonicalTLSHost is one host of ParseTLSHosts: an IP address in its canonical form, or a
// lower-cased DNS name.
func canonicalTLSHost(h string) (string, error) {
	q := fmt.Sprintf("%q", textclip.String(h, 60)) // 60 bytes: %q may write 4 characters for each
	ip := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if a, err := netip.ParseAddr(ip); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("keycastserver: host %s: an IPv6 zone cannot be in a certificate; drop the %%zone", q)
		}
		if (ip != h) && !a.Is6() {
			return "", fmt.Errorf("keycastserver: host %s: brackets are for IPv6 addresses only", q)
		}
		return a.Unmap().String(), nil
	}
	if ip != h || strings.ContainsAny(h, ":[]") {
		return "", fmt.Errorf("keycastserver: host %s is neither an IP address nor a DNS name (no port, scheme or brackets around names)", q)
	}
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if len(name) == 0 || len(name) > 253 {
		return "", fmt.Errorf("keycastserver: host %s: a DNS name is 1 to 253 characters", q)
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return "", fmt.Errorf("keycastserver: host %s: each dot-separated label is 1 to 63 characters", q)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("keycastserver: host %s: a label may not begin or end with a hyphen", q)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("keycastserver: host %s: %q is not allowed in a DNS name (letters, digits, hyphens; write a non-ASCII name in its xn-- form)", q, c)
			}
		}
	}
	if labels := strings.Split(name, "."); strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("keycastserver: host %s ends in a number but is not an IP address", q)
	}
	return name, nil
}

// SelfSignedCertificate makes an ECDSA P-256 certificate for hosts (as ParseTLSHosts returns
// them), signed by its own key and valid from an hour before now for SelfSignedLifetime. It is
// its own CA (basic constraints CA:TRUE), so a client given its PEM as --ca-cert (or any other
// TLS stack given it as a trust anchor) verifies the server with it. certPEM is the certificate
// alone; the key never leaves the process.
func SelfSignedCertificate(hosts []string, now time.Time) (cert tls.Certificate, certPEM []byte, err error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, nil, errors.New("keycastserver: a self-signed certificate needs at least one host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: making the certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0], Organization: []string{"loadproof keycast reference server (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(SelfSignedLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.AsSlice()))
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: making the self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("keycastserver: parsing the self-signed certificate: %w", err)
	}
	cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// ServeTLS is Serve for a TLS listener: every connection accepted on ln (a plain TCP listener)
// completes a TLS handshake with conf within HeaderTimeout, then is served as Serve serves a
// connection. conf's NextProtos is replaced by http/1.1 alone and its MinVersion raised to TLS
// 1.2; TLSConfig makes such a configuration from a certificate.
func (s *Server) ServeTLS(ln net.Listener, conf *tls.Config) error {
	if conf == nil || (len(conf.Certificates) == 0 && conf.GetCertificate == nil && conf.GetConfigForClient == nil) {
		return errors.New("keycastserver: ServeTLS needs a TLS configuration with a certificate (TLSConfig)")
	}
	conf = conf.Clone()
	conf.NextProtos = []string{"http/1.1"}
	conf.MinVersion = max(conf.MinVersion, tls.VersionTLS12)
	return s.serve(ln, conf)
}

// tlsMetrics counts TLS handshakes and the fast path's connections by transport.
type tlsMetrics struct {
	handshakeOK, handshakeFailed, handshakeTimeout prometheus.Counter
	fastTCP, fastTLS                               prometheus.Counter
}

func (t *tlsMetrics) register(reg *prometheus.Registry) {
	hs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keycast_http_tls_handshakes_total",
		Help: "TLS handshakes on a TLS listener by outcome: ok, failed (a protocol or certificate error, or the client closed), timeout (not done within KEYCAST_HEADER_TIMEOUT_MS)",
	}, []string{"outcome"})
	t.handshakeOK = hs.WithLabelValues("ok")
	t.handshakeFailed = hs.WithLabelValues("failed")
	t.handshakeTimeout = hs.WithLabelValues("timeout")
	fast := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keycast_http_fastpath_connections_total",
		Help: "Connections whose first request the fast path answered (POST /api/nostr without net/http), by transport: tcp or tls",
	}, []string{"transport"})
	t.fastTCP = fast.WithLabelValues("tcp")
	t.fastTLS = fast.WithLabelValues("tls")
	reg.MustRegister(hs, fast)
}

// fastConnServed counts a connection the fast path answers a request on (once per connection).
func (s *Server) fastConnServed(c net.Conn) {
	if _, ok := c.(*tls.Conn); ok {
		s.m.tls.fastTLS.Inc()
	} else {
		s.m.tls.fastTCP.Inc()
	}
}

// tlsHandshaker wraps the serve function of one listener with the TLS handshake.
type tlsHandshaker struct {
	s      *Server
	conf   *tls.Config
	next   func(net.Conn)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    rateLog // failed handshakes, at most one line per logEvery
}

// withTLS returns serve preceded by a TLS handshake, and a stop function that aborts the
// handshakes still running and waits for them (Serve calls it when the listener closes).
func (s *Server) withTLS(conf *tls.Config, serve func(net.Conn)) (func(net.Conn), func()) {
	h := &tlsHandshaker{s: s, conf: conf, next: serve}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h.serve, func() { h.cancel(); h.wg.Wait() }
}

func (h *tlsHandshaker) serve(c net.Conn) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// The handshake shares the request head's limit: a client that opens a connection and
		// stalls (mid-handshake or before it) is cut as one that stalls in a head would be.
		c.SetDeadline(time.Now().Add(h.s.cfg.HeaderTimeout))
		tc := tls.Server(c, h.conf)
		if err := tc.HandshakeContext(h.ctx); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				h.s.m.tls.handshakeTimeout.Inc()
			} else {
				h.s.m.tls.handshakeFailed.Inc()
			}
			h.log.event(h.s, "TLS handshake failed; closing the connection", "err", err, "remote", c.RemoteAddr().String())
			c.Close() // the raw connection: no close_notify on a connection that never spoke TLS
			return
		}
		h.s.m.tls.handshakeOK.Inc()
		c.SetDeadline(time.Time{})
		h.next(tc)
	}()
}
