//go:build e2e

package testbed_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/testbed"
)

// TestKeycastAcrossHosts: the Keycast reference server in host 1 on 198.18.0.1, users made in DB
// mode (HTTP-mode setup needs the https redirect rule, which plain HTTP off localhost refuses), and
// a bounded `keycast-loadtest run` from host 2. Every request succeeds, the server's own
// /api/metrics count (read by the client before and after) equals the client's, and the client's
// machine record carries its host's kernel counters, judged as another stack's.
func TestKeycastAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs the Keycast server and client")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 2})
	bin := testbed.Build(t, "./cmd/keycast-loadtest")["keycast-loadtest"]
	server, client := bed.Hosts[0], bed.Hosts[1]
	dir := t.TempDir()
	url := "http://" + server.Addr + ":3000"

	srv := server.Start(t, bin, "server", "--addr", server.Addr+":3000", "--data-dir", dir)
	testbed.WaitFor(t, 20*time.Second, "keycast server listening", func() bool {
		return strings.Contains(srv.Output(), "listening on "+url)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	users := filepath.Join(dir, "users.json")
	if _, err := client.Run(ctx, bin, "setup", "--mode", "db", "--database-url", filepath.Join(dir, "keycast.sqlite3"),
		"--master-key-path", filepath.Join(dir, "master.key"), "--url", url, "--users", "8", "--output", users); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "results.json")
	out, err := client.Run(ctx, bin, "run", "--url", url, "--users-file", users, "--duration", "3", "--ramp-up", "0",
		"--concurrency", "4", "--report-interval", "1", "--output", results)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	var r keycastresult.Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	if s.TotalRequests == 0 || s.SuccessfulRequests != s.TotalRequests {
		t.Fatalf("across hosts: %d requests, %d successful, want all of at least one\n%s", s.TotalRequests, s.SuccessfulRequests, out)
	}
	if r.ServerMetrics == nil || r.ServerMetrics.Deltas == nil {
		t.Fatalf("no server metrics read across the bridge\n%s", out)
	}
	if got := r.ServerMetrics.Deltas.HTTPRPCRequestsTotal; got != s.TotalRequests {
		t.Errorf("server counted %d RPC requests, client %d", got, s.TotalRequests)
	}
	if r.Envelope == nil || len(r.Machines) != 1 || r.Machines[0].Run == nil {
		t.Fatalf("the client's machine record has no run counters\n%s", out)
	}
	run := r.Machines[0].Run
	rootNS, _ := os.Readlink("/proc/self/ns/net")
	if run.SharedStack || run.Netns == "" || run.Netns == rootNS {
		t.Errorf("client counters should be host 2's own stack, not shared: %+v (root %s)", run, rootNS)
	}
	if !strings.Contains(string(out), "host 1 (") {
		t.Errorf("the text summary lacks the per-host counters line:\n%s", out)
	}
	t.Logf("%d requests across the bridge; client host: %s", s.TotalRequests, run.Summary())
}
