package linkkeysserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"golang.org/x/sys/unix"
)

// The multi-process tests re-run this test binary as the children: with
// testChildEnv set, TestMain runs RunChild instead of the tests.
const testChildEnv = "LINKKEYSSERVER_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(testChildEnv) == "1" {
		os.Exit(runTestChild())
	}
	os.Exit(m.Run())
}

// eatenFiles holds the descriptors a test child opens to use up its reserve.
var eatenFiles []*os.File

func runTestChild() int {
	i, _ := strconv.Atoi(os.Getenv("LKS_CHILD_INDEX"))
	n, _ := strconv.Atoi(os.Getenv("LKS_CHILD_COUNT"))
	cfg := permissive()
	cfg.Domain = "multi.test"
	// The source-prefix test configures the children through the server's own variable, and a
	// per-source handshake burst that one of its ranges exhausts.
	if raw := os.Getenv(SourcePrefixesVar); raw != "" {
		ps, problems := ParseSourcePrefixes(raw)
		if len(problems) > 0 {
			os.Stderr.WriteString(strings.Join(problems, "\n") + "\n")
			return 1
		}
		cfg.SourcePrefixes = ps
	}
	if b, err := strconv.ParseFloat(os.Getenv("LKS_CHILD_HS_BURST"), 64); err == nil {
		cfg.Handshake.Burst, cfg.Handshake.RatePerMinute = b, 1e-3
	}
	if d, err := time.ParseDuration(os.Getenv("LKS_CHILD_IDLE")); err == nil {
		cfg.IdleTimeout = d
	}
	if m, err := strconv.ParseUint(os.Getenv("LKS_CHILD_MAXCONN"), 10, 64); err == nil {
		cfg.MaxConnections = m
	}
	// The fd-limit test gives each child a small open-file limit (soft and hard, so the child
	// cannot raise it) and reads the child's warnings on its stderr.
	if n, err := strconv.ParseUint(os.Getenv("LKS_CHILD_NOFILE"), 10, 64); err == nil {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			os.Stderr.WriteString("setting RLIMIT_NOFILE: " + err.Error() + "\n")
			return 1
		}
	}
	// "LKS_CHILD_EAT_FDS=<index>:<count>": child <index> opens count descriptors it never closes, so
	// its descriptors run out below the mark its limit gives.
	if k, c, ok := strings.Cut(os.Getenv("LKS_CHILD_EAT_FDS"), ":"); ok && k == strconv.Itoa(i) {
		count, _ := strconv.Atoi(c)
		for range count {
			f, err := os.Open(os.DevNull)
			if err != nil {
				os.Stderr.WriteString("eating descriptors: " + err.Error() + "\n")
				return 1
			}
			eatenFiles = append(eatenFiles, f) // kept: a collected *os.File closes its descriptor

		}
	}
	var logger *slog.Logger
	if os.Getenv("LKS_CHILD_LOG") == "1" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var fill Fill
	if f := os.Getenv("LKS_CHILD_FILL"); f != "" {
		var err error
		if fill, err = ParseFill(f); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 1
		}
	}
	err := RunChild(context.Background(), ChildOptions{
		Index: i, Count: n, Addr: os.Getenv("LKS_CHILD_ADDR"), Config: cfg,
		Stdin: os.Stdin, Stdout: os.Stdout, Signals: notifySignals(), Fill: fill, Logger: logger,
	})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

func startTestChildren(t *testing.T, n int, env ...string) (*Supervisor, string, string) {
	t.Helper()
	return startTestChildrenFill(t, n, FillSpread, env...)
}

func startTestChildrenFill(t *testing.T, n int, fill Fill, env ...string) (*Supervisor, string, string) {
	t.Helper()
	return startTestChildrenWith(t, testChildren{n: n, fill: fill, stderr: os.Stderr, env: env})
}

// testChildren configures startTestChildrenWith.
type testChildren struct {
	n      int
	fill   Fill
	stderr io.Writer    // the children's stderr
	logger *slog.Logger // the supervisor's
	env    []string
	// maxConn is the whole server's TCP_MAX_CONNECTIONS for the supervisor's start-up check (0: none).
	maxConn uint64
}

func startTestChildrenWith(t *testing.T, o testChildren) (*Supervisor, string, string) {
	t.Helper()
	n, fill, env := o.n, o.fill, o.env
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	res, err := ReservePort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(res.Port))
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 42
	sv, err := StartSupervisor(SupervisorOptions{
		Count: n,
		Seed:  seed,
		Command: func(i int) *exec.Cmd {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), testChildEnv+"=1", "LKS_CHILD_INDEX="+strconv.Itoa(i),
				"LKS_CHILD_COUNT="+strconv.Itoa(n), "LKS_CHILD_ADDR="+addr, "LKS_CHILD_FILL="+fill.String())
			cmd.Env = append(cmd.Env, env...)
			cmd.Stderr = o.stderr
			return cmd
		},
		ReadyTimeout:   30 * time.Second,
		Fill:           fill,
		Logger:         o.logger,
		MaxConnections: o.maxConn,
	})
	res.Release()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sv.Kill)
	fp := linkkeys.Fingerprint(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	return sv, addr, fp
}

func TestMultiProcessConnectionsLandOnEveryProcess(t *testing.T) {
	sv, addr, fp := startTestChildren(t, 2)
	cfg := linkkeys.ClientTLSConfig("multi.test", fp)
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var per []Snapshot
	for len(conns) < 64 {
		tc, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, tc)
		c := &client{t: t, tc: tc, br: newReader(tc)}
		if g := greeting(t, c.call("Hello", "hello", helloNull)); g != "Hello, world!" {
			t.Fatalf("greeting %q", g)
		}
		per, err = sv.Snapshot(false, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if per[0].EstablishedConnections > 0 && per[1].EstablishedConnections > 0 {
			break
		}
	}
	if per[0].EstablishedConnections == 0 || per[1].EstablishedConnections == 0 {
		t.Fatalf("after %d connections one process has none: %d and %d", len(conns), per[0].EstablishedConnections, per[1].EstablishedConnections)
	}
	sum := SumSnapshots(per...)
	if sum.EstablishedConnections != uint64(len(conns)) || sum.FramesProcessed != uint64(len(conns)) || sum.AcceptedConnections != uint64(len(conns)) {
		t.Errorf("summed established %d, frames %d, accepted %d; want %d each",
			sum.EstablishedConnections, sum.FramesProcessed, sum.AcceptedConnections, len(conns))
	}
	for i, s := range per {
		if s.Pending() != 0 {
			t.Errorf("process %d: accounting pending %d", i, s.Pending())
		}
	}
	// The children read one host: the sum carries its TCP counters once (the largest child's
	// reading), not once per child.
	for _, name := range linkkeys.HostTCPFields {
		f, _ := linkkeys.LookupMetricsField(name)
		v0, ok0 := f.Value(&per[0].MetricsLine)
		v1, ok1 := f.Value(&per[1].MetricsLine)
		got, ok := f.Value(&sum.MetricsLine)
		if ok != (ok0 && ok1) || ok && got != max(v0, v1) {
			t.Errorf("summed %s = %d (present %v) from children's %d (%v) and %d (%v)", name, got, ok, v0, ok0, v1, ok1)
		}
	}
	final, err := sv.Snapshot(true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range final {
		if s.Label != "final" || s.AcceptedConnections != per[i].AcceptedConnections {
			t.Errorf("process %d final line %s", i, formatLine(s))
		}
	}
	if err := sv.Wait(10 * time.Second); err != nil {
		t.Errorf("children: %v", err)
	}
}

func TestMultiProcessForwardedSignalGivesFinalLines(t *testing.T) {
	sv, _, _ := startTestChildren(t, 2)
	sv.Signal(syscall.SIGTERM)
	final, err := sv.Snapshot(true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range final {
		if s.Label != "final" {
			t.Errorf("process %d: label %q", i, s.Label)
		}
	}
	if err := sv.Wait(10 * time.Second); err != nil {
		t.Errorf("children: %v", err)
	}
}

func TestReservePortTakesNoConnections(t *testing.T) {
	res, err := ReservePort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(res.Port))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a reserved (not listening) port accepted a connection")
	}
	// A SO_REUSEPORT listener can share it; one without cannot.
	if _, _, err := Listen(context.Background(), addr, ListenOptions{}); err == nil {
		t.Error("a listener without SO_REUSEPORT took the reserved port")
	}
	ln, _, err := Listen(context.Background(), addr, ListenOptions{ReusePort: true, Backlog: 16})
	if err != nil {
		t.Fatalf("SO_REUSEPORT listener: %v", err)
	}
	ln.Close()
}

// TestSequentialFill runs three children in a sequential fill, each capped at 10 connections: new
// connections go to child 0 until it reports full, then to child 1, back to child 0 once it has
// room again, and to the kernel's spread when every child is full.
func TestSequentialFill(t *testing.T) {
	const n, perChild = 3, 10
	sv, addr, fp := startTestChildrenFill(t, n, FillSequential, "LKS_CHILD_MAXCONN="+strconv.Itoa(n*perChild))
	high, low := fillMarks(perChild, permissive().WithDefaults().ListenBacklog)
	cfg := linkkeys.ClientTLSConfig("multi.test", fp)
	var conns [n][]*tls.Conn
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				c.Close()
			}
		}
	}()
	// steered is where the supervisor should steer for the connections the test holds.
	steered := func() int {
		for i, cs := range conns {
			if int64(len(cs)) < high {
				return i
			}
		}
		return SpreadIndex
	}
	waitSteered := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for sv.Steered() != want {
			if time.Now().After(deadline) {
				t.Fatalf("steered to %d, want %d (held per child %d, %d, %d)", sv.Steered(), want, len(conns[0]), len(conns[1]), len(conns[2]))
			}
			time.Sleep(time.Millisecond)
		}
	}
	open := func(k int) {
		t.Helper()
		for range k {
			to := steered()
			tc, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := &client{t: t, tc: tc, br: newReader(tc)}
			if g := greeting(t, c.call("Hello", "hello", helloNull)); g != "Hello, world!" {
				t.Fatalf("greeting %q", g)
			}
			conns[to] = append(conns[to], tc)
			waitSteered(steered())
		}
	}
	check := func(stage string) {
		t.Helper()
		per, err := sv.Snapshot(false, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range per {
			if s.EstablishedConnections != uint64(len(conns[i])) {
				t.Errorf("%s: child %d holds %d connections, want %d", stage, i, s.EstablishedConnections, len(conns[i]))
			}
		}
	}
	open(int(2*high + 1))
	check("filling")
	if steered() != 2 {
		t.Fatalf("test arithmetic: steering to %d", steered())
	}
	sv.steerMu.Lock()
	retargets := sv.retargets
	sv.steerMu.Unlock()
	if retargets != 0 {
		t.Errorf("the parent steered %d times while the children filled in order; each full child should hand on by itself", retargets)
	}
	// Child 0 falls to its low mark: it takes new connections again.
	for int64(len(conns[0])) > low {
		conns[0][len(conns[0])-1].Close()
		conns[0] = conns[0][:len(conns[0])-1]
	}
	waitSteered(0)
	open(2)
	check("after closes")
	// Every child full: the kernel spreads.
	for steered() != SpreadIndex {
		open(1)
	}
	waitSteered(SpreadIndex)
	check("all full")
}

// TestSequentialFillWithinOpenFileLimit runs two children of a sequential fill whose open-file limit
// (700 each, soft and hard) is far below their share of TCP_MAX_CONNECTIONS (50,000 each), and
// opens more connections than one process has descriptors for: the fill must hand new connections
// on to the second process before the first runs out of descriptors, every connection must be
// served, and no child may fail an accept for EMFILE. (Before the fill weighed the open-file
// limit, child 0 took connections until accept4 failed with "too many open files", and the next
// connection waited in its listen queue until the client gave up.)
func TestSequentialFillWithinOpenFileLimit(t *testing.T) {
	const n, nofile, maxConn = 2, 700, 100000
	errw, logw := &lockedBuffer{}, &lockedBuffer{}
	sv, addr, fp := startTestChildrenWith(t, testChildren{
		n: n, fill: FillSequential, stderr: errw,
		logger: slog.New(slog.NewTextHandler(logw, nil)),
		env: []string{"LKS_CHILD_MAXCONN=" + strconv.Itoa(maxConn), "LKS_CHILD_NOFILE=" + strconv.Itoa(nofile), "LKS_CHILD_LOG=1",
			"LKS_CHILD_IDLE=5m"}, // the connections stay open for the whole test
		maxConn: maxConn,
	})
	// One process alone could hold nearly nofile connections; the test opens more than that, and
	// fewer than the two processes hold together after their reserves.
	usable := uint64(nofile - fdHeadroom)
	high, _ := fillMarks(usable, permissive().WithDefaults().ListenBacklog)
	total := nofile + 20
	if int64(total) <= 2*high || uint64(total) >= 2*usable {
		t.Fatalf("test arithmetic: %d connections for marks %d and %d usable descriptors per process", total, high, usable)
	}
	// At start the parent says the processes' descriptors hold fewer than TCP_MAX_CONNECTIONS, and
	// how many processes would fit.
	fit := (maxConn + usable - 1) / usable
	for _, want := range []string{"level=WARN", fmt.Sprintf("fewer connections than TCP_MAX_CONNECTIONS %d", maxConn),
		fmt.Sprintf("%d together", 2*usable), fmt.Sprintf("%d processes would fit", fit)} {
		if !strings.Contains(logw.String(), want) {
			t.Errorf("start-up log lacks %q:\n%s", want, logw.String())
		}
	}
	if got := sv.Nofiles(); len(got) != n || got[0] != nofile || got[1] != nofile {
		t.Errorf("children reported open-file limits %v, want %d each", got, nofile)
	}
	cfg := linkkeys.ClientTLSConfig("multi.test", fp)
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	movedAt := -1
	for len(conns) < total {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		tc := tls.Client(nc, cfg)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			nc.Close()
			per, _ := sv.Snapshot(false, 10*time.Second)
			t.Fatalf("connection %d: TLS handshake: %v (held per process: %s; children's stderr:\n%s)", len(conns), err, heldPer(per), errw.tail())
		}
		conns = append(conns, tc)
		c := &client{t: t, tc: tc, br: newReader(tc)}
		if g := greeting(t, c.call("Hello", "hello", helloNull)); g != "Hello, world!" {
			t.Fatalf("greeting %q", g)
		}
		_ = tc.SetDeadline(time.Time{})
		if movedAt < 0 && sv.Steered() != 0 {
			movedAt = len(conns)
		}
	}
	per, err := sv.Snapshot(false, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if movedAt < 0 || uint64(movedAt) > usable {
		t.Errorf("new connections moved on from process 0 after %d connections; want at most its %d usable descriptors (open-file limit %d less %d)", movedAt, usable, nofile, fdHeadroom)
	}
	var sum uint64
	for i, s := range per {
		sum += s.EstablishedConnections
		if s.EstablishedConnections > usable {
			t.Errorf("process %d holds %d connections, more than its %d usable descriptors", i, s.EstablishedConnections, usable)
		}
		if s.EstablishedConnections == 0 {
			t.Errorf("process %d holds no connection", i)
		}
	}
	if sum != uint64(total) {
		t.Errorf("the processes hold %d connections (%s), want all %d", sum, heldPer(per), total)
	}
	if got := errw.tail(); strings.Contains(got, "too many open files") {
		t.Errorf("a child failed an accept for EMFILE:\n%s", got)
	}
}

func heldPer(per []Snapshot) string {
	var b strings.Builder
	for i, s := range per {
		fmt.Fprintf(&b, "process %d: %d ", i, s.EstablishedConnections)
	}
	return strings.TrimSpace(b.String())
}

// lockedBuffer collects what several goroutines write (the children's stderr, a logger).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last 4 KiB written.
func (b *lockedBuffer) tail() string {
	s := b.String()
	return s[max(0, len(s)-4096):]
}

// TestSequentialFillMovesOnAtEMFILE: when a process runs out of descriptors below its fill mark
// (here child 0 holds 450 of its 700 descriptors open elsewhere), the accept that fails with EMFILE
// turns it full at its open count, so new connections go to the next process. The connection the
// kernel had already queued to it when it ran out waits there (at most one here, the test dialing
// one at a time), and the accept retries back off rather than spin.
func TestSequentialFillMovesOnAtEMFILE(t *testing.T) {
	const n, nofile, eaten, total = 2, 700, 450, 320
	errw := &lockedBuffer{}
	sv, addr, fp := startTestChildrenWith(t, testChildren{
		n: n, fill: FillSequential, stderr: errw,
		env: []string{"LKS_CHILD_MAXCONN=100000", "LKS_CHILD_NOFILE=" + strconv.Itoa(nofile), "LKS_CHILD_LOG=1",
			"LKS_CHILD_IDLE=5m", "LKS_CHILD_EAT_FDS=0:" + strconv.Itoa(eaten)},
	})
	high, _ := fillMarks(nofile-fdHeadroom, permissive().WithDefaults().ListenBacklog)
	if nofile-eaten >= high || total >= high+nofile-eaten {
		t.Fatalf("test arithmetic: child 0 must run out (%d descriptors) below its mark %d", nofile-eaten, high)
	}
	cfg := linkkeys.ClientTLSConfig("multi.test", fp)
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	failed := 0
	for range total {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		tc := tls.Client(nc, cfg)
		_ = tc.SetDeadline(time.Now().Add(2 * time.Second))
		if err := tc.Handshake(); err != nil {
			nc.Close()
			if failed++; failed > 2 {
				per, _ := sv.Snapshot(false, 10*time.Second)
				t.Fatalf("%d handshakes failed, the last: %v (held per process: %s; steered to %d)", failed, err, heldPer(per), sv.Steered())
			}
			continue
		}
		conns = append(conns, tc)
		// A round trip: the server counts the connection established once it has the client's Finished.
		c := &client{t: t, tc: tc, br: newReader(tc)}
		if g := greeting(t, c.call("Hello", "hello", helloNull)); g != "Hello, world!" {
			t.Fatalf("greeting %q", g)
		}
		_ = tc.SetDeadline(time.Time{})
	}
	per, err := sv.Snapshot(false, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if per[0].EstablishedConnections >= uint64(nofile-eaten) || per[1].EstablishedConnections == 0 {
		t.Errorf("held per process: %s; want process 0 below its %d free descriptors and process 1 holding the rest", heldPer(per), nofile-eaten)
	}
	if sum := per[0].EstablishedConnections + per[1].EstablishedConnections; sum != uint64(len(conns)) {
		t.Errorf("the processes hold %d connections, the client %d", sum, len(conns))
	}
	if got := strings.Count(errw.String(), "too many open files"); got == 0 || got > 20 {
		t.Errorf("%d accept failures for EMFILE logged; want some, backing off (at most 20):\n%s", got, errw.tail())
	}
}
