//go:build e2e

package testbed_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/testbed"
)

// readLKResult reads a LinkKeys client's --json result file.
func readLKResult(t *testing.T, path string) linkkeysresult.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the client's result: %v", err)
	}
	r, err := linkkeysresult.Read(b)
	if err != nil {
		t.Fatalf("the client's result %s: %v", path, err)
	}
	return r
}

// hostKernel reads h's kernel counters from inside h (the helper mode "kernel").
func hostKernel(ctx context.Context, t *testing.T, h *testbed.Host) machine.Kernel {
	t.Helper()
	out, err := helperCmd(ctx, h, "kernel", "-").Output()
	if err != nil {
		t.Fatalf("reading %s's kernel counters: %v\n%s", h.Name, err, out)
	}
	var k machine.Kernel
	if err := json.Unmarshal(out, &k); err != nil {
		t.Fatalf("%s's kernel counters: %v\n%s", h.Name, err, out)
	}
	return k
}

// TestLinkKeysClientsAcrossHosts: the real LinkKeys server in host 1 on 198.18.0.1 (with its
// Prometheus metrics on the bridge), the real clients in host 2. connections through the info file
// (its host key) holds every connection and the server's accounting agrees; handshake-bench and
// request-bench and combined with --target/--fingerprint/--domain and no info file complete real
// work; a client without --allow-host exits 2 naming the flag.
func TestLinkKeysClientsAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("makes network namespaces and runs the LinkKeys server and clients")
	}
	bed := testbed.New(t, testbed.Options{Hosts: 2, SourcePrefixes: map[int]string{2: "198.19.2.0/24"}})
	bins := testbed.Build(t, "./cmd/linkkeys-server", "./cmd/linkkeys-loadtest")
	server, client := bed.Hosts[0], bed.Hosts[1]
	// The bench's few sources would otherwise meet the server's per-source handshake and
	// public-read budgets (shedding is the server working, but here the test wants every handshake served).
	for k, v := range map[string]string{"TCP_HANDSHAKE_RATE_PER_MINUTE": "6000000", "TCP_HANDSHAKE_BURST": "100000",
		"TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "1000000", "TCP_HANDSHAKE_GLOBAL_BURST": "100000",
		"PUBLIC_READ_RATE_PER_MINUTE": "600000000", "PUBLIC_READ_BURST": "10000000",
		"PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "10000000", "PUBLIC_READ_GLOBAL_BURST": "10000000"} {
		t.Setenv(k, v)
	}
	srv := startLinkKeysServer(t, bins["linkkeys-server"], server, "7443", "--metrics-addr", server.Addr+":9464")
	info, err := linkkeys.ReadInfo(srv.InfoFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.Host != server.Addr {
		t.Fatalf("the server on %s wrote host %q in its info file", srv.Addr, info.Host)
	}
	lk := bins["linkkeys-loadtest"]
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// No --allow-host: refused before any attempt, exit 2, the message names the flag.
	cmd := client.Command(ctx, lk, "connections", "--info-file", srv.InfoFile, "--count", "10", "--hold-secs", "1")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "--allow-host") {
		t.Errorf("a remote target without --allow-host: err %v, want exit 2 naming --allow-host\n%s", err, out)
	}

	// connections through the info file's host key, from host 2's own source prefix, with the
	// server host's own kernel counters read around it (the client's record holds only its own).
	const count = 300
	kBefore := hostKernel(ctx, t, server)
	res := filepath.Join(dir, "conns.json")
	out, err = client.Run(ctx, lk, "connections", "--info-file", srv.InfoFile, "--allow-host", server.Addr,
		"--count", "300", "--concurrency", "100", "--hold-secs", "1", "--client-ip-base", "198.19.2.1",
		"--client-ip-count", "16", "--workers", "1", "--json", res)
	if err != nil {
		t.Fatalf("connections across hosts: %v\n%s", err, out)
	}
	r := readLKResult(t, res)
	if r.Hold == nil || r.Hold.Held != count || r.Hold.StillOpen != count {
		t.Fatalf("connections: hold %+v, want %d held and still open\n%s", r.Hold, count, out)
	}
	if r.Server == nil {
		t.Fatalf("connections: no server accounting read from %s:9464\n%s", server.Addr, out)
	}
	if d := r.Server.Delta; d.Accepted != count || d.HandshakesCompleted != count {
		t.Errorf("server accounting: %d accepted, %d handshakes completed; the client held %d", d.Accepted, d.HandshakesCompleted, count)
	}
	sk := machine.Delta(kBefore, hostKernel(ctx, t, server), runtime.NumCPU())
	if sk.ListenOverflows != 0 || sk.ListenDrops != 0 || sk.SyncookiesSent != 0 {
		t.Errorf("the server host dropped connections at its listener: %s", sk.Summary())
	}
	t.Logf("server host %s over connections: %s", server.Name, sk.Summary())
	if !strings.HasPrefix(r.Target, server.Addr+":") {
		t.Errorf("the result's target is %q, want the server's %s", r.Target, srv.Addr)
	}

	// handshake-bench with the three flags and no info file at all.
	flags := []string{"--target", srv.Addr, "--fingerprint", info.Fingerprint, "--domain", info.Domain,
		"--allow-host", server.Addr, "--client-ip-base", "198.19.2.64", "--client-ip-count", "64"} // no --info-file: the default path does not exist here
	res = filepath.Join(dir, "hs.json")
	out, err = client.Run(ctx, lk, append([]string{"handshake-bench", "--duration-secs", "2", "--concurrency", "8", "--json", res,
		"--server-metrics", "http://" + server.Addr + ":9464/metrics"}, flags...)...)
	if err != nil {
		t.Fatalf("handshake-bench across hosts: %v\n%s", err, out)
	}
	r = readLKResult(t, res)
	if r.Handshakes == nil || r.Handshakes.Completed < 20 || r.Handshakes.Failed != 0 {
		t.Fatalf("handshake-bench: %+v, want at least 20 completed and none failed\n%s", r.Handshakes, out)
	}
	t.Logf("handshake-bench across the bridge: %d completed, %.0f/s", r.Handshakes.Completed, r.Handshakes.Rate)

	res = filepath.Join(dir, "req.json")
	out, err = client.Run(ctx, lk, append([]string{"request-bench", "--duration-secs", "2", "--connections", "4", "--json", res}, flags...)...)
	if err != nil {
		t.Fatalf("request-bench across hosts: %v\n%s", err, out)
	}
	r = readLKResult(t, res)
	if r.Requests == nil || r.Requests.Completed < 50 || r.Requests.Errors != 0 {
		t.Fatalf("request-bench: %+v, want at least 50 completed and no errors\n%s", r.Requests, out)
	}
	t.Logf("request-bench across the bridge: %d completed, %.0f/s", r.Requests.Completed, r.Requests.Rate)

	// combined with the same three flags: a held population, handshakes and requests at once, each
	// stream from its own part of host 2's prefix.
	res = filepath.Join(dir, "comb.json")
	out, err = client.Run(ctx, lk, "combined", "--target", srv.Addr, "--fingerprint", info.Fingerprint, "--domain", info.Domain,
		"--allow-host", server.Addr, "--duration", "2", "--json", res,
		"--held", "100", "--held-concurrency", "50", "--held-hold-secs", "1", "--held-ip-base", "198.19.2.128", "--held-ip-count", "32",
		"--handshake-concurrency", "4", "--handshake-ip-base", "198.19.2.200", "--handshake-ip-count", "16",
		"--request-connections", "2", "--request-ip-base", "198.19.2.240", "--request-ip-count", "8")
	if err != nil {
		t.Fatalf("combined across hosts: %v\n%s", err, out)
	}
	r = readLKResult(t, res)
	if r.Combined == nil || len(r.Combined.Streams) != 3 {
		t.Fatalf("combined: %+v, want three streams\n%s", r.Combined, out)
	}
	for _, st := range r.Combined.Streams {
		switch {
		case st.Survival != nil:
			if st.Survival.Established != 100 || st.Survival.StillOpen != 100 {
				t.Errorf("combined held stream: %+v, want 100 established and still open", st.Survival)
			}
		case st.Result != nil && st.Result.Handshakes != nil:
			if h := st.Result.Handshakes; h.Completed < 10 || h.Failed != 0 {
				t.Errorf("combined handshake stream: %+v, want at least 10 completed and none failed", h)
			}
		case st.Result != nil && st.Result.Requests != nil:
			// The request stream runs in a client process of its own (--stream-processes, on by
			// default: handshake crypto in the same process delays every request's wake-up,
			// docs/benchmarks.md), but the two still share this host's CPUs with the server, so
			// only that requests are served, without error, is asserted.
			if q := st.Result.Requests; q.Completed < 10 || q.Errors != 0 {
				t.Errorf("combined request stream: %+v, want at least 10 completed and no errors", q)
			}
			t.Logf("combined across the bridge: %d requests (%.0f/s) beside the handshake stream", st.Result.Requests.Completed, st.Result.Requests.Rate)
		default:
			t.Errorf("combined stream %s: no figures", st.Name)
		}
	}
	if !strings.HasPrefix(r.Target, server.Addr+":") {
		t.Errorf("the combined result's target is %q, want the server's %s", r.Target, srv.Addr)
	}
	if hs, rq := r.Combined.Stream("handshakes"), r.Combined.Stream("requests"); hs == nil || rq == nil ||
		len(hs.PIDs) == 0 || len(rq.PIDs) == 0 || slices.ContainsFunc(hs.PIDs, func(p int) bool { return slices.Contains(rq.PIDs, p) }) {
		t.Errorf("combined: the handshake and request streams shared a client process (pids %v and %v)", pidsOf(hs), pidsOf(rq))
	}
}

func pidsOf(s *linkkeysresult.Stream) []int {
	if s == nil {
		return nil
	}
	return s.PIDs
}
