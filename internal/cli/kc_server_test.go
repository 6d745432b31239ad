package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/testwait"
)

// lineWriter collects output and signals the first complete line.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan string
	once  sync.Once
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if line, _, ok := strings.Cut(w.buf.String(), "\n"); ok {
		w.once.Do(func() { w.first <- line })
	}
	return len(p), nil
}

func TestKeycastServerCommand(t *testing.T) {
	out := &lineWriter{first: make(chan string, 1)}
	var errBuf bytes.Buffer
	env := &Env{
		Stdout: out,
		Stderr: &errBuf,
		Getenv: func(k string) string {
			if k == "KEYCAST_BCRYPT_COST" {
				return "4"
			}
			return ""
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	dir := t.TempDir()
	go func() {
		code <- Run(ctx, Keycast, []string{"server", "--addr", "127.0.0.1:0", "--data-dir", dir}, env)
	}()
	var line string
	select {
	case line = <-out.first:
	case c := <-code:
		t.Fatalf("server exited with %d before listening: %s", c, errBuf.String())
	case <-time.After(testwait.Long):
		t.Fatalf("no startup line within %v: %s", testwait.Long, errBuf.String())
	}
	m := regexp.MustCompile(`^keycast server listening on (http://127\.0\.0\.1:\d+) \(pid \d+\)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("startup line %q", line)
	}
	res, err := http.Get(m[1] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/health: %d", res.StatusCode)
	}
	cancel() // what SIGINT does
	if c := testwait.Recv(t, code, testwait.Long, "server's exit"); c != ExitOK {
		t.Fatalf("exit code %d after a graceful stop: %s", c, errBuf.String())
	}
}

func TestKeycastServerBadEnvironment(t *testing.T) {
	var outBuf, errBuf bytes.Buffer
	env := &Env{
		Stdout: &outBuf,
		Stderr: &errBuf,
		Getenv: func(k string) string {
			switch k {
			case "HANDLER_CACHE_SIZE":
				return "lots"
			case "KEYCAST_CPU_SLOTS":
				return "0"
			}
			return ""
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	c := Run(context.Background(), Keycast, []string{"server", "--data-dir", t.TempDir()}, env)
	if c != ExitUsage {
		t.Fatalf("exit %d, want %d", c, ExitUsage)
	}
	for _, v := range []string{"HANDLER_CACHE_SIZE", "KEYCAST_CPU_SLOTS"} {
		if !strings.Contains(errBuf.String(), v) {
			t.Errorf("message does not name %s: %s", v, errBuf.String())
		}
	}
	if outBuf.Len() != 0 {
		t.Errorf("printed %q on stdout before failing", outBuf.String())
	}
}

// startServerCmd runs the server command with args until the test ends and returns its base URL
// (from the startup line) and its stderr.
func startServerCmd(t *testing.T, args ...string) (string, *bytes.Buffer) {
	t.Helper()
	out := &lineWriter{first: make(chan string, 1)}
	errBuf := &bytes.Buffer{}
	env := &Env{Stdout: out, Stderr: errBuf,
		Getenv: func(k string) string {
			if k == "KEYCAST_BCRYPT_COST" {
				return "4"
			}
			return ""
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, Keycast, append([]string{"server", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...), env)
	}()
	t.Cleanup(func() {
		cancel()
		if c := testwait.Recv(t, code, testwait.Long, "server's exit after cancel"); c != ExitOK {
			t.Errorf("server exit %d: %s", c, errBuf.String())
		}
	})
	select {
	case line := <-out.first:
		m := regexp.MustCompile(`^keycast server listening on (https?://127\.0\.0\.1:\d+) \(pid \d+\)$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("startup line %q", line)
		}
		return m[1], errBuf
	case c := <-code:
		code <- c
		t.Fatalf("server exited with %d before listening: %s", c, errBuf.String())
	case <-time.After(testwait.Long):
		t.Fatalf("no startup line within %v: %s", testwait.Long, errBuf.String())
	}
	return "", nil
}

// TestKeycastServerCommandTLS: `server --tls-self-signed … --tls-cert-out` serves https, and
// setup, run (both request methods) and profile --url work against it with --ca-cert; without
// the CA the run refuses the certificate.
func TestKeycastServerCommandTLS(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	base, _ := startServerCmd(t, "--tls-self-signed", "127.0.0.1,localhost", "--tls-cert-out", ca)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base URL %s, want https", base)
	}
	users := filepath.Join(dir, "users.json")
	code, _, errs := kcRun(t, "setup", "--url", base, "--ca-cert", ca, "--mode", "http", "-n", "3", "-c", "3", "-o", users)
	if code != ExitOK {
		t.Fatalf("setup over https: exit %d\n%s", code, errs)
	}
	for _, m := range []string{"get-public-key", "sign-event"} {
		results := filepath.Join(dir, m+".json")
		code, _, errs = kcRun(t, "run", "--url", base, "--ca-cert", ca, "--users-file", users, "-d", "0", "-n", "30", "-c", "3",
			"--ramp-up", "0", "-m", m, "-o", results)
		if code != ExitOK {
			t.Fatalf("run %s over https: exit %d\n%s", m, code, errs)
		}
		r, err := keycastresult.Read(results)
		if err != nil || r.Summary.SuccessfulRequests != 30 || r.ServerMetrics == nil ||
			r.ServerMetrics.Deltas.HTTPRPCRequestsTotal != 30 || r.ServerMetrics.Deltas.HTTPRPCSuccess != 30 {
			t.Fatalf("run %s: results %+v server %+v %v", m, r.Summary, r.ServerMetrics, err)
		}
	}
	// profile --url: the test process stands in for the server's pprof endpoint (the server
	// command runs in it), as in TestKeycastProfileAgainstARunningServer.
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pp := httptest.NewServer(mux)
	defer pp.Close()
	code, _, errs = kcRun(t, "profile", "--url", base, "--ca-cert", ca, "--pprof-url", pp.URL, "--users", "2", "--concurrency", "2",
		"--duration", "1", "--output", filepath.Join(dir, "prof"))
	if code != ExitOK {
		t.Fatalf("profile --url over https: exit %d\n%s", code, errs)
	}
	code, _, errs = kcRun(t, "run", "--url", base, "--users-file", users, "-d", "0", "-n", "2", "--ramp-up", "0", "-o", filepath.Join(dir, "x.json"))
	if code != ExitCouldNotRun || !strings.Contains(errs, "certificate") {
		t.Fatalf("run without --ca-cert: exit %d\n%s", code, errs)
	}
}

func TestKeycastServerTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", junk}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert-out", filepath.Join(dir, "ca.pem")}, "give --tls-self-signed"},
		{[]string{"--tls-self-signed", "127.0.0.1:3000"}, "--tls-self-signed: host"},
		{[]string{"--tls-cert", junk, "--tls-key", junk}, "holds no PEM certificate"},
	} {
		var outBuf, errBuf bytes.Buffer
		env := &Env{Stdout: &outBuf, Stderr: &errBuf, Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)}
		c := Run(context.Background(), Keycast, append([]string{"server", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...), env)
		if c != ExitUsage || !strings.Contains(errBuf.String(), tc.want) || outBuf.Len() != 0 {
			t.Errorf("%v: exit %d stderr %q stdout %q; want exit %d naming %q", tc.args, c, errBuf.String(), outBuf.String(), ExitUsage, tc.want)
		}
	}
}
