//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/testwait"
)

// TestLimiterHeavyConnections runs connections (600 from two source addresses) against the
// reference LinkKeys server with its default limits, so that its per-source handshake limiter
// refuses most attempts (the README's `connections --count 3000` case), with the server's
// accounting read from its METRICS lines. The page's headline tiles must count those refusals apart, never as failures,
// and quote the latency of the handshakes that completed.
func TestLimiterHeavyConnections(t *testing.T) {
	b := needBrowser(t)
	cfg, err := linkkeysserver.ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "server.log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// METRICS lines as the server command prints them, more often so that the test stays short.
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				s := ts.Metrics()
				s.Label = "running"
				_ = linkkeys.WriteMetricsLine(lf, s.MetricsLine)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		testwait.WaitGroup(t, &wg, testwait.Long, "the METRICS writer's end")
		lf.Close()
		if err := ts.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
	})
	base, err := linkkeysload.ParseIPv4("--client-ip-base", "127.0.27.0")
	if err != nil {
		t.Fatal(err)
	}
	resultPath := filepath.Join(dir, "linkkeys-connections.json")
	cc := linkkeysload.ConnectionsConfig{Target: linkkeysload.TargetFromInfo(ts.Info()), Count: 600, Concurrency: 32,
		AttemptTimeout: 10 * time.Second, Sources: linkkeysload.SourceAddrs{Base: base, Count: 2}, ProgressEvery: 1000}
	var stdout bytes.Buffer
	res, err := linkkeysload.Connections(context.Background(), cc, linkkeysload.Run{Stdout: &stdout, Stderr: io.Discard,
		Metrics: &linkkeysload.MetricsSource{Location: logPath}, SettleWait: 10 * time.Second, JSONPath: resultPath})
	if err != nil {
		t.Fatal(err)
	}
	if res.Server == nil {
		t.Fatalf("the run read no server accounting from %s; its output:\n%s", logPath, stdout.String())
	}
	m, page := drawModel(t, []string{resultPath}, report.HTMLOptions{})
	h := m.Runs[0].Headline
	if h.Refused <= h.Succeeded {
		t.Fatalf("headline %+v: the limiter refused no more than it admitted; the run is not limiter-heavy", h)
	}
	out := t.ArtifactDir()
	path := filepath.Join(out, "limiter-connections.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	p := checkPage(t, b, fileURL(path), expectCharts(m), filepath.Join(out, "limiter-connections.png"))
	checkRefusalTiles(t, tiles(t, p, false), h)
	if h.Kind != "connect_handshake" {
		t.Errorf("the headline quotes %q latency, want the established connections' (connect_handshake)", h.Kind)
	}
}
