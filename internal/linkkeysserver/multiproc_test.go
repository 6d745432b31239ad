package linkkeysserver

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
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
	err := RunChild(context.Background(), ChildOptions{
		Index: i, Count: n, Addr: os.Getenv("LKS_CHILD_ADDR"), Config: cfg,
		Stdin: os.Stdin, Stdout: os.Stdout, Signals: notifySignals(),
	})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

func startTestChildren(t *testing.T, n int, env ...string) (*Supervisor, string, string) {
	t.Helper()
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
				"LKS_CHILD_COUNT="+strconv.Itoa(n), "LKS_CHILD_ADDR="+addr)
			cmd.Env = append(cmd.Env, env...)
			cmd.Stderr = os.Stderr
			return cmd
		},
		ReadyTimeout: 30 * time.Second,
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
