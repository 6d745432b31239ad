// Package kctest starts a Keycast reference server on 127.0.0.1:0 for tests, in the spirit of
// net/http/httptest: a temporary data directory, SQLite by default, bcrypt cost 4, and
// shutdown when the test ends. Load-side packages may use it from _test.go files only.
package kctest

import (
	"context"
	"errors"
	"log/slog"
	"net"
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
}

// Start runs a server with cfg (zero values as documented on keycastserver.Config, except
// that DataDir defaults to a test temporary directory and BcryptCost to 4) until the test
// ends. Logs go to t.Log when testing.Verbose().
func Start(t testing.TB, cfg keycastserver.Config) *Server {
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
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
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
	return &Server{Server: srv, URL: "http://" + addr, Addr: addr, DataDir: cfg.DataDir}
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
