// Package kctest starts a Keycast reference server on 127.0.0.1:0 for tests, in the spirit of
// net/http/httptest: a temporary data directory, SQLite by default, bcrypt cost 4, and
// shutdown when the test ends; StartTLS serves https with a self-signed certificate. Load-side packages may use it from _test.go files only.
package kctest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycastserver"
)

// Server is a running reference server.
type Server struct {
	*keycastserver.Server
	// URL is the base URL, http://127.0.0.1:<port>.
	URL string
	// Addr is the listening address.
	Addr string
	// DataDir is the temporary data directory (master.key, server.nsec, keycast.sqlite3).
	DataDir string
	// CAFile, for a server from StartTLS, is the PEM file of its self-signed certificate: the
	// clients' --ca-cert (keycastload.TLSOptions.CACertFile). Empty for Start.
	CAFile string
	// CertPool trusts the certificate in CAFile (nil for Start).
	CertPool *x509.CertPool
}

// Start runs a server with cfg (zero values as documented on keycastserver.Config, except
// that DataDir defaults to a test temporary directory and BcryptCost to 4) until the test
// ends. Logs go to t.Log when testing.Verbose().
func Start(t testing.TB, cfg keycastserver.Config) *Server {
	t.Helper()
	return start(t, cfg, false)
}

// StartTLS is Start serving https with a self-signed certificate for 127.0.0.1 and localhost
// (keycastserver.TLSOptions.SelfSigned); URL is https://127.0.0.1:<port> and CAFile the
// certificate's PEM for the clients to trust.
func StartTLS(t testing.TB, cfg keycastserver.Config) *Server {
	t.Helper()
	return start(t, cfg, true)
}

func start(t testing.TB, cfg keycastserver.Config, useTLS bool) *Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = 4
	}
	var logger *slog.Logger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := keycastserver.New(cfg, logger)
	if err != nil {
		t.Fatalf("kctest: starting the Keycast server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Shutdown(context.Background())
		t.Fatalf("kctest: listening: %v", err)
	}
	scheme, caFile := "http://", ""
	var pool *x509.CertPool
	var tlsConf *tls.Config
	if useTLS {
		caFile = filepath.Join(t.TempDir(), "keycast-ca.pem")
		conf, _, err := keycastserver.TLSOptions{SelfSigned: "127.0.0.1,localhost", CertOut: caFile}.Load(time.Now())
		if err != nil {
			ln.Close()
			srv.Shutdown(context.Background())
			t.Fatalf("kctest: TLS certificate: %v", err)
		}
		tlsConf = conf
		pool = x509.NewCertPool()
		pool.AddCert(conf.Certificates[0].Leaf)
		scheme = "https://"
	}
	done := make(chan error, 1)
	go func() {
		if tlsConf != nil {
			done <- srv.ServeTLS(ln, tlsConf)
			return
		}
		done <- srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("kctest: shutdown: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, keycastserver.ErrServerClosed) {
			t.Errorf("kctest: serve: %v", err)
		}
	})
	addr := ln.Addr().String()
	return &Server{Server: srv, URL: scheme + addr, Addr: addr, DataDir: cfg.DataDir, CAFile: caFile, CertPool: pool}
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
