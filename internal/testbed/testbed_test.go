//go:build e2e

package testbed_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/testbed"
)

// helperCmd runs this test binary as a helper program (TestMain) inside host h.
func helperCmd(ctx context.Context, h *testbed.Host, mode, arg string) *exec.Cmd {
	cmd := h.Command(ctx, "env", "LP_TESTBED_HELPER="+mode, os.Args[0], arg)
	return cmd
}

// TestHostsOnBridge: three hosts reach each other over the bridge, a host's routed source prefix
// is usable as the source of a connection to another host, the tbf limit is in place, and the
// root namespace holds none of it.
func TestHostsOnBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 3, SourcePrefixes: map[int]string{2: "198.19.2.0/24"}, Rate: "200mbit"})
	h1, h2 := bed.Hosts[0], bed.Hosts[1]
	if h1.Addr != "198.18.0.1" || h2.Addr != "198.18.0.2" || !strings.HasPrefix(h1.Name, "lp-") {
		t.Fatalf("hosts %+v %+v", h1, h2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	srv := h1.Start(t, "env", "LP_TESTBED_HELPER=echo-remote", os.Args[0], h1.Addr+":7000")
	testbed.WaitFor(t, 10*time.Second, "echo server listening", func() bool { return strings.Contains(srv.Output(), "listening") })

	out, err := helperCmd(ctx, h2, "dial-from", "198.19.2.77>198.18.0.1:7000").CombinedOutput()
	if err != nil {
		t.Fatalf("dial from the source prefix: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "198.19.2.77:") {
		t.Errorf("server saw %q, want a connection from 198.19.2.77", out)
	}
	out, err = helperCmd(ctx, bed.Hosts[2], "dial-from", "198.18.0.3>198.18.0.1:7000").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "198.18.0.3:") {
		t.Errorf("host 3 to host 1: %v %q", err, out)
	}

	q, err := exec.Command("tc", "-n", h1.Name, "qdisc", "show", "dev", h1.Link).CombinedOutput()
	if err != nil || !strings.Contains(string(q), "tbf") || !strings.Contains(string(q), "200Mbit") {
		t.Errorf("tbf on %s: %v %s", h1.Name, err, q)
	}
	root, err := exec.Command("ip", "-o", "addr").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(root), "198.18.") || strings.Contains(string(root), "198.19.") {
		t.Errorf("the root namespace holds a test-bed address:\n%s", root)
	}
	links, _ := exec.Command("ip", "-o", "link").CombinedOutput()
	if strings.Contains(string(links), bed.Prefix) {
		t.Errorf("the root namespace holds a link of the bed:\n%s", links)
	}
}

// TestListenOverflowsCounted: in a host of its own (so no other socket moves its counters), a
// listener that never accepts and a burst of connects raise ListenOverflows, the kernel reading
// sees them, and the verdict marks the run generator-limited (overflows on the client's own stack).
func TestListenOverflowsCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := helperCmd(ctx, bed.Hosts[0], "overflow", "64").Output()
	if err != nil {
		t.Fatalf("overflow helper: %v\n%s", err, out)
	}
	var rs machine.RunStats
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	t.Logf("in %s: %s", bed.Hosts[0].Name, rs.Summary())
	if rs.ListenOverflows == 0 {
		t.Fatalf("64 connects to a never-accepting listener with backlog 0 counted no listen overflow: %+v", rs)
	}
	if !rs.GeneratorLimited {
		t.Errorf("overflows on the generator's own stack not judged generator-limited: %+v", rs)
	}
}
