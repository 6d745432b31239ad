//go:build e2e

package testbed_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testbed"
)

// lkServer is a LinkKeys reference server running in a host of the bed.
type lkServer struct {
	Host     *testbed.Host
	Addr     string // HOST:PORT on the bridge
	InfoFile string
	Proc     *testbed.Proc
}

// startLinkKeysServer starts the LinkKeys reference server in h, listening on h's bridge address
// at port, with extra flags, and waits for its info file. Cross-host client tests start from here:
// a server on host 1, then a client binary run in another host with the server's Addr and
// InfoFile.
func startLinkKeysServer(t *testing.T, bin string, h *testbed.Host, port string, extra ...string) *lkServer {
	t.Helper()
	dir := t.TempDir()
	s := &lkServer{Host: h, Addr: h.Addr + ":" + port, InfoFile: filepath.Join(dir, "info.json")}
	args := append([]string{"--listen", s.Addr, "--info-file", s.InfoFile, "--db-path", filepath.Join(dir, "lk.sqlite3"),
		"--duration-secs", "120"}, extra...)
	s.Proc = h.Start(t, bin, args...)
	testbed.WaitFor(t, 20*time.Second, "LinkKeys server info file", func() bool {
		select {
		case <-s.Proc.Done():
			t.Fatalf("LinkKeys server exited: %v\n%s", s.Proc.Err(), s.Proc.Output())
		default:
		}
		_, err := os.Stat(s.InfoFile)
		return err == nil
	})
	return s
}

// TestLinkKeysTLSAcrossHosts: the LinkKeys reference server in host 1 on 198.18.0.1, and a TLS
// handshake from host 2 pinned to the fingerprint of the server's info file; a wrong pin is refused.
func TestLinkKeysTLSAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs the LinkKeys server")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 2})
	bin := testbed.Build(t, "./cmd/linkkeys-server")["linkkeys-server"]
	srv := startLinkKeysServer(t, bin, bed.Hosts[0], "7443")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := helperCmd(ctx, bed.Hosts[1], "tls-dial", srv.Addr+"|"+srv.InfoFile).CombinedOutput()
	if err != nil {
		t.Fatalf("pinned TLS handshake from host 2: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "handshake ok TLS 1.3 from 198.18.0.2:") {
		t.Errorf("handshake: %s", out)
	}
	wrong := strings.Repeat("ab", 32)
	out, err = helperCmd(ctx, bed.Hosts[1], "tls-dial", srv.Addr+"|"+srv.InfoFile+"|"+wrong).CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "fingerprint") {
		t.Errorf("a wrong pin was not refused for its fingerprint: %v\n%s", err, out)
	}
}
