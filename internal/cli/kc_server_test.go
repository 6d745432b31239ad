package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
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
	if c := <-code; c != ExitOK {
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
