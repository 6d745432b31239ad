package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/testwait"
)

func interval(t float64, n int64) *result.Interval {
	h := hist.New()
	for i := range n {
		h.RecordMicros(100 + i)
	}
	return &result.Interval{T: t, Secs: 1, Counts: map[string]int64{"success": n}, Latency: map[string]*hist.Histogram{"latency": h}}
}

// readEvents reads server-sent events until it has want of them.
func readEvents(t *testing.T, r *bufio.Reader, want int) []string {
	t.Helper()
	var names []string
	var err error
	// The stream has no read deadline: the wait is bounded here instead.
	testwait.Call(t, testwait.Long, fmt.Sprintf("%d server-sent events", want), func() {
		for len(names) < want && err == nil {
			var line string
			if line, err = r.ReadString('\n'); err != nil {
				return
			}
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
				names = append(names, name)
			}
		}
	})
	if err != nil {
		t.Fatalf("after %d events: %v", len(names), err)
	}
	return names
}

func TestDashboardStreamsReplaysAndFinishes(t *testing.T) {
	d, err := Start(Options{Addr: "127.0.0.1:0", Title: "t", Harness: "keycast", Command: "run", Target: "http://x"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s", d.URL())
	}
	d.Interval(interval(0, 10))
	d.Interval(interval(1, 20))

	resp, err := http.Get(d.URL())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `"mode":"live"`) || !strings.Contains(string(page), `"events":"/events"`) {
		t.Fatal("the page is not the live report page")
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, d.URL(), nil)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %v %v", m, resp.Status, err)
		}
	}
	if resp, _ := http.Get(d.URL() + "report.html"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("report.html before the end: %s", resp.Status)
	}

	ev, err := http.Get(strings.TrimSuffix(d.URL(), "/") + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	br := bufio.NewReader(ev.Body)
	// A late page gets the intervals so far, then the live ones, then a new part after a reset.
	if got := readEvents(t, br, 2); strings.Join(got, ",") != "row,row" {
		t.Fatalf("replay: %v", got)
	}
	d.Interval(interval(2, 30))
	d.Interval(interval(0, 5)) // a new part (phase): counts from zero again
	if got := readEvents(t, br, 2); strings.Join(got, ",") != "row,row" {
		t.Fatalf("live: %v", got)
	}
	if err := d.Finish(&report.Model{Title: "final", Mode: "single"}); err != nil {
		t.Fatal(err)
	}
	if got := readEvents(t, br, 1); got[0] != "final" {
		t.Fatalf("end: %v", got)
	}
	if resp, _ := http.Get(d.URL() + "report.html"); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Disposition") == "" {
		t.Errorf("report.html after the end: %s", resp.Status)
	}
	ev.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(d.URL()); err == nil {
		t.Error("the dashboard still answers after Close")
	}
}

func TestLoopbackUnlessAHostIsGiven(t *testing.T) {
	for in, want := range map[string]string{":0": "127.0.0.1:0", "127.0.0.1:9": "127.0.0.1:9", "0.0.0.0:9": "0.0.0.0:9"} {
		if got, err := LoopbackAddr(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := Start(Options{Addr: "nonsense"}); err == nil {
		t.Error("a bad address started a dashboard")
	}
}

// get sends a GET with the given Host header and returns the status, the headers and the start
// of the body; an event stream is closed once its headers arrive.
func get(t *testing.T, hc *http.Client, url, host string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
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
	var body []byte
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
	}
	return resp.StatusCode, resp.Header, string(body)
}

func start(t *testing.T, o Options) *Dashboard {
	t.Helper()
	o.Addr, o.Title, o.Harness, o.Command = "127.0.0.1:0", "t", "keycast", "run"
	d, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	return d
}

// TestDashboardRefusesAForeignHost: a page on another origin that re-points its name at loopback
// (DNS rebinding) sends its own name as Host; the page, the event stream and the final report
// refuse it, and loopback names are served.
func TestDashboardRefusesAForeignHost(t *testing.T) {
	d := start(t, Options{})
	d.Interval(interval(0, 10))
	if err := d.Finish(&report.Model{Title: "final", Mode: "single"}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(d.URL(), "/"), "http://"), ":")
	base := strings.TrimSuffix(d.URL(), "/")
	for _, path := range []string{"/", EventsPath, "/report.html"} {
		for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1.attacker.example:" + port} {
			code, _, body := get(t, http.DefaultClient, base+path, host)
			if code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s Host %s: %d, want 421", path, host, code)
			}
			if strings.Contains(body, "lp-data") || strings.Contains(body, "event:") {
				t.Errorf("GET %s Host %s: the answer holds the report", path, host)
			}
		}
		for _, host := range []string{"", "localhost:" + port, "[::1]:" + port} {
			if code, _, _ := get(t, http.DefaultClient, base+path, host); code != http.StatusOK {
				t.Errorf("GET %s Host %q: %d, want 200", path, host, code)
			}
		}
	}
}

func TestDashboardSecurityHeaders(t *testing.T) {
	d := start(t, Options{})
	for _, path := range []string{"/", EventsPath, "/report.html"} {
		_, h, _ := get(t, http.DefaultClient, strings.TrimSuffix(d.URL(), "/")+path, "")
		for k, want := range map[string]string{
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": report.PageCSP + "; frame-ancestors 'none'",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
}

// TestDashboardToken: with a token, nothing is served without it; the URL printed at start
// carries it, and the cookie that first load sets lets the page read its event stream.
func TestDashboardToken(t *testing.T) {
	const token = "9f2c4e1b7a3d5f60"
	d := start(t, Options{Token: token})
	base := strings.TrimSuffix(d.URL(), "/")
	for _, path := range []string{"/", EventsPath, "/report.html", "/?token=wrong"} {
		if code, _, body := get(t, http.DefaultClient, base+path, ""); code != http.StatusUnauthorized || strings.Contains(body, "lp-data") {
			t.Errorf("GET %s without the token: %d", path, code)
		}
	}
	if !strings.Contains(d.TokenURL(), "token="+token) || strings.Contains(d.URL(), token) {
		t.Fatalf("URL %s, TokenURL %s", d.URL(), d.TokenURL())
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if code, _, body := get(t, hc, d.TokenURL(), ""); code != http.StatusOK || !strings.Contains(body, "<!DOCTYPE html>") {
		t.Fatalf("GET the token URL: %d", code)
	}
	if code, _, _ := get(t, hc, base+EventsPath, ""); code != http.StatusOK {
		t.Errorf("GET %s with the cookie: %d", EventsPath, code)
	}
	if code, _, _ := get(t, hc, base+"/", "attacker.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host with the cookie: %d", code)
	}
}

// TestDashboardCapsEventStreams: beyond MaxClients open streams a page gets 503 with a message;
// once one closes, a new one is served.
func TestDashboardCapsEventStreams(t *testing.T) {
	d := start(t, Options{MaxClients: 2})
	events := strings.TrimSuffix(d.URL(), "/") + EventsPath
	var open []*http.Response
	for range 2 {
		resp, err := http.Get(events)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", len(open), resp.Status)
		}
		open = append(open, resp)
	}
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	code, h, body := get(t, http.DefaultClient, events, "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "2 pages are already following") || h.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d %q", code, body)
	}
	// The page itself is not capped.
	if code, _, _ := get(t, http.DefaultClient, d.URL(), ""); code != http.StatusOK {
		t.Errorf("the page while the streams are full: %d", code)
	}
	open[0].Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		n := d.clients
		d.mu.Unlock()
		if n < 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream was still counted after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(events)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after one closed: %s", resp.Status)
	}
	if _, err := Start(Options{Addr: "127.0.0.1:0", MaxClients: -1}); err == nil {
		t.Error("a negative MaxClients started a dashboard")
	}
}

// TestDashboardPlanAndLinger: the page carries the planned length and the target rate; bad ones
// are refused; after the run, Linger keeps the final report served until its time is up or its
// context ends.
func TestDashboardPlanAndLinger(t *testing.T) {
	for _, o := range []Options{{Planned: -time.Second}, {TargetRate: -1}} {
		o.Addr = "127.0.0.1:0"
		if d, err := Start(o); err == nil {
			d.Close(context.Background())
			t.Errorf("Start(%+v) accepted a negative plan", o)
		}
	}
	d := start(t, Options{Addr: "127.0.0.1:0", Title: "t", Harness: "keycast", Command: "run", Planned: 90 * time.Second, TargetRate: 250})
	m, err := report.PageModel(must(t, d.page))
	if err != nil {
		t.Fatal(err)
	}
	if m.Live == nil || m.Live.PlannedSecs != 90 || m.Live.TargetRate != 250 {
		t.Fatalf("live view %+v: want planned 90 s, target 250/s", m.Live)
	}
	d.Interval(interval(0, 10))
	if err := d.Finish(&report.Model{Title: "final", Mode: "single"}); err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(d.URL(), "/")
	lingered := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { d.Linger(ctx, time.Hour); close(lingered) }()
	// While it lingers, a page opened now still gets the final report.
	if code, _, body := get(t, http.DefaultClient, base+"/report.html", ""); code != http.StatusOK || !strings.Contains(body, "<title>final</title>") {
		t.Errorf("while lingering: /report.html %d", code)
	}
	select {
	case <-lingered:
		t.Fatal("Linger returned before its time or its context ended")
	default:
	}
	cancel()
	select {
	case <-lingered:
	case <-time.After(10 * time.Second):
		t.Fatal("Linger did not return when its context ended")
	}
	done := make(chan struct{})
	go func() { d.Linger(context.Background(), 10*time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Linger did not return when its time was up")
	}
	d.Linger(context.Background(), 0) // returns at once
}

func must(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) == 0 {
		t.Fatal("empty page")
	}
	return b
}
