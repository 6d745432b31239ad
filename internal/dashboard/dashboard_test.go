package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
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
	for len(names) < want {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(names), err)
		}
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
			names = append(names, name)
		}
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
