package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
)

// TestConnectionsSourcesDefault: connections' default --client-ip-count is the fewest sources that
// keep every source within the server's default per-source burst, the preflight connection
// included, never below the seed's default and never above the distinct-source threshold.
func TestConnectionsSourcesDefault(t *testing.T) {
	lim := admit.HandshakeDefaults()
	burst := uint64(lim.Burst)
	seed := uint64(linkkeysload.DefaultClientIPCount)
	for _, count := range []uint64{0, 1, burst*seed - 1, burst * seed, burst*seed + 1, 3000, 200000, 1 << 31} {
		for _, pre := range []bool{true, false} {
			// The first source's handshakes: its round-robin share, plus the preflight connection.
			first := func(n uint64) uint64 {
				f := (count + n - 1) / n
				if pre {
					f++
				}
				return f
			}
			n := uint64(connectionsSources(uint32(count), pre))
			switch {
			case n < seed:
				t.Errorf("count %d: %d sources, fewer than the seed's %d", count, n, seed)
			case n > lim.DistinctSourceThreshold:
				t.Errorf("count %d: %d sources, above the distinct-source threshold %d", count, n, lim.DistinctSourceThreshold)
			case n < lim.DistinctSourceThreshold && first(n) > burst:
				t.Errorf("count %d (preflight %v): %d sources: the first makes %d handshakes, above the burst %d", count, pre, n, first(n), burst)
			case n > seed && first(n-1) <= burst:
				t.Errorf("count %d (preflight %v): %d sources, one fewer would do", count, pre, n)
			}
		}
	}
	help := connectionsSourcesHelp()
	for _, want := range []string{"TCP_HANDSHAKE_BURST=" + fmt.Sprint(lim.Burst), "⌈--count / " + fmt.Sprint(lim.Burst-1) + "⌉",
		fmt.Sprint(seed), fmt.Sprint(lim.DistinctSourceThreshold)} {
		if !strings.Contains(help, want) {
			t.Errorf("--client-ip-count help lacks %q: %s", want, help)
		}
	}
}

// TestConnectionsDefaultSourcesHoldEveryConnection: against a server with the default limits,
// connections --count above what the seed's 32 sources get through the per-source burst holds every
// connection with no --client-ip-count given, and says how many sources it used.
func TestConnectionsDefaultSourcesHoldEveryConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("opens hundreds of connections")
	}
	cfg, err := linkkeysserver.ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	info := filepath.Join(t.TempDir(), "info.json")
	if err := linkkeys.WriteInfo(info, ts.Info()); err != nil {
		t.Fatal(err)
	}
	lim := admit.HandshakeDefaults()
	count := uint32(lim.Burst)*linkkeysload.DefaultClientIPCount + 60
	want := connectionsSources(count, true)
	env, out, errOut := lkTestEnv()
	code := Run(context.Background(), LinkKeys, []string{"connections", "--info-file", info, "--count", fmt.Sprint(count),
		"--concurrency", "64", "--hold-secs", "0", "--workers", "1"}, env)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("client_ips=%d ", want)) {
		t.Errorf("header does not name the %d sources used:\n%s", want, out)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("requested=%d established=%d failed=0", count, count)) {
		t.Errorf("not every one of %d connections succeeded:\n%s", count, out)
	}
	// The control: the seed's 32 sources, fresh ones, cannot take them all through the burst.
	env, out, errOut = lkTestEnv()
	code = Run(context.Background(), LinkKeys, []string{"connections", "--info-file", info, "--count", fmt.Sprint(count),
		"--concurrency", "64", "--hold-secs", "0", "--workers", "1", "--client-ip-base", "127.0.9.0",
		"--client-ip-count", fmt.Sprint(linkkeysload.DefaultClientIPCount)}, env)
	if strings.Contains(out.String(), fmt.Sprintf("established=%d failed=0", count)) {
		t.Errorf("exit %d: the seed's %d sources took all %d connections: the server's limiter is not at its defaults\n%s%s",
			code, linkkeysload.DefaultClientIPCount, count, out, errOut)
	}
}
