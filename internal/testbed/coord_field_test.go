//go:build e2e

package testbed_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/testbed"
)

// lkMetrics reads the LinkKeys server's Prometheus page from inside host h (helper mode
// http-get): the server's own counters, read by the test, not a client's copy of them.
func lkMetrics(ctx context.Context, t *testing.T, h *testbed.Host, url string) linkkeys.MetricsLine {
	t.Helper()
	out, err := helperCmd(ctx, h, "http-get", url).Output()
	if err != nil {
		t.Fatalf("reading %s from %s: %v\n%s", url, h.Name, err, out)
	}
	m, err := linkkeysload.ParsePrometheus(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("the LinkKeys server's metrics page: %v\n%s", err, out)
	}
	return m
}

// nextManifest gives the bed a fresh manifest path, so a second coordinated run in the same test
// never finds the first one's token and secret files.
func (c *coordBed) nextManifest(name string) {
	c.manifest = filepath.Join(c.dir, name+".coordination.json")
}

// finish waits for the coordinator to exit 0 and every worker to exit 0.
func (c *coordBed) finish(t *testing.T, co *testbed.Proc, workers []*testbed.Proc, d time.Duration) {
	t.Helper()
	if code := waitExit(t, co, d, "the coordinator"); code != 0 {
		t.Fatalf("coordinate exit %d\n%s", code, co.Output())
	}
	for i, w := range workers {
		if code := waitExit(t, w, 15*time.Second, "worker"); code != 0 {
			t.Errorf("worker %d exit %d\n%s", i, code, w.Output())
		}
	}
}

// TestCoordinateDDoSAcrossHosts: `loadproof coordinate --workers 3` runs LinkKeys ddos from hosts
// 3 to 5, each worker's attempts from its own source prefix, against the server on host 1. The
// merged result has exactly one attempt per source, the three segments add up to it, and the
// server's own counters (read by the test inside host 1 before and after) accepted exactly as
// many connections and completed exactly the handshakes the clients counted as allowed. Before
// that, workers given a block their hosts do not hold refuse the task and nothing reaches the server.
func TestCoordinateDDoSAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs a distributed run")
	}
	c := newCoordBed(t)
	// One attempt per source: budgets high enough that no handshake is shed, so every attempt is
	// also a completed handshake on both sides.
	for k, v := range map[string]string{"TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "1000000", "TCP_HANDSHAKE_GLOBAL_BURST": "100000"} {
		t.Setenv(k, v)
	}
	const sources = 300
	c.ipCount = sources / 3 // one attempt per source: each worker's third from its own prefix
	metricsURL := "http://" + c.srv.Host.Addr + ":9464/metrics"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ddos := []string{"linkkeys", "ddos", "--target", c.srv.Addr, "--info-file", c.srv.InfoFile,
		"--allow-host", c.srv.Host.Addr, "--server-metrics", metricsURL, "--preflight=false",
		"--sources", fmt.Sprint(sources), "--concurrency", "30"}

	// Workers given a block their hosts do not hold refuse the task before any attempt, naming
	// the addresses and the route command; the coordinator fails the run.
	c.nextManifest("unbound")
	c.workerArgs = []string{"--client-ip-base", "198.19.9.1"} // after the bed's own: the last one counts
	before := lkMetrics(ctx, t, c.srv.Host, metricsURL)
	co, workers := c.coordinate(t, append(ddos, "--json", filepath.Join(c.dir, "unbound.json"))...)
	if code := waitExit(t, co, 60*time.Second, "the coordinator"); code == 0 || !strings.Contains(co.Output(), "cannot bind source address 198.19.9.1") ||
		!strings.Contains(co.Output(), "ip route add local") {
		t.Fatalf("workers on a block they do not hold: coordinate exit %d, want a refusal naming 198.19.9.1 and the route command\n%s", code, co.Output())
	}
	for _, w := range workers {
		waitExit(t, w, 15*time.Second, "worker")
	}
	if d := lkMetrics(ctx, t, c.srv.Host, metricsURL).AcceptedConnections - before.AcceptedConnections; d != 0 {
		t.Fatalf("the refused run still reached the server: %d connections accepted", d)
	}

	c.nextManifest("ddos")
	c.workerArgs = nil
	before = lkMetrics(ctx, t, c.srv.Host, metricsURL)
	merged := filepath.Join(c.dir, "ddos.json")
	co, workers = c.coordinate(t, append(ddos, "--json", merged)...)
	c.finish(t, co, workers, 60*time.Second)
	after := lkMetrics(ctx, t, c.srv.Host, metricsURL)

	r := readLKResult(t, merged)
	a := r.Attempts
	if a == nil || a.Attempted != sources || a.Succeeded+a.Failed != sources {
		t.Fatalf("merged ddos: attempts %+v, want exactly %d\n%s", a, sources, co.Output())
	}
	if len(r.Segments) != 3 || len(r.Machines) != 3 {
		t.Errorf("merged ddos: %d segments and %d machine records, want 3 each", len(r.Segments), len(r.Machines))
	}
	if d := int64(after.AcceptedConnections - before.AcceptedConnections); d != sources {
		t.Errorf("the server accepted %d connections over the run; the workers attempted %d", d, sources)
	}
	hsAfter, ok1 := after.HandshakesCompleted()
	hsBefore, ok2 := before.HandshakesCompleted()
	if !ok1 || !ok2 {
		t.Fatalf("the server's metrics page has no completed-handshake counter")
	}
	if d := int64(hsAfter - hsBefore); d != a.Succeeded || a.Succeeded != sources {
		t.Errorf("the server completed %d handshakes; the workers counted %d allowed of %d", d, a.Succeeded, sources)
	}
	if r.Server != nil && r.Server.Delta.Accepted != sources {
		t.Errorf("the merged result's own server accounting says %d accepted, want %d", r.Server.Delta.Accepted, sources)
	}
	for _, m := range r.Machines {
		if m.Run != nil {
			t.Logf("worker host %s: %s", m.Run.Netns, m.Run.Summary())
		}
	}
	t.Logf("ddos over three hosts, each from its own prefix: %d attempts, %d allowed, server accepted %d",
		a.Attempted, a.Succeeded, after.AcceptedConnections-before.AcceptedConnections)
}

// TestCoordinateKeycastTLSAcrossHosts: the Keycast reference server on host 1 serving https with a
// given certificate (signed by a CA the test makes, as an operator's PKI would), users made by
// HTTP-mode setup over https, then `loadproof coordinate --workers 3` on host 2 with one worker on
// each of hosts 3 to 5 (each with --allow-host for the server and --task-files for the users file
// and CA): first `keycast run` of a fixed number of requests, then `keycast capacity`. The merged
// counts equal the server's /api/metrics counts exactly, and each merged result keeps three
// machine records.
func TestCoordinateKeycastTLSAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs a distributed run")
	}
	c := newHostsBed(t, "./cmd/keycast-loadtest")
	server, coordHost := c.bed.Hosts[0], c.bed.Hosts[1]
	files := filepath.Join(c.dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, cert, key := writeTestCA(t, files, server.Addr)
	srv := startKeycastTLS(t, c.bins["keycast-loadtest"], server, "3443", ca, "--tls-cert", cert, "--tls-key", key)
	c.workerArgs = []string{"--task-files", files}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	users := filepath.Join(files, "users.json")
	kcSetupHTTP(ctx, t, coordHost, c.bins["keycast-loadtest"], srv, users, 6)

	// keycast run: exactly n requests over three workers.
	const n = 301
	c.nextManifest("run")
	before := kcMetrics(ctx, t, coordHost, srv)
	merged := filepath.Join(c.dir, "run.json")
	co, workers := c.coordinate(t, "keycast", "run", "--url", srv.URL, "--ca-cert", ca, "--users-file", users,
		"--duration", "0", "--requests", fmt.Sprint(n), "--concurrency", "6", "--ramp-up", "0", "--output", merged)
	c.finish(t, co, workers, 60*time.Second)
	after := kcMetrics(ctx, t, coordHost, srv)
	r, err := keycastresult.Read(merged)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.TotalRequests != n || r.Summary.SuccessfulRequests != n {
		t.Fatalf("merged run: %d requests, %d successful, want %d of %d\n%s", r.Summary.TotalRequests, r.Summary.SuccessfulRequests, n, n, co.Output())
	}
	if d := after.HTTPRPCRequestsTotal - before.HTTPRPCRequestsTotal; d != n {
		t.Errorf("the server counted %d RPC requests; the three workers %d", d, n)
	}
	if d := after.HTTPRPCSuccess - before.HTTPRPCSuccess; d != n {
		t.Errorf("the server counted %d successful RPC requests; the three workers %d", d, n)
	}
	assertOwnStacks(t, "merged run", r.Machines)

	// keycast capacity: the six phases, each spread over the three workers.
	c.nextManifest("capacity")
	plan := writeFieldPlan(t, files, srv.URL, users, 3)
	evDir := filepath.Join(c.dir, "evidence")
	before = kcMetrics(ctx, t, coordHost, srv)
	co, workers = c.coordinate(t, "keycast", "capacity", "--plan", plan, "--ca-cert", ca, "--allow-host", server.Addr, "--output", evDir)
	c.finish(t, co, workers, 90*time.Second)
	after = kcMetrics(ctx, t, coordHost, srv)
	ev := readEvidence(t, evDir)
	total := evidenceRequests(t, ev, co.Output())
	if d := after.HTTPRPCRequestsTotal - before.HTTPRPCRequestsTotal; d != total {
		t.Errorf("the server counted %d RPC requests over the coordinated capacity run; the merged phases %d", d, total)
	}
	for _, ph := range ev.Phases {
		assertOwnStacks(t, "phase "+ph.Name, ph.Results.Machines)
	}
	t.Logf("coordinated over https: run %d requests, capacity %d over six phases; server counts equal", n, total)
}

// assertOwnStacks checks that a merged result keeps three machine records, each of a worker's own
// network namespace.
func assertOwnStacks(t *testing.T, what string, ms []machine.Record) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range ms {
		if m.Run != nil && !m.Run.SharedStack && m.Run.Netns != "" {
			seen[m.Run.Netns] = true
		}
	}
	if len(ms) != 3 || len(seen) != 3 {
		t.Errorf("%s: %d machine records over %d distinct stacks, want the 3 workers' own", what, len(ms), len(seen))
	}
}
