package profiling

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

var sink [][]byte

// heapProfile writes a heap profile of this test process (allocations it just made) to a file.
func heapProfile(t *testing.T) string {
	t.Helper()
	for i := range 2000 {
		sink = append(sink, make([]byte, 1024+i))
	}
	runtime.GC()
	path := filepath.Join(t.TempDir(), "heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestHTMLIsSelfContained(t *testing.T) {
	page, err := HTML(heapProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{"stackViewer(", "saved by loadproof", "<style"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// issue 27, finding 9: the saved page carries the report's strict policy, first in <head>.
	if !strings.Contains(s, `<head><meta http-equiv="Content-Security-Policy" content="`+FlameCSP+`">`) {
		t.Errorf("page lacks the CSP in its head: %.300s", s)
	}
	for _, need := range []string{"form-action 'none'", "base-uri 'none'", "default-src 'none'"} {
		if !strings.Contains(FlameCSP, need) || strings.Contains(FlameCSP, "connect-src") {
			t.Errorf("FlameCSP %q lacks %q or allows connections", FlameCSP, need)
		}
	}
	for _, bad := range []string{"<script src", "<link ", "@import"} {
		if strings.Contains(s, bad) {
			t.Errorf("page loads something from outside: %q", bad)
		}
	}
	if _, err := HTML(filepath.Join(t.TempDir(), "missing.pprof")); err == nil {
		t.Error("a missing profile rendered")
	}
}

func TestServeAnswersLoopbackUntilCancelled(t *testing.T) {
	path := heapProfile(t)
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", path, io.Discard, func(u string) { urls <- u }) }()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatalf("Serve returned before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("Serve did not start")
	}
	for _, p := range []string{"flamegraph", "top"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) == 0 {
			t.Errorf("GET %s%s: %d, %d bytes", base, p, resp.StatusCode, len(b))
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop when its context ended")
	}
}

func TestLoopbackAddr(t *testing.T) {
	for in, want := range map[string]string{":8080": "127.0.0.1:8080", "0.0.0.0:1": "0.0.0.0:1", "[::1]:2": "[::1]:2"} {
		if got, err := LoopbackAddr(in); err != nil || got != want {
			t.Errorf("LoopbackAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := LoopbackAddr("8080"); err == nil {
		t.Error("a bare port was accepted")
	}
}
