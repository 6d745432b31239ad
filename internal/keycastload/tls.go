package keycastload

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// TLSOptions say how the clients verify an https target's certificate. The zero value verifies it
// against the system roots (SSL_CERT_FILE and SSL_CERT_DIR apply, as for any Go program).
//
// Every client of a run or a setup uses them: the fast request client of `run` (HTTP/1.1 only:
// its ALPN offer is http/1.1), the registration flow of `setup` and of the register method, and the
// server-metrics fetches (net/http: HTTP/2 when the server offers h2 by ALPN, else HTTP/1.1).
type TLSOptions struct {
	// CACertFile is a PEM file of CA certificates trusted in addition to the system roots: a
	// staging target behind a private CA.
	CACertFile string
	// InsecureSkipVerify accepts any certificate. It is refused for the production Keycast hosts
	// (capacity's refused hosts, hostrule.RefusedProductionHosts), whose certificates must be verified.
	InsecureSkipVerify bool
}

// Check reports what is wrong with the options for a target base URL: --ca-cert together with
// --insecure-skip-verify, a CA file that cannot be read or holds no certificate, or
// --insecure-skip-verify against a production host.
func (o TLSOptions) Check(rawURL string) error {
	_, err := o.load(rawURL)
	return err
}

// load checks the options and returns the pool of trusted roots (nil: the system's).
func (o TLSOptions) load(rawURL string) (*x509.CertPool, error) {
	if o.CACertFile != "" && o.InsecureSkipVerify {
		return nil, errors.New("keycastload: --ca-cert and --insecure-skip-verify contradict each other; give one")
	}
	if o.InsecureSkipVerify {
		if u, err := url.Parse(strings.TrimSpace(rawURL)); err == nil && u.Hostname() != "" {
			if host, err := hostrule.CanonicalHost(u.Hostname(), strings.HasPrefix(u.Host, "[")); err == nil && hostrule.IsRefusedHost(host, nil) {
				return nil, fmt.Errorf("keycastload: --insecure-skip-verify is refused for the production host %s: its certificate must be verified (use --ca-cert for a private CA)", host)
			}
		}
		return nil, nil
	}
	if o.CACertFile == "" {
		return nil, nil
	}
	pemBytes, err := boundedfile.Read(o.CACertFile, boundedfile.Cert)
	if err != nil {
		return nil, fmt.Errorf("keycastload: --ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("keycastload: --ca-cert %s holds no PEM certificate (want -----BEGIN CERTIFICATE----- blocks)", o.CACertFile)
	}
	return pool, nil
}

// Record is what results and evidence keep of the options (nil for the zero value).
func (o TLSOptions) Record() *keycastresult.TLS {
	if o == (TLSOptions{}) {
		return nil
	}
	rec := &keycastresult.TLS{CACert: o.CACertFile, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CACertFile != "" {
		if b, err := boundedfile.Read(o.CACertFile, boundedfile.Cert); err == nil {
			sum := sha256.Sum256(b)
			rec.CACertSHA256 = hex.EncodeToString(sum[:])
		}
	}
	return rec
}

// ClientConfig is the TLS configuration for net/http clients of rawURL (ServerName and ALPN left
// to net/http, so HTTP/2 is negotiated when offered); nil means net/http's defaults. It fails as
// Check does.
func (o TLSOptions) ClientConfig(rawURL string) (*tls.Config, error) {
	pool, err := o.load(rawURL)
	if err != nil {
		return nil, err
	}
	if pool == nil && !o.InsecureSkipVerify {
		return nil, nil
	}
	return &tls.Config{RootCAs: pool, InsecureSkipVerify: o.InsecureSkipVerify}, nil
}

// applyTLS configures the fast client's TLS for an https target.
func (t *target) applyTLS(o TLSOptions) error {
	pool, err := o.load(t.base)
	if err != nil {
		return err
	}
	if t.tls != nil {
		if pool != nil {
			t.tls.RootCAs = pool
		}
		t.tls.InsecureSkipVerify = o.InsecureSkipVerify
	}
	return nil
}

// httpTransport is a net/http transport with the options' TLS configuration, for clients that
// need one of their own.
func httpTransport(tc *tls.Config, pool int) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tc,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}

// configureTLS applies the run's TLS options to the fast client's target and returns the
// configuration of its net/http clients (registration, metrics).
func (r *runner) configureTLS() (*tls.Config, error) {
	if err := r.t.applyTLS(r.cfg.TLS); err != nil {
		return nil, err
	}
	return r.cfg.TLS.ClientConfig(r.cfg.URL)
}

// metricsClient is the run's /api/metrics client: the shared one unless the run has TLS options.
func (r *runner) metricsClient() *http.Client {
	if r.httpTLS == nil {
		return metricsClient
	}
	tr := httpTransport(r.httpTLS, 1)
	tr.DisableKeepAlives = true // two fetches per run: keep no idle connection behind
	return &http.Client{Transport: tr}
}
