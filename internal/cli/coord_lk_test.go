package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// lkServer starts a LinkKeys test server with generous limits and a METRICS log written every
// 50 ms, and returns its info file and log path.
func lkServer(t *testing.T) (info, metricsLog string) {
	t.Helper()
	lim := map[string]string{"TCP_HANDSHAKE_BURST": "1000000", "TCP_HANDSHAKE_GLOBAL_BURST": "1000000",
		"PUBLIC_READ_BURST": "1000000000", "PUBLIC_READ_GLOBAL_BURST": "1000000000"}
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return lim[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	info, metricsLog = filepath.Join(dir, "info.json"), filepath.Join(dir, "server.log")
	if err := linkkeys.WriteInfo(info, ts.Info()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(metricsLog)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				s := ts.Metrics()
				s.Label = "running"
				_ = linkkeys.WriteMetricsLine(f, s.MetricsLine)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		testwait.WaitGroup(t, &wg, testwait.Long, "the metrics writer's end")
		f.Close()
		_ = ts.Close()
	})
	return info, metricsLog
}

func readLK(t *testing.T, path string) linkkeysload.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := linkkeysload.ReadResult(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// umbrellaOut is umbrella with the command's stdout too.
func umbrellaOut(ctx context.Context, t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb safeBuf
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(&errb, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	code = Run(ctx, Loadproof, args, env)
	return code, out.String(), errb.String()
}

// TestCoordinateLinkKeys runs connections and ddos in one process and over four worker processes
// (one task of the client's worker spec, each worker running its segment of it): the merged attempts
// equal the single run's, the merged latency histogram holds every success, and the server's own
// METRICS account for every attempt of the merged run. The workers start at the coordinated
// instant (none before it), and their live snapshots draw the coordinator's progress lines and
// the client's own seed progress lines.
func TestCoordinateLinkKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinated run over worker processes (-short)")
	}
	info, metricsLog := lkServer(t)
	dir := t.TempDir()
	for _, c := range [][]string{
		{"connections", "--count", "203", "--concurrency", "16", "--hold-secs", "2", "--client-ip-count", "8"},
		{"ddos", "--sources", "301", "--concurrency", "16"},
	} {
		t.Run(c[0], func(t *testing.T) {
			base := append(append([]string{"linkkeys"}, c...), "--info-file", info, "--server-metrics", metricsLog)
			single := filepath.Join(dir, c[0]+"-single.json")
			if code, errs := umbrella(context.Background(), t, append(base, "--workers", "1", "--json", single)...); code != ExitOK {
				t.Fatalf("single run exit %d: %s", code, errs)
			}
			one := readLK(t, single)
			merged := filepath.Join(dir, c[0]+"-merged.json")
			args := append(append([]string{"coordinate", "--workers", "4", "--"}, base...), "--json", merged, "--progress-every", "1")
			code, stdout, errs := umbrellaOut(context.Background(), t, args...)
			if code != ExitOK {
				t.Fatalf("coordinate exit %d: %s", code, errs)
			}
			if c[0] == "connections" {
				// The hold keeps every worker's last snapshot well ahead of its result.
				if !strings.Contains(errs, "coordinate: linkkeys connections t=") {
					t.Errorf("no merged progress line on stderr:\n%s", errs)
				}
				if !strings.Contains(stdout, "  progress: attempted=") {
					t.Errorf("no seed progress line on stdout:\n%s", stdout)
				}
			}
			m := readLK(t, merged)
			if m.Attempts.Attempted != one.Attempts.Attempted || m.Attempts.Succeeded != one.Attempts.Succeeded || m.Attempts.Failed != one.Attempts.Failed {
				t.Fatalf("merged attempts %+v; single %+v", *m.Attempts, *one.Attempts)
			}
			if got := m.Attempts.Latency.Count(); got != m.Attempts.Succeeded {
				t.Errorf("merged histogram holds %d samples for %d successes", got, m.Attempts.Succeeded)
			}
			if m.Hold != nil {
				// The hold barrier is relayed through the coordinator: every worker held at once.
				if m.Hold.Held != m.Attempts.Succeeded || m.EndedAt.Sub(m.StartedAt) < time.Duration(m.Hold.HoldSecs)*time.Second {
					t.Errorf("hold: %d held of %d, run lasted %s for a %d s hold", m.Hold.Held, m.Attempts.Succeeded, m.EndedAt.Sub(m.StartedAt), m.Hold.HoldSecs)
				}
			}
			if len(m.Segments) != 4 {
				t.Errorf("merged result has %d segments; want 4", len(m.Segments))
			}
			if m.Server == nil || len(m.Server.Checks) == 0 {
				t.Fatalf("no server accounting in the merged result")
			}
			for _, ch := range m.Server.Checks {
				if !ch.OK {
					t.Errorf("server accounting %s: client %d, server %d", ch.Name, ch.Client, ch.Server)
				}
			}
			mb, err := os.ReadFile(merged + ".coordination.json")
			if err != nil {
				t.Fatal(err)
			}
			var man coord.Manifest
			if err := json.Unmarshal(mb, &man); err != nil || len(man.Tasks) != 1 {
				t.Fatalf("manifest: %v, %d tasks", err, len(man.Tasks))
			}
			task := man.Tasks[0]
			if len(task.Starts) != 4 {
				t.Fatalf("manifest task has %d starts; want 4", len(task.Starts))
			}
			for i, st := range task.Starts {
				// Offsets on one machine are well under a millisecond; 20 ms is slack for the estimate.
				if st.IsZero() || st.Before(task.StartAt.Add(-20*time.Millisecond)) {
					t.Errorf("worker %d started at %s; the coordinated start was %s", i, st.Format(time.RFC3339Nano), task.StartAt.Format(time.RFC3339Nano))
				}
			}
			t.Logf("start skew %.1f ms", task.StartSkewMs)
			t.Log(fmt.Sprintf("%s: %d attempts, %d succeeded, checks %d", c[0], m.Attempts.Attempted, m.Attempts.Succeeded, len(m.Server.Checks)))
		})
	}
}

// TestLinkKeysSegmentsTileTheRun: the two --segment halves of a ddos and a connections run (each
// fanned out to two processes) together make exactly the whole run's attempts.
func TestLinkKeysSegmentsTileTheRun(t *testing.T) {
	info, _ := lkServer(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if code, errs := umbrella(context.Background(), t, "keygen", "--out", key); code != ExitOK {
		t.Fatal(errs)
	}
	for _, c := range [][]string{
		{"ddos", "--sources", "101", "--concurrency", "8", "--client-ip-base", "127.9.0.0"},
		{"connections", "--count", "61", "--concurrency", "8", "--hold-secs", "0", "--client-ip-count", "6"},
	} {
		var parts []linkkeysload.Result
		for i := 1; i <= 2; i++ {
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", c[0], i))
			args := append(append([]string{"linkkeys"}, c...), "--info-file", info, "--workers", "2", "--segment", fmt.Sprintf("%d/2", i), "--json", out,
				"--run-id", testRunID, "--sign-key", key+".key")
			if code, errs := umbrella(context.Background(), t, args...); code != ExitOK {
				t.Fatalf("%s segment %d: exit %d: %s", c[0], i, code, errs)
			}
			parts = append(parts, readLK(t, out))
			if parts[i-1].RunID != testRunID {
				t.Fatalf("%s segment %d carries run ID %q (its workers' results too must)", c[0], i, parts[i-1].RunID)
			}
			if code, errs := umbrella(context.Background(), t, "verify", "--key", key+".pub", out); code != ExitOK {
				t.Fatalf("%s segment %d: verify: exit %d: %s", c[0], i, code, errs)
			}
		}
		m, err := linkkeysload.Merge(parts)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(101)
		if c[0] == "connections" {
			want = 61
		}
		if m.Attempts.Attempted != want || len(m.Segments) != 4 {
			t.Errorf("%s: merged %d attempts over %d segments; want %d over 4 (%v)", c[0], m.Attempts.Attempted, len(m.Segments), want, m.Segments)
		}
	}
}
