//go:build e2e

package testbed_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testbed"
)

// coordBed is a distributed run laid over hosts: host 1 the LinkKeys server, host 2 the
// coordinator with its embedded NATS on 198.18.0.2:4222, hosts 3 to 5 one worker each with its own
// source prefix 198.19.N.0/24.
type coordBed struct {
	bed      *testbed.Bed
	bin      string
	bins     map[string]string
	srv      *lkServer
	dir      string
	manifest string
	// allowHost is the server host every worker authorizes (host 1's address).
	allowHost string
	// workerArgs are more flags for every worker (--task-files for a Keycast run).
	workerArgs []string
	// ipCount is each worker's --client-ip-count from its own prefix (32 unless set).
	ipCount int
}

// newHostsBed makes the five hosts and builds loadproof and the extra binaries; no server runs yet.
func newHostsBed(t *testing.T, extra ...string) *coordBed {
	t.Helper()
	bed := testbed.New(t, testbed.Options{Hosts: 5, SourcePrefixes: map[int]string{
		3: "198.19.3.0/24", 4: "198.19.4.0/24", 5: "198.19.5.0/24"}})
	bins := testbed.Build(t, append([]string{"./cmd/loadproof"}, extra...)...)
	c := &coordBed{bed: bed, bin: bins["loadproof"], bins: bins, dir: t.TempDir(), allowHost: bed.Hosts[0].Addr}
	c.manifest = filepath.Join(c.dir, "run.coordination.json")
	return c
}

// newCoordBed is newHostsBed with the LinkKeys reference server on host 1 (metrics on :9464).
func newCoordBed(t *testing.T) *coordBed {
	t.Helper()
	c := newHostsBed(t, "./cmd/linkkeys-server")
	c.srv = startLinkKeysServer(t, c.bins["linkkeys-server"], c.bed.Hosts[0], "7443", "--metrics-addr", c.bed.Hosts[0].Addr+":9464")
	return c
}

// coordinate starts the coordinator on host 2 with the client command args, then the three
// workers once the token and secret files exist; it returns the coordinator and the workers.
func (c *coordBed) coordinate(t *testing.T, args ...string) (*testbed.Proc, []*testbed.Proc) {
	t.Helper()
	coordHost := c.bed.Hosts[1]
	co := coordHost.Start(t, c.bin, append([]string{"coordinate", "--workers", "3", "--listen", coordHost.Addr + ":4222",
		"--manifest", c.manifest, "--join-timeout", "30s", "--"}, args...)...)
	token, secret := c.manifest+".nats-token", c.manifest+".secret"
	testbed.WaitFor(t, 20*time.Second, "the coordinator's token and secret files", func() bool {
		select {
		case <-co.Done():
			t.Fatalf("the coordinator exited before the workers joined: %v\n%s", co.Err(), co.Output())
		default:
		}
		_, e1 := os.Stat(token)
		_, e2 := os.Stat(secret)
		return e1 == nil && e2 == nil
	})
	var workers []*testbed.Proc
	for i, h := range c.bed.Hosts[2:] {
		workers = append(workers, h.Start(t, c.bin, append([]string{"worker", "--nats", "nats://" + coordHost.Addr + ":4222",
			"--nats-token-file", token, "--secret-file", secret, "--index", fmt.Sprint(i),
			"--allow-host", c.allowHost, "--client-ip-base", h.SourcePrefix[:strings.LastIndexByte(h.SourcePrefix, '.')] + ".1",
			"--client-ip-count", fmt.Sprint(cmp.Or(c.ipCount, 32)), "--name", h.Name, "--join-timeout", "30s"}, c.workerArgs...)...))
	}
	return co, workers
}

// waitExit waits for p to exit within d and returns its exit code.
func waitExit(t *testing.T, p *testbed.Proc, d time.Duration, what string) int {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s\n%s", what, d, p.Output())
	}
	if p.Cmd.ProcessState == nil {
		t.Fatalf("%s: no exit state: %v", what, p.Err())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// TestCoordinateLinkKeysAcrossHosts: `loadproof coordinate --workers 3` with its embedded NATS on
// host 2's bridge address, three workers on hosts 3 to 5, each taking its sources from its own
// prefix, against the LinkKeys server on host 1. The merged result holds the whole count, equal to
// the sum of the segments, and the server accounted exactly the attempts, from the three prefixes.
func TestCoordinateLinkKeysAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs a distributed run")
	}
	c := newCoordBed(t)
	const count = 301
	merged := filepath.Join(c.dir, "merged.json")
	co, workers := c.coordinate(t, "linkkeys", "connections", "--target", c.srv.Addr, "--info-file", c.srv.InfoFile,
		"--allow-host", c.srv.Host.Addr, "--server-metrics", "http://"+c.srv.Host.Addr+":9464/metrics",
		"--count", fmt.Sprint(count), "--concurrency", "30", "--hold-secs", "1", "--json", merged)
	if code := waitExit(t, co, 60*time.Second, "the coordinator"); code != 0 {
		t.Fatalf("coordinate exit %d\n%s", code, co.Output())
	}
	for i, w := range workers {
		if code := waitExit(t, w, 10*time.Second, "worker"); code != 0 {
			t.Errorf("worker %d exit %d\n%s", i, code, w.Output())
		}
	}
	r := readLKResult(t, merged)
	if r.Hold == nil || r.Hold.Held != count || r.Attempts == nil || r.Attempts.Succeeded != count {
		t.Fatalf("merged: hold %+v attempts %+v, want %d held\n%s", r.Hold, r.Attempts, count, co.Output())
	}
	if r.Server == nil || r.Server.Delta.Accepted != count || r.Server.Delta.HandshakesCompleted != count {
		t.Errorf("server accounting %+v, want %d accepted and completed", r.Server, count)
	}
	// One machine record per worker, each its own host's stack.
	seen := map[string]bool{}
	for _, m := range r.Machines {
		if m.Run != nil && !m.Run.SharedStack {
			seen[m.Run.Netns] = true
		}
	}
	if len(r.Machines) != 3 || len(seen) != 3 {
		t.Errorf("merged result: %d machine records over %d distinct stacks, want 3 workers' own", len(r.Machines), len(seen))
	}
	t.Logf("coordinator:\n%s", co.Output())
}

// TestCoordinateWorkerKilledAcrossHosts: the worker on host 5 is killed (SIGKILL, by its PID) while
// its segment holds its connections; the coordinator names the lost worker, aborts the others and
// exits 4, never 0, and its manifest records the loss.
func TestCoordinateWorkerKilledAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs a distributed run")
	}
	c := newCoordBed(t)
	merged := filepath.Join(c.dir, "merged.json")
	co, workers := c.coordinate(t, "linkkeys", "connections", "--target", c.srv.Addr, "--info-file", c.srv.InfoFile,
		"--allow-host", c.srv.Host.Addr, "--count", "90", "--concurrency", "30", "--hold-secs", "20", "--json", merged)
	testbed.WaitFor(t, 30*time.Second, "the hold", func() bool { return strings.Contains(co.Output(), "all workers ready; holding") })
	victim := workers[2]
	if err := victim.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, co, 15*time.Second, "the coordinator after a worker was killed")
	if code != 4 {
		t.Fatalf("coordinate exit %d after a worker was killed, want 4\n%s", code, co.Output())
	}
	out := co.Output()
	name := c.bed.Hosts[4].Name
	if !strings.Contains(out, name) || !strings.Contains(out, "lost") {
		t.Errorf("the coordinator's output does not name the lost worker %s:\n%s", name, out)
	}
	m, err := os.ReadFile(c.manifest)
	if err != nil {
		t.Fatalf("no coordination manifest after the loss: %v", err)
	}
	if !strings.Contains(string(m), name) || !strings.Contains(string(m), `"lost_worker"`) {
		t.Errorf("the manifest does not record the lost worker %s:\n%s", name, m)
	}
	for i, w := range workers[:2] {
		waitExit(t, w, 10*time.Second, fmt.Sprintf("surviving worker %d", i))
	}
	// A LinkKeys run that loses a worker writes no merged file (docs/distributed.md: the client's
	// fan-out refuses to merge an incomplete set); the manifest above is its evidence.
	if _, err := os.Stat(merged); err == nil {
		t.Logf("a merged file was written after the loss: %s", merged)
	}
}
