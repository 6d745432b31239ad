package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
)

// TestLinkKeysClientsFailLoudly: a dead server, a wrong fingerprint and a port that does not speak
// TLS each fail a client before its run, within the preflight's 2 s, naming the likely cause; none
// runs thousands of identical failures and exits 0.
func TestLinkKeysClientsFailLoudly(t *testing.T) {
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	// A closed port: listen, note the port, close.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A plain HTTP port.
	hl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go hs.Serve(hl)
	defer hs.Close()
	httpPort := hl.Addr().(*net.TCPAddr).Port

	dir := t.TempDir()
	write := func(name string, port int, fp string) string {
		p := filepath.Join(dir, name)
		if err := linkkeys.WriteInfo(p, linkkeys.Info{Port: uint16(port), Domain: ts.Domain, Fingerprint: fp, PID: 1}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		info, want string
	}{
		{write("dead.json", dead, ts.Fingerprint), "nothing listens on 127.0.0.1:"},
		{write("fp.json", int(ts.Port), strings.Repeat("ab", 32)), "the info file is stale"},
		{write("http.json", httpPort, ts.Fingerprint), "does not speak TLS"},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{
			{"connections", "--count", "200", "--hold", "5s"},
			{"handshake-bench", "--duration", "5s"},
			{"request-bench", "--duration", "5", "--connections", "2"},
		} {
			env, out, errOut := lkTestEnv()
			start := time.Now()
			code := Run(context.Background(), LinkKeys, append(cmd, "--info-file", c.info), env)
			took := time.Since(start)
			if code != ExitFailure || !strings.Contains(errOut.String(), c.want) || !strings.Contains(errOut.String(), "before the run") {
				t.Errorf("%v against %s: exit %d, stderr %q; want exit %d naming %q", cmd, filepath.Base(c.info), code, errOut.String(), ExitFailure, c.want)
			}
			if took > 3*time.Second {
				t.Errorf("%v against %s: took %v to fail; want about the 2 s preflight at most", cmd, filepath.Base(c.info), took)
			}
			if out.Len() != 0 {
				t.Errorf("%v: printed a run's output although it never ran: %q", cmd, out.String())
			}
		}
	}
}

// TestLinkKeysNothingSucceededExitsNoSuccess: a run whose every attempt the server's limiter turns
// away (the preflight took the one token of the only source address) exits 4, naming the causes.
func TestLinkKeysNothingSucceededExitsNoSuccess(t *testing.T) {
	lim := map[string]string{"TCP_HANDSHAKE_BURST": "1", "TCP_HANDSHAKE_RATE_PER_MINUTE": "1",
		"TCP_HANDSHAKE_GLOBAL_BURST": "1000000"}
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return lim[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	info := filepath.Join(t.TempDir(), "info.json")
	if err := linkkeys.WriteInfo(info, ts.Info()); err != nil {
		t.Fatal(err)
	}
	env, out, errOut := lkTestEnv()
	code := Run(context.Background(), LinkKeys, []string{"connections", "--count", "20", "--concurrency", "4", "--hold-secs", "0",
		"--client-ip-count", "1", "--info-file", info}, env)
	if code != ExitNoSuccess || !strings.Contains(errOut.String(), "not one of 20 operations succeeded") {
		t.Fatalf("exit %d (want %d)\nstdout %s\nstderr %s", code, ExitNoSuccess, out, errOut)
	}
}

// TestDurationFlagsTakeBothForms: every duration flag takes 10 and 10s; the seed's --duration-secs
// and --hold-secs have --duration and --hold aliases.
func TestDurationFlagsTakeBothForms(t *testing.T) {
	for _, args := range [][]string{
		{"handshake-bench", "--duration-secs", "3s"}, {"handshake-bench", "--duration", "3"},
		{"request-bench", "--duration", "3s"}, {"connections", "--hold", "3s"}, {"connections", "--hold-secs", "3"},
	} {
		cmd := NewRoot(LinkKeys, &Env{})
		sub, rest, err := cmd.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		name := strings.TrimPrefix(args[1], "--")
		if got := sub.Flags().Lookup(name).Value.String(); got != "3" {
			t.Errorf("%v: value %s, want 3 (seconds)", args, got)
		}
	}
	cmd := NewRoot(Keycast, &Env{})
	sub, rest, err := cmd.Find([]string{"run", "--duration", "10s", "--timeout", "5"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if d, tm := sub.Flags().Lookup("duration").Value.String(), sub.Flags().Lookup("timeout").Value.String(); d != "10" || tm != "5s" {
		t.Errorf("keycast run --duration 10s --timeout 5: %s, %s", d, tm)
	}
	_ = fmt.Sprint()
}
