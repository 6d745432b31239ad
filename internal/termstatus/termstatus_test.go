package termstatus

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// clockAt is a settable clock.
type clockAt struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clockAt) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clockAt) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuf is a bytes.Buffer safe for the ticker's writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func interval(t, secs float64, counts map[string]int64, kind string, lat ...time.Duration) *result.Interval {
	iv := &result.Interval{T: t, Secs: secs, Counts: counts}
	if kind != "" {
		h := hist.New()
		for _, d := range lat {
			h.Record(d)
		}
		iv.Latency = map[string]*hist.Histogram{kind: h}
	}
	return iv
}

// newTestLine is a Line on a buffer whose ticker never fires on its own within a test.
func newTestLine(o Options) (*Line, *syncBuf, *clockAt) {
	buf := &syncBuf{}
	c := &clockAt{t: time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)}
	o.Now, o.Every, o.Width = c.now, time.Hour, 200
	return New(buf, o), buf, c
}

func TestLineShowsRunFigures(t *testing.T) {
	l, _, c := newTestLine(Options{Label: "handshake-bench", Planned: 10 * time.Second, LatencyKinds: []string{"connect_handshake"}})
	defer l.Close()
	if got := l.Text(); got != "handshake-bench  starting…" {
		t.Fatalf("before any interval: %q", got)
	}
	// 1 s intervals: 150 successes with 18 µs latencies, 3 failures, 40 refusals (a limiter's).
	lat := make([]time.Duration, 150)
	for i := range lat {
		lat[i] = 18 * time.Microsecond
	}
	l.Interval(interval(0, 1, map[string]int64{"success": 150, "tcp_connect_error": 3, result.ClassRefused: 40}, "connect_handshake", lat...))
	c.add(1500 * time.Millisecond)
	got := l.Text()
	for _, want := range []string{"handshake-bench", "2s/10s", "150 ok/s", "p99 18.0µs", "errors 3", "refused 40"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	// A second interval with 2.5 ms latencies: the p99 over the last second is the new one's.
	l.Interval(interval(1, 1, map[string]int64{"success": 20}, "connect_handshake", 2500*time.Microsecond))
	got = l.Text()
	for _, want := range []string{"2s/10s", "20 ok/s", "p99 2.50ms", "errors 3", "refused 40"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
}

func TestLineRateCoversOneSecondOfShortIntervals(t *testing.T) {
	l, _, _ := newTestLine(Options{Label: "run", LatencyKinds: []string{"latency"}})
	defer l.Close()
	// Twenty 100 ms intervals of 10 successes each: 100 ok/s, whatever the interval length.
	for i := range 20 {
		l.Interval(interval(float64(i)/10, 0.1, map[string]int64{"success": 10}, "latency", time.Millisecond))
	}
	if got := l.Text(); !strings.Contains(got, "100 ok/s") || !strings.Contains(got, "p99 1.00ms") {
		t.Fatalf("line %q: want 100 ok/s and p99 1.00ms", got)
	}
	if n := len(l.s.recent); n != 10 {
		t.Fatalf("kept %d recent intervals, want the 10 that make one second", n)
	}
}

func TestLineAttemptsAndHoldCountdown(t *testing.T) {
	l, _, c := newTestLine(Options{Label: "connections", Count: 3000})
	defer l.Close()
	a := l.Attempts()
	a.Update(1200, 1190, 10)
	c.add(3 * time.Second)
	got := l.Text()
	for _, want := range []string{"connections", "3s", "1,200/3,000 attempts", "errors 10", "refused 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	a.Close() // the attempts end; the line stays for the hold
	l.Hold(2990, c.now().Add(12*time.Second))
	if got, want := l.Text(), "connections  holding 2,990 connections: 12s left"; got != want {
		t.Fatalf("hold: %q, want %q", got, want)
	}
	c.add(11*time.Second + 600*time.Millisecond)
	if got := l.Text(); !strings.HasSuffix(got, ": 0s left") {
		t.Fatalf("hold near its end: %q", got)
	}
	c.add(5 * time.Second)
	if got := l.Text(); !strings.HasSuffix(got, ": 0s left") {
		t.Fatalf("hold past its end: %q", got)
	}
}

func TestLinePartsRestartTheClock(t *testing.T) {
	l, _, c := newTestLine(Options{Parts: []Part{{"phase 1/2 ramp", 30 * time.Second}, {"phase 2/2 spike", 10 * time.Second}}})
	defer l.Close()
	l.Interval(interval(0, 1, map[string]int64{"success": 5, "rate-limited": 2}, ""))
	c.add(time.Second)
	l.Interval(interval(1, 1, map[string]int64{"success": 5}, ""))
	if got := l.Text(); !strings.HasPrefix(got, "phase 1/2 ramp  2s/30s") || !strings.Contains(got, "refused 2") {
		t.Fatalf("first phase: %q", got)
	}
	c.add(5 * time.Second)
	l.Interval(interval(0, 1, map[string]int64{"success": 7}, ""))
	got := l.Text()
	if !strings.HasPrefix(got, "phase 2/2 spike  1s/10s") || !strings.Contains(got, "7.0 ok/s") || !strings.Contains(got, "refused 0") {
		t.Fatalf("second phase: %q", got)
	}
}

func TestRedrawOnlyOnChangeAndClear(t *testing.T) {
	l, buf, c := newTestLine(Options{Label: "run", Planned: time.Minute})
	l.Interval(interval(0, 1, map[string]int64{"success": 1}, ""))
	l.Redraw()
	l.Redraw() // same text: nothing drawn
	if n := l.Redraws(); n != 1 {
		t.Fatalf("%d redraws of one text, want 1", n)
	}
	c.add(time.Second)
	l.Redraw()
	if n := l.Redraws(); n != 2 {
		t.Fatalf("%d redraws after the clock moved, want 2", n)
	}
	l.Close()
	out := buf.String()
	if !strings.HasPrefix(out, "\rrun  1s/1:00") || !strings.HasSuffix(out, clearLine) {
		t.Fatalf("terminal output %q: want a CR-drawn line and a clear at the end", out)
	}
	if strings.Contains(out, "\n") {
		t.Fatalf("the status line wrote a newline: %q", out)
	}
	l.Close() // twice is fine
}

func TestWriterClearsTheLineFirst(t *testing.T) {
	l, buf, _ := newTestLine(Options{Label: "run"})
	defer l.Close()
	l.Interval(interval(0, 1, map[string]int64{"success": 1}, ""))
	l.Redraw()
	w := l.Writer(buf)
	io := "  progress: attempted=5000 success=5000 failed=0\n"
	w.Write([]byte(io))
	out := buf.String()
	if !strings.HasSuffix(out, clearLine+io) {
		t.Fatalf("output %q: the line is not cleared before the write", out)
	}
	// A write that leaves the cursor mid-line holds the redraw until the line ends.
	w.Write([]byte("partial"))
	l.Redraw()
	if strings.HasSuffix(buf.String(), "\x1b[K") {
		t.Fatalf("redrawn over a partial line: %q", buf.String())
	}
	w.Write([]byte(" end\n"))
	l.Interval(interval(1, 1, map[string]int64{"success": 1}, ""))
	l.Redraw()
	if !strings.HasSuffix(buf.String(), "\x1b[K") {
		t.Fatalf("not redrawn after the line ended: %q", buf.String())
	}
}

// TestLineStaysAwayAfterTheLastOutput: output written after the last figures (a summary) is not
// followed by the line again until new figures come, but a running hold keeps counting down.
func TestLineStaysAwayAfterTheLastOutput(t *testing.T) {
	l, buf, c := newTestLine(Options{Label: "run"})
	defer l.Close()
	l.Interval(interval(0, 1, map[string]int64{"success": 1}, ""))
	l.Redraw()
	w := l.Writer(buf)
	summary := "run: DONE\n"
	w.Write([]byte(summary))
	c.add(time.Second)
	l.Redraw()
	if !strings.HasSuffix(buf.String(), summary) {
		t.Fatalf("the line came back below the output with no new figures: %q", buf.String())
	}
	l.Hold(5, c.now().Add(3*time.Second))
	w.Write([]byte("level=INFO msg=holding\n"))
	c.add(time.Second)
	l.Redraw()
	if !strings.HasSuffix(buf.String(), "run  holding 5 connections: 2s left\x1b[K") {
		t.Fatalf("the hold countdown stopped after a log line: %q", buf.String())
	}
	c.add(3 * time.Second)
	w.Write([]byte("connections: DONE\n"))
	l.Redraw()
	if !strings.HasSuffix(buf.String(), "connections: DONE\n") {
		t.Fatalf("redrawn after the hold ended and the summary printed: %q", buf.String())
	}
}

func TestHandlerClearsTheLineFirst(t *testing.T) {
	l, buf, _ := newTestLine(Options{Label: "run"})
	defer l.Close()
	l.Interval(interval(0, 1, map[string]int64{"success": 1}, ""))
	l.Redraw()
	log := slog.New(l.Handler(slog.NewTextHandler(buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))).With("cmd", "x")
	log.Info("holding", "held", 3)
	if out := buf.String(); !strings.HasSuffix(out, clearLine+"level=INFO msg=holding cmd=x held=3\n") {
		t.Fatalf("output %q: the line is not cleared before the log record", out)
	}
}

func TestTickerRedrawsAtMostEvery(t *testing.T) {
	buf := &syncBuf{}
	start := time.Now()
	l := New(buf, Options{Label: "run", Every: 20 * time.Millisecond, Width: 100})
	deadline := time.After(5 * time.Second)
	for l.Redraws() == 0 {
		select {
		case <-deadline:
			t.Fatal("the ticker drew nothing within 5 s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	l.Close()
	// One text ("run  starting…"): however long it ran, it was drawn once.
	if n := l.Redraws(); n != 1 {
		t.Fatalf("%d redraws of an unchanging line after %v, want 1", n, time.Since(start))
	}
}

func TestEnabled(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	var buf bytes.Buffer
	if Enabled(&buf, nil) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Enabled(f, nil) {
		t.Error("a regular file is not a terminal")
	}
	l, _, _ := newTestLine(Options{})
	defer l.Close()
	if IsTerminal(l.Writer(&buf)) || IsTerminal(l.Writer(f)) {
		t.Error("a Writer over a non-terminal is not a terminal")
	}
	// On a real terminal (the e2e tests run the commands under one) DisableEnv and TERM=dumb turn it
	// off; here the order of the checks is what can be seen.
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no controlling terminal: the terminal cases run in the e2e tests")
	}
	defer tty.Close()
	if !Enabled(tty, env()) || Enabled(tty, env(DisableEnv, "1")) || Enabled(tty, env("TERM", "dumb")) || !Enabled(tty, env(DisableEnv, "0")) {
		t.Error("a terminal: on by default, off with " + DisableEnv + "=1 or TERM=dumb, on with " + DisableEnv + "=0")
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {59 * time.Second, "59s"}, {61 * time.Second, "1:01"}, {3723 * time.Second, "1:02:03"}} {
		if got := clock(c.d); got != c.want {
			t.Errorf("clock(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-4500, "-4,500"}} {
		if got := hist.CountText(c.n); got != c.want {
			t.Errorf("CountText(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := clip("p99 18.0µs and more", 10); got != "p99 18.0µs" {
		t.Errorf("clip: %q", got)
	}
}

// TestLineMovesServerRefusalsOffErrors: handshakes the server's limiter shed reach the client as
// failed attempts; their increase in the server's counters since the baseline shows as refused.
func TestLineMovesServerRefusalsOffErrors(t *testing.T) {
	l, _, _ := newTestLine(Options{Label: "connections", Count: 60, RefusalCounters: []string{"shed_handshake_per_source", "shed_handshake_global"}})
	defer l.Close()
	l.ServerBaseline(map[string]float64{"shed_handshake_per_source": 1000, "shed_handshake_global": 7})
	a := l.Attempts()
	a.Update(60, 20, 40)
	iv := interval(0, 0.1, map[string]int64{"success": 20, "tls": 40}, "")
	iv.Server = map[string]float64{"shed_handshake_per_source": 1038, "shed_handshake_global": 7, "open_connections": 20}
	l.Interval(iv)
	got := l.Text()
	if !strings.Contains(got, "errors 2 ") || !strings.HasSuffix(got, "refused 38") {
		t.Fatalf("line %q: want errors 2 and refused 38 (38 shed since the baseline, of 40 failed)", got)
	}
	// A later sample without the counters takes nothing back.
	l.Interval(interval(0.1, 0.1, nil, ""))
	if got := l.Text(); !strings.HasSuffix(got, "refused 38") {
		t.Fatalf("after a sample without counters: %q", got)
	}
}

// TestLineFirstSampleIsTheBaselineWithoutOne: without a reading before the run the first sample is
// the baseline, so counters left from earlier runs are never shown as this run's.
func TestLineFirstSampleIsTheBaselineWithoutOne(t *testing.T) {
	l, _, _ := newTestLine(Options{Label: "handshake-bench", RefusalCounters: []string{"shed_handshake_per_source"}})
	defer l.Close()
	iv := interval(0, 1, map[string]int64{"success": 5, "tls": 10}, "")
	iv.Server = map[string]float64{"shed_handshake_per_source": 240000}
	l.Interval(iv)
	if got := l.Text(); !strings.Contains(got, "errors 10") || !strings.HasSuffix(got, "refused 0") {
		t.Fatalf("first sample: %q", got)
	}
	iv = interval(1, 1, map[string]int64{"success": 5, "tls": 10}, "")
	iv.Server = map[string]float64{"shed_handshake_per_source": 240009}
	l.Interval(iv)
	if got := l.Text(); !strings.Contains(got, "errors 11") || !strings.HasSuffix(got, "refused 9") {
		t.Fatalf("second sample: %q", got)
	}
}

// TestLineServerCountersBelowBaseline: a counter below its baseline (a restarted server, or samples
// already relative to the run) counts from zero; one first seen later counts from its first value.
func TestLineServerCountersBelowBaseline(t *testing.T) {
	l, _, _ := newTestLine(Options{Label: "ddos", RefusalCounters: []string{"shed_a", "shed_b"}})
	defer l.Close()
	l.ServerBaseline(map[string]float64{"shed_a": 500})
	a := l.Attempts()
	a.Update(100, 10, 90)
	iv := interval(0, 1, map[string]int64{"success": 10, "tls": 90}, "")
	iv.Server = map[string]float64{"shed_a": 30, "shed_b": 1000}
	l.Interval(iv)
	iv = interval(1, 1, nil, "")
	iv.Server = map[string]float64{"shed_a": 40, "shed_b": 1020}
	l.Interval(iv)
	if got := l.Text(); !strings.Contains(got, "errors 30 ") || !strings.HasSuffix(got, "refused 60") {
		t.Fatalf("line %q: want refused 60 (40 from zero, 20 since first seen) and errors 30", got)
	}
}
