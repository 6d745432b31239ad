package profiling

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
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
	go func() {
		done <- Serve(ctx, ServeOptions{Addr: "127.0.0.1:0", Profile: path, Log: io.Discard, Ready: func(u string) { urls <- u }})
	}()
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

// serveUI starts Serve on a free loopback port and returns the URL it printed; the server stops
// when the test ends.
func serveUI(t *testing.T, o ServeOptions) string {
	t.Helper()
	o.Addr, o.Log = "127.0.0.1:0", io.Discard
	urls := make(chan string, 1)
	o.Ready = func(u string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not stop when its context ended")
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("Serve returned before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("Serve did not start")
	}
	return ""
}

// uiGet sends a GET with the given Host header (none: the URL's) without following redirects.
func uiGet(t *testing.T, hc *http.Client, u, host string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestServeRefusesAForeignHost: pprof's pages and the raw profile download refuse a Host that is
// not this server (DNS rebinding), answer loopback names, and carry the security headers.
func TestServeRefusesAForeignHost(t *testing.T) {
	base := serveUI(t, ServeOptions{Profile: heapProfile(t)})
	u, _ := url.Parse(base)
	root := "http://" + u.Host
	hc := noRedirects(nil)
	for _, path := range []string{"/", "/ui/", "/ui/flamegraph", "/ui/top", "/ui/download"} {
		for _, host := range []string{"attacker.example", "attacker.example:" + u.Port()} {
			resp, b := uiGet(t, hc, root+path, host)
			if resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("GET %s Host %s: %s, want 421", path, host, resp.Status)
			}
			if len(b) > 400 {
				t.Errorf("GET %s Host %s: %d bytes answered", path, host, len(b))
			}
		}
		resp, _ := uiGet(t, hc, root+path, "localhost:"+u.Port())
		if resp.StatusCode >= 400 {
			t.Errorf("GET %s Host localhost: %s", path, resp.Status)
		}
	}
	resp, b := uiGet(t, hc, root+"/ui/download", "")
	if resp.StatusCode != http.StatusOK || len(b) == 0 || resp.Header.Get("Content-Disposition") == "" {
		t.Errorf("the download from loopback: %s, %d bytes", resp.Status, len(b))
	}
	for k, want := range map[string]string{
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Content-Security-Policy": UICSP,
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// TestServeToken: with a token, nothing (the download included) is served without it; the
// printed URL carries it and the cookie it sets lets the UI's own links work.
func TestServeToken(t *testing.T) {
	const token = "5be07c2a91d34f68"
	printed := serveUI(t, ServeOptions{Profile: heapProfile(t), Token: token})
	u, _ := url.Parse(printed)
	if u.Query().Get("token") != token {
		t.Fatalf("the printed URL %s lacks the token", printed)
	}
	root := "http://" + u.Host
	for _, path := range []string{"/", "/ui/flamegraph", "/ui/download", "/ui/download?token=nope"} {
		if resp, _ := uiGet(t, noRedirects(nil), root+path, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s", path, resp.Status)
		}
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, b := uiGet(t, hc, printed, "") // redirected to the flame graph, carrying the cookie
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "stackViewer(") {
		t.Fatalf("GET the printed URL: %s (%s)", resp.Status, resp.Request.URL)
	}
	if resp, b := uiGet(t, hc, root+"/ui/download", ""); resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Errorf("the download with the cookie: %s", resp.Status)
	}
}
