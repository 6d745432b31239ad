package linkkeysload

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/testwait"
)

// The worker tests re-run this test binary as a worker process.
func TestMain(m *testing.M) {
	if os.Getenv("LKLOAD_TEST_WORKER") == "1" {
		var spec, result string
		for i := 1; i+1 < len(os.Args); i++ {
			switch os.Args[i] {
			case "--spec":
				spec = os.Args[i+1]
			case "--result":
				result = os.Args[i+1]
			}
		}
		if err := RunWorker(context.Background(), spec, result, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("LKLOAD_TEST_EMFILE") != "" {
		os.Exit(emfileChild(os.Getenv("LKLOAD_TEST_EMFILE")))
	}
	os.Exit(m.Run())
}

// emfileChild runs in a child process: it lowers its open-file limit to just above what it has
// open, makes attempts against the target in the JSON argument and prints the failure reasons.
func emfileChild(targetJSON string) int {
	var target Target
	if err := json.Unmarshal([]byte(targetJSON), &target); err != nil {
		return 2
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	lim := unix.Rlimit{Cur: uint64(len(fds) + 2), Max: uint64(len(fds) + 2)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 3
	}
	var held []*tls.Conn
	d := &attemptDriver{dialer: &Dialer{Target: target, Timeout: 5 * time.Second},
		source:  func(*engine.Worker, int64) IPv4 { return mustParse("127.0.16.1") },
		success: func(_ *engine.Worker, c *tls.Conn, _ time.Duration) { held = append(held, c) }}
	run, err := engine.Execute(context.Background(), attemptConfig(d, 1, 8, nil))
	if err != nil {
		return 4
	}
	b, _ := json.Marshal(run.Causes)
	os.Stdout.Write(b)
	return 0
}

func testSources(base string, n uint32) SourceAddrs {
	return SourceAddrs{Base: mustIP(base), Count: n}
}

func TestFailureClassification(t *testing.T) {
	ok := newFakeServer(t).start()
	refusing := newFakeServer(t)
	refusing.refuse = func(int64) bool { return true }
	refusing.start()

	// A port nobody listens on.
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	closedPort := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	// A listener that never accepts and never speaks: the handshake waits until the timeout.
	silent, _ := net.Listen("tcp4", "127.0.0.1:0")
	defer silent.Close()

	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	wrongPin := ok.target
	wrongPin.Fingerprint = linkkeys.Fingerprint(otherKey.Public().(ed25519.PublicKey))

	cases := []struct {
		name    string
		target  Target
		src     string
		timeout time.Duration
		want    []string // any of
	}{
		{"success", ok.target, "127.0.9.1", 5 * time.Second, []string{"ok"}},
		{"refused port", Target{Addr: closedPort, Domain: "loadtest.local", Fingerprint: ok.target.Fingerprint}, "127.0.9.2", 5 * time.Second,
			[]string{"tcp_connect_error:ECONNREFUSED"}},
		{"closed before TLS", refusing.target, "127.0.9.3", 5 * time.Second,
			[]string{"tls_handshake_error_or_server_reject:EOF", "tls_handshake_error_or_server_reject:ECONNRESET"}},
		{"wrong fingerprint", wrongPin, "127.0.9.4", 5 * time.Second, []string{"tls_handshake_error_or_server_reject:fingerprint_mismatch"}},
		{"silent server", Target{Addr: silent.Addr().(*net.TCPAddr).AddrPort(), Domain: "x", Fingerprint: ok.target.Fingerprint}, "127.0.9.5",
			200 * time.Millisecond, []string{"attempt_timeout"}},
		{"source not on this host", ok.target, "192.0.2.1", 5 * time.Second, []string{"tcp_connect_error:EADDRNOTAVAIL"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &Dialer{Target: c.target, Timeout: c.timeout}
			conn, f := d.Dial(context.Background(), mustIP(c.src), nil)
			got := "ok"
			if f.Stage != StageNone {
				got = f.Reason()
			} else {
				local := conn.NetConn().LocalAddr().(*net.TCPAddr).AddrPort().Addr()
				if local != netip.MustParseAddr(c.src) {
					t.Errorf("bound %s, want %s", local, c.src)
				}
				closeConn(conn)
			}
			for _, w := range c.want {
				if got == w {
					return
				}
			}
			t.Fatalf("reason %q (%v), want one of %v", got, f.Err, c.want)
		})
	}
}

func TestFailureEMFILE(t *testing.T) {
	s := newFakeServer(t).start()
	tj, _ := json.Marshal(s.target)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "LKLOAD_TEST_EMFILE="+string(tj))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	var reasons map[string]int64
	if err := json.Unmarshal(out, &reasons); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if reasons["tcp_connect_error:EMFILE"] == 0 {
		t.Fatalf("no EMFILE among %v", reasons)
	}
}

func TestDetailNamesErrno(t *testing.T) {
	cases := map[string]error{
		"EMFILE":                &net.OpError{Op: "dial", Err: os.NewSyscallError("socket", syscall.EMFILE)},
		"EADDRNOTAVAIL":         &net.OpError{Op: "dial", Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)},
		"ECONNRESET":            &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		"EOF":                   errors.Join(errors.New("handshake"), errors.New("x"), os.ErrClosed, errEOFWrap),
		"fingerprint_mismatch":  &linkkeys.FingerprintMismatchError{Got: "a"},
		"other":                 errors.New("something else"),
		"alert_bad_certificate": &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")},
	}
	for want, err := range cases {
		if got := Detail(err); got != want {
			t.Errorf("Detail(%v) = %q, want %q", err, got, want)
		}
	}
	if f := classify(StageTLS, os.ErrDeadlineExceeded); f.Reason() != "attempt_timeout" {
		t.Errorf("deadline: %s", f.Reason())
	}
}

var errEOFWrap = wrapEOF{}

type wrapEOF struct{}

func (wrapEOF) Error() string { return "EOF" }
func (wrapEOF) Unwrap() error { return errEOF }

var errEOF = func() error { _, err := (&bytes.Buffer{}).ReadByte(); return err }()

func TestConnectionsHoldsAndCounts(t *testing.T) {
	s := newFakeServer(t)
	s.refuse = func(n int64) bool { return n%10 == 9 } // every tenth attempt is shed
	s.start()
	cfg := ConnectionsConfig{Target: s.target, Count: 100, Concurrency: 16, HoldSecs: 0, AttemptTimeout: 5 * time.Second,
		Sources: testSources("127.0.11.0", 8), ProgressEvery: 25}
	var out bytes.Buffer
	res, err := Connections(context.Background(), cfg, Run{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Attempts
	if a.Attempted != 100 || a.Succeeded != 90 || a.Failed != 10 || a.Classes["tls_handshake_error_or_server_reject"] != 10 {
		t.Fatalf("%+v\n%s", a, out.String())
	}
	if res.Hold.Held != 90 || a.Latency.Count() != 90 {
		t.Fatalf("held %d latency samples %d", res.Hold.Held, a.Latency.Count())
	}
	lines := strings.Split(out.String(), "\n")
	if lines[0] != "connections: target=100 concurrency=16 hold_secs=0 client_ips=8 (base 127.0.11.0)" {
		t.Fatalf("header %q", lines[0])
	}
	var progress []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  progress: ") {
			progress = append(progress, l)
		}
	}
	if len(progress) != 4 || !strings.HasPrefix(progress[3], "  progress: attempted=100 ") {
		t.Fatalf("progress lines %q", progress)
	}
	if !strings.Contains(out.String(), "connections: DONE in ") || !strings.Contains(out.String(), "requested=100 established=90 failed=10") {
		t.Fatal(out.String())
	}
}

func TestConnectionsCountsConnectionsTheServerDropped(t *testing.T) {
	// Held as bare sockets (the default) and with the whole TLS state (--keep-tls-state).
	for _, keepTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_tls=%v", keepTLS), func(t *testing.T) {
			s := newFakeServer(t)
			s.dropAfterHandshake = func(n int64) bool { return n%4 == 0 }
			s.dropped = make(chan struct{}, 100)
			s.start()
			cfg := ConnectionsConfig{Target: s.target, Count: 20, Concurrency: 4, AttemptTimeout: 5 * time.Second,
				Sources: testSources("127.0.19.0", 4), ProgressEvery: 100, KeepTLS: keepTLS}
			var kinds []string
			res, err := runConnectionsSegment(context.Background(), cfg, engine.Whole, nil, nil, func(ctx context.Context, _ *engine.Worker, held []net.Conn, _ <-chan struct{}) {
				for _, c := range held {
					kinds = append(kinds, fmt.Sprintf("%T", c))
				}
				for i := range 5 {
					select {
					case <-s.dropped:
					case <-time.After(testwait.Long):
						t.Errorf("the server dropped %d of 5 connections within %v", i, testwait.Long)
						return
					}
				}
				// The server's FIN reaches the client sockets asynchronously and nothing signals it, so
				// look again for a bounded while.
				for range 2000 {
					if countOpen(held) == 15 {
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			want := "*net.TCPConn"
			if keepTLS {
				want = "*tls.Conn"
			}
			if len(kinds) != 20 || kinds[0] != want || kinds[19] != want {
				t.Fatalf("held %v, want 20 of %s", kinds, want)
			}
			// The client completed every handshake; the server dropped five of them afterwards.
			if res.Attempts.Succeeded != 20 || res.Hold.Held != 20 || res.Hold.StillOpen != 15 {
				t.Fatalf("%+v %+v", res.Attempts, res.Hold)
			}
			// The hold was not held, and the watcher saw each of the five end (a FIN, or a reset).
			l := res.Hold.Loss
			if l == nil || l.Lost != 5 || l.Reasons["closed_by_server"]+l.Reasons["reset"] != 5 || l.First.IsZero() {
				t.Fatalf("loss %+v", l)
			}
			// The timeline counts each end as it is seen, by how, and the client's closes after the
			// hold; the held gauge ends at 0.
			ends := map[string]int64{}
			for _, iv := range res.Intervals {
				for k, v := range iv.Counters {
					ends[k] += v
				}
			}
			if ends[linkkeysresult.CounterClosedByServer]+ends[linkkeysresult.CounterClosedError] != 5 || ends[linkkeysresult.CounterClosedByClient] != 15 {
				t.Fatalf("closes in the timeline %v, want 5 by the server (or in error) and 15 by the client", ends)
			}
			if g, ok := res.Intervals[len(res.Intervals)-1].Gauges[linkkeysresult.GaugeHeld]; g != 0 || !ok {
				t.Fatalf("held gauge ends at %d (present %v), want 0", g, ok)
			}
		})
	}
}

func TestDDoSAccountsWithServerMetrics(t *testing.T) {
	s := newFakeServer(t)
	s.refuse = func(n int64) bool { return n%3 == 0 }
	s.start()
	// The fake server's METRICS log: a writer goroutine appends a line on every tick, like the
	// real server's --metrics-interval-secs loop.
	logPath := filepath.Join(t.TempDir(), "server.log")
	os.WriteFile(logPath, []byte(s.metricsLine("running")+"\n"), 0o644)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				f, _ := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString(s.metricsLine("running") + "\n")
				f.Close()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	cfg := DDoSConfig{Target: s.target, Sources: 60, Concurrency: 8, AttemptTimeout: 5 * time.Second, Base: mustIP("127.6.0.0"), ProgressEvery: 5000}
	var out bytes.Buffer
	res, err := DDoS(context.Background(), cfg, Run{Stdout: &out, Metrics: &MetricsSource{Location: logPath}, SettleWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts.Succeeded != 40 || res.Attempts.Failed != 20 {
		t.Fatalf("%+v", res.Attempts)
	}
	if res.Server == nil || res.Server.Mismatch() || res.Server.Delta.Accepted != 60 || res.Server.Delta.HandshakesCompleted != 40 {
		t.Fatalf("accounting %+v\n%s", res.Server, out.String())
	}
	if !strings.Contains(out.String(), "client vs server: attempts = server accepted_connections: 60 vs 60 ok") {
		t.Fatal(out.String())
	}
	// The METRICS log is sampled into the timeline; the engine's last sample follows the load.
	last := res.Intervals[len(res.Intervals)-1]
	if _, ok := last.Server["accepted_connections"]; !ok || res.Envelope.Totals["success"] != 40 {
		t.Fatalf("last interval %+v, totals %v", last, res.Envelope.Totals)
	}
}

func TestRequestBenchModels(t *testing.T) {
	s := newFakeServer(t).start()
	base := RequestConfig{Target: s.target, Connections: 4, DurationSecs: 1, Op: OpDomainKeys, Sources: testSources("127.0.12.0", 4), AttemptTimeout: 5 * time.Second}
	cases := []struct {
		name string
		mod  func(*RequestConfig)
	}{
		{"closed", func(*RequestConfig) {}},
		{"pipelined", func(c *RequestConfig) { c.Pipeline = 8 }},
		{"open model", func(c *RequestConfig) { c.Rate = 2000 }},
		{"open model pipelined hello", func(c *RequestConfig) { c.Rate = 2000; c.Pipeline = 4; c.Op = OpHello }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.mod(&cfg)
			var out, errOut bytes.Buffer
			res, err := RequestBench(context.Background(), cfg, Run{Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			q := res.Requests
			if q.Completed == 0 || q.Errors != 0 || q.Latency.Count() != q.Completed {
				t.Fatalf("%+v\n%s%s", q, out.String(), errOut.String())
			}
			if q.Sent != q.Completed {
				t.Fatalf("sent %d completed %d: every request must be answered", q.Sent, q.Completed)
			}
			if cfg.Rate > 0 {
				if q.Uncorrected == nil || q.Uncorrected.Count() != q.Completed {
					t.Fatal("open model needs uncorrected latency")
				}
				// The schedule's due count is known exactly: 2000/s over 1 s.
				if q.Sent+q.Unsent != 2000 {
					t.Fatalf("sent %d + unsent %d != 2000", q.Sent, q.Unsent)
				}
				// Latency from the intended time is never below latency from the actual send.
				if q.Latency.Max() < q.Uncorrected.Max() {
					t.Fatalf("corrected max %v < uncorrected max %v", q.Latency.Max(), q.Uncorrected.Max())
				}
			}
			if !strings.Contains(out.String(), "  4 persistent connections established\n") {
				t.Fatal(out.String())
			}
		})
	}
}

func TestRequestBenchCountsRateLimitedAnswers(t *testing.T) {
	s := newFakeServer(t)
	s.status = linkkeys.StatusUnavailable
	s.start()
	cfg := RequestConfig{Target: s.target, Connections: 2, DurationSecs: 1, Op: OpDomainKeys, Sources: testSources("127.0.13.0", 2),
		AttemptTimeout: 5 * time.Second, Pipeline: 2, DebugSample: true}
	var out, errOut bytes.Buffer
	res, err := RequestBench(context.Background(), cfg, Run{Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	// Without -v (DebugSample false) the DEBUG line is not printed.
	var quietErr bytes.Buffer
	quiet := cfg
	quiet.DebugSample = false
	if _, err := RequestBench(context.Background(), quiet, Run{Stdout: io.Discard, Stderr: &quietErr}); err != nil || strings.Contains(quietErr.String(), "DEBUG") {
		t.Fatalf("without DebugSample: %v, stderr %q", err, quietErr.String())
	}
	q := res.Requests
	if q.Completed != 0 || q.Errors == 0 || q.Statuses["Unavailable"] != q.Errors {
		t.Fatalf("%+v", q)
	}
	want := "  DEBUG sample non-ok response: status=Unavailable error=Some(\"Rate limited. Try again in 1 seconds\")\n"
	if errOut.String() != want {
		t.Fatalf("stderr %q, want exactly one DEBUG line %q", errOut.String(), want)
	}
	if !strings.Contains(out.String(), "  NOTE: errors include requests refused") {
		t.Fatal(out.String())
	}
}

func TestRequestBenchSetupFailureIsTheSeedError(t *testing.T) {
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	cfg := RequestConfig{Target: Target{Addr: addr, Domain: "x", Fingerprint: strings.Repeat("a", 64)}, Connections: 3, DurationSecs: 1,
		Op: OpDomainKeys, Sources: testSources("127.0.3.0", 32), AttemptTimeout: time.Second}
	_, err := RequestBench(context.Background(), cfg, Run{})
	var se *SetupError
	if !errors.As(err, &se) || err.Error() != "failed to establish request-bench connection 0: Connect" {
		t.Fatalf("%v", err)
	}
}

func TestHandshakeBenchResume(t *testing.T) {
	s := newFakeServer(t).start()
	for _, resume := range []bool{false, true} {
		cfg := HandshakeConfig{Target: s.target, DurationSecs: 1, Concurrency: 4, AttemptTimeout: 5 * time.Second,
			Sources: testSources("127.0.14.0", 4), Resume: resume}
		var out bytes.Buffer
		res, err := HandshakeBench(context.Background(), cfg, Run{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		h := res.Handshakes
		if h.Completed == 0 || h.Failed != 0 || h.Full+h.Resumed != h.Completed {
			t.Fatalf("%+v", h)
		}
		if !resume && h.Resumed != 0 {
			t.Fatalf("resumed %d without --resume", h.Resumed)
		}
		if resume && h.Resumed == 0 {
			t.Fatalf("no resumption with --resume: %+v", h)
		}
		if resume != strings.Contains(out.String(), "  resumption: full=") {
			t.Fatal(out.String())
		}
	}
}

func workerRun(t *testing.T, workers int) Run {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Run{Workers: workers, Launcher: Launcher{Executable: exe, Env: append(os.Environ(), "LKLOAD_TEST_WORKER=1")}}
}

func TestConnectionsFanOutMergesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	s := newFakeServer(t)
	s.refuse = func(n int64) bool { return n%50 == 7 }
	s.start()
	cfg := ConnectionsConfig{Target: s.target, Count: 400, Concurrency: 32, HoldSecs: 0, AttemptTimeout: 10 * time.Second,
		Sources: testSources("127.0.15.0", 16), ProgressEvery: 100}
	r := workerRun(t, 2)
	var out bytes.Buffer
	r.Stdout = &out
	res, err := Connections(context.Background(), cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	a := res.Attempts
	if a.Attempted != 400 || a.Succeeded+a.Failed != 400 || a.Failed != s.shed.Load() || a.Latency.Count() != a.Succeeded {
		t.Fatalf("%+v shed %d", a, s.shed.Load())
	}
	if res.Hold.Held != a.Succeeded || len(res.Segments) != 2 || res.Segments[0] != (engine.Segment{Index: 0, Count: 2}) {
		t.Fatalf("hold %+v segments %v", res.Hold, res.Segments)
	}
	if s.accepted.Load() != 400 {
		t.Fatalf("server saw %d attempts", s.accepted.Load())
	}
	if n := strings.Count(out.String(), "  progress: attempted="); n != 4 || !strings.Contains(out.String(), "  progress: attempted=300 ") {
		t.Fatalf("%d progress lines:\n%s", n, out.String())
	}
	// The JSON round trip keeps everything Merge needs.
	b, _ := json.Marshal(res)
	back, err := ReadResult(b)
	if err != nil || back.Attempts.Latency.Count() != a.Latency.Count() || !maps.Equal(back.Attempts.Reasons, a.Reasons) {
		t.Fatalf("round trip: %v %d/%d %v %v", err, back.Attempts.Latency.Count(), a.Latency.Count(), back.Attempts.Reasons, a.Reasons)
	}
}

func TestFanOutEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	s := newFakeServer(t).start()
	r := workerRun(t, 2)
	ctx := context.Background()
	t.Run("ddos", func(t *testing.T) {
		var out bytes.Buffer
		r := r
		r.Stdout = &out
		res, err := DDoS(ctx, DDoSConfig{Target: s.target, Sources: 50, Concurrency: 4, AttemptTimeout: 5 * time.Second, Base: mustIP("127.7.0.0"), ProgressEvery: 25}, r)
		if err != nil || res.Attempts.Succeeded != 50 || len(res.Segments) != 2 {
			t.Fatalf("%v %+v", err, res.Attempts)
		}
		if !strings.Contains(out.String(), "  progress: attempted=25 allowed=25 denied=0\n  progress: attempted=50 allowed=50 denied=0\n") {
			t.Fatal(out.String())
		}
	})
	t.Run("handshake-bench", func(t *testing.T) {
		res, err := HandshakeBench(ctx, HandshakeConfig{Target: s.target, DurationSecs: 1, Concurrency: 4, AttemptTimeout: 5 * time.Second,
			Sources: testSources("127.0.17.0", 4), Resume: true}, r)
		if err != nil || res.Handshakes.Completed == 0 || res.Handshakes.Concurrency != 4 || res.Handshakes.Resumed == 0 {
			t.Fatalf("%v %+v", err, res.Handshakes)
		}
	})
	t.Run("request-bench", func(t *testing.T) {
		var out bytes.Buffer
		r := r
		r.Stdout = &out
		res, err := RequestBench(ctx, RequestConfig{Target: s.target, Connections: 3, DurationSecs: 1, Op: OpDomainKeys,
			Sources: testSources("127.0.18.0", 3), AttemptTimeout: 5 * time.Second, Rate: 1000}, r)
		if err != nil {
			t.Fatal(err)
		}
		q := res.Requests
		// Two workers at 500/s each, phases interleaved: 1000 due in the second.
		if q.Connections != 3 || q.Completed == 0 || q.Sent+q.Unsent != 1000 || q.TargetRate != 1000 {
			t.Fatalf("%+v", q)
		}
		if !strings.Contains(out.String(), "  3 persistent connections established\n") {
			t.Fatal(out.String())
		}
	})
}

// TestConnectionsWorkersInTurn runs three workers in turn: the server sees each worker's source
// addresses (every worker has its own) in one unbroken run, every connection is held at once, and
// the ramp is the parent's, from the first turn to the last.
func TestConnectionsWorkersInTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	s := newFakeServer(t).start()
	cfg := ConnectionsConfig{Target: s.target, Count: 300, Concurrency: 16, HoldSecs: 0, AttemptTimeout: 10 * time.Second,
		Sources: testSources("127.0.16.0", 6), ProgressEvery: 100, WorkersInTurn: true}
	r := workerRun(t, 3)
	var out bytes.Buffer
	r.Stdout = &out
	began := time.Now()
	res, err := Connections(context.Background(), cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if res.Attempts.Succeeded != 300 || res.Hold.Held != 300 || len(res.Segments) != 3 {
		t.Fatalf("%+v %+v\n%s", res.Attempts, res.Hold, out.String())
	}
	if rt := time.Duration(res.Hold.RampTime); rt <= 0 || rt > took {
		t.Fatalf("ramp time %v (the run took %v)", rt, took)
	}
	s.mu.Lock()
	peers := slices.Clone(s.peers)
	s.mu.Unlock()
	worker := func(a netip.Addr) int { return int(a.As4()[3]) / 2 } // 2 addresses a worker
	runs := 1
	for i := 1; i < len(peers); i++ {
		if worker(peers[i]) != worker(peers[i-1]) {
			runs++
		}
	}
	if len(peers) != 300 || runs != 3 {
		t.Fatalf("the server saw %d connections in %d runs of one worker's sources, want 300 in 3", len(peers), runs)
	}
}
