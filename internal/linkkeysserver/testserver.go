package linkkeysserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// TestServer is a Server listening on 127.0.0.1 with a fresh self-signed
// Ed25519 certificate, for tests of this package and of clients (from
// _test.go files only, by the dependency rules). It is started by
// NewTestServer and stopped by Close.
type TestServer struct {
	*Server
	// Addr is the listener's "127.0.0.1:port".
	Addr string
	// Port is the listener's port.
	Port uint16
	// Domain is the certificate's name and get-domain-keys' domain.
	Domain string
	// Fingerprint is the pin of the certificate key.
	Fingerprint string
	// Key is the certificate's private key.
	Key ed25519.PrivateKey

	ln      net.Listener
	serveCh chan error
}

// TestServerOptions configures NewTestServer. Zero values: the default
// Config, no key source (empty lists), a discarding logger, the system
// clock, domain "loadtest.local", a random key, port 0.
type TestServerOptions struct {
	Config Config
	Keys   KeySource
	Logger *slog.Logger
	Clock  admit.Clock
	Key    ed25519.PrivateKey
	// Addr is the listen address (default "127.0.0.1:0").
	Addr string
}

// NewTestServer starts a server; Close stops it.
func NewTestServer(opt TestServerOptions) (*TestServer, error) {
	key := opt.Key
	if key == nil {
		var err error
		if _, key, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, err
		}
	}
	cfg := opt.Config
	if cfg.Domain == "" {
		cfg.Domain = "loadtest.local"
	}
	cert, err := linkkeys.SelfSignedCert(cfg.Domain, key, time.Time{}, time.Time{})
	if err != nil {
		return nil, err
	}
	addr := opt.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, _, err := Listen(context.Background(), addr, ListenOptions{Backlog: cfg.WithDefaults().ListenBacklog})
	if err != nil {
		return nil, err
	}
	ts := &TestServer{
		Server: &Server{Config: cfg, TLSConfig: linkkeys.ServerTLSConfig(cert), Keys: opt.Keys,
			Logger: opt.Logger, Clock: opt.Clock},
		Addr:        ln.Addr().String(),
		Port:        uint16(ln.Addr().(*net.TCPAddr).Port),
		Domain:      cfg.Domain,
		Fingerprint: linkkeys.Fingerprint(key.Public().(ed25519.PublicKey)),
		Key:         key,
		ln:          ln,
		serveCh:     make(chan error, 1),
	}
	if err := ts.Server.init(); err != nil {
		ln.Close()
		return nil, err
	}
	go func() { ts.serveCh <- ts.Server.Serve(ln) }()
	return ts, nil
}

// ClientTLSConfig returns a client configuration pinning the server's
// fingerprint.
func (ts *TestServer) ClientTLSConfig() *tls.Config {
	return linkkeys.ClientTLSConfig(ts.Domain, ts.Fingerprint)
}

// Info returns the server's info-file contents.
func (ts *TestServer) Info() linkkeys.Info {
	return linkkeys.Info{Port: ts.Port, Domain: ts.Domain, Fingerprint: ts.Fingerprint}
}

// Close shuts the server down (a 5-second graceful Shutdown, then Close)
// and returns Serve's error unless it is ErrServerClosed.
func (ts *TestServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.Server.Shutdown(ctx); err != nil {
		ts.Server.Close()
	}
	if err := <-ts.serveCh; err != nil && !errors.Is(err, ErrServerClosed) {
		return err
	}
	return nil
}
