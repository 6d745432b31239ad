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

// TestConnectionsSourcesHelp: --client-ip-count's help states the rule of
// linkkeysload.ConnectionsSources with the server's default figures.
func TestConnectionsSourcesHelp(t *testing.T) {
	lim := admit.HandshakeDefaults()
	seed := uint64(linkkeysload.DefaultClientIPCount)
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
	want := linkkeysload.ConnectionsSources(count, true)
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
