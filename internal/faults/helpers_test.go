//go:build linux && e2e

package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/loadproof/loadproof/internal/cli"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// ---- The command line, in this process ----

// cliRun is one command line's outcome.
type cliRun struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// syncBuffer is a bytes.Buffer that a command's goroutines may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// onWrite, when set, sees every write (after it is buffered), one write at a time.
	onWrite func(p []byte)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.onWrite != nil {
		s.onWrite(p) // under the lock: writers from several goroutines see the hook one at a time
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCLI runs one `loadproof` command line in this process, as the binary would (the same command
// tree, flags and exit codes), bounded by limit.
func runCLI(t *testing.T, limit time.Duration, args ...string) cliRun {
	t.Helper()
	return runCLIWith(t, context.Background(), limit, nil, args...)
}

// runCLIWith is runCLI with a parent context and a writer that also sees stderr (progress lines).
func runCLIWith(t *testing.T, ctx context.Context, limit time.Duration, stderrHook func([]byte), args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var stdout syncBuffer
	stderr := syncBuffer{onWrite: stderrHook}
	env := &cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(&stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	t0 := time.Now()
	code := cli.Run(ctx, cli.Loadproof, args, env)
	r := cliRun{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(t0)}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("%s did not end within %v (the suite's bound)\n%s", strings.Join(args[:2], " "), limit, r)
	}
	if testing.Verbose() {
		t.Logf("loadproof %s\n%s", strings.Join(args, " "), r)
	}
	return r
}

// ---- Toxiproxy, embedded ----

// proxy is one embedded Toxiproxy proxy on 127.0.0.1:0 in front of upstream.
type proxy struct {
	*toxiproxy.Proxy
	port uint16
}

// newProxy starts a proxy to upstream and stops it when the test ends.
func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(api, t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("starting toxiproxy in front of %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	_, port, err := net.SplitHostPort(p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return &proxy{Proxy: p, port: uint16(n)}
}

// url is the proxy's http:// base URL.
func (p *proxy) url() string { return "http://" + p.Listen }

// toxic is one toxic: its type, direction ("upstream": client to server, "downstream": server to
// client) and attributes as JSON.
type toxic struct {
	typ, stream string
	attrs       string
}

// add adds a toxic (toxicity 1: it applies to every connection, present and future).
func (p *proxy) add(t *testing.T, x toxic) {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, x.typ+"_"+x.stream, x.typ, x.stream, x.attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		t.Fatalf("adding toxic %s: %v", body, err)
	}
}

// ---- LinkKeys ----

// lkLimits raises the admission limits far past what the suite sends: through a proxy every
// connection comes from 127.0.0.1, and the faults under test are the network's, not admission's.
var lkLimits = map[string]string{
	"TCP_HANDSHAKE_RATE_PER_MINUTE": "600000000", "TCP_HANDSHAKE_BURST": "100000000",
	"TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "100000000", "TCP_HANDSHAKE_GLOBAL_BURST": "100000000",
	"PUBLIC_READ_RATE_PER_MINUTE": "600000000", "PUBLIC_READ_BURST": "100000000",
	"PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "100000000", "PUBLIC_READ_GLOBAL_BURST": "100000000",
}

// startLinkKeys starts the LinkKeys reference server in this process with lkLimits.
func startLinkKeys(t *testing.T) *linkkeysserver.TestServer {
	t.Helper()
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return lkLimits[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts, err := linkkeysserver.NewTestServer(linkkeysserver.TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("closing the LinkKeys server: %v", err)
		}
	})
	return ts
}

// writeInfo writes an info file for info with its port replaced by port (a proxy's), so the
// clients connect through the proxy and still pin the server's certificate.
func writeInfo(t *testing.T, info linkkeys.Info, port uint16) string {
	t.Helper()
	info.Port = port
	path := filepath.Join(t.TempDir(), "info.json")
	if err := linkkeys.WriteInfo(path, info); err != nil {
		t.Fatal(err)
	}
	return path
}

// settled waits until the server has closed every connection and accounted for every accept
// (nothing open, nothing handshaking), then returns its counters. A connection the client closed
// is closed at the server a moment later; the bound is the suite's, not a timing claim.
func settled(t *testing.T, ts *linkkeysserver.TestServer) linkkeysserver.Snapshot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := ts.Metrics()
		if s.OpenConnections == 0 && s.HandshakesInProgress == 0 && s.Pending() == 0 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LinkKeys server did not settle: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLK reads a LinkKeys client's JSON result.
func readLK(t *testing.T, path string) linkkeysresult.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the client wrote no result: %v", err)
	}
	var r linkkeysresult.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("result %s: %v", path, err)
	}
	return r
}

// ---- Keycast ----

// kcServer is a Keycast reference server in this process with a users file.
type kcServer struct {
	*kctest.Server
	usersFile string
	users     []keycast.TestUser
}

// startKeycast starts the server and creates users through its HTTP API.
func startKeycast(t *testing.T, cfg keycastserver.Config, users int) *kcServer {
	t.Helper()
	srv := kctest.Start(t, cfg)
	path, list := makeUsers(t, srv.URL, users)
	return &kcServer{Server: srv, usersFile: path, users: list}
}

// makeUsers runs setup (HTTP mode) against url and writes the users file.
func makeUsers(t *testing.T, url string, n int) (string, []keycast.TestUser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := keycastload.Setup(ctx, keycastload.SetupConfig{URL: url, Users: n, Concurrency: 2, Mode: keycastload.ModeHTTP})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if len(res.File.Users) != n {
		t.Fatalf("setup made %d of %d users: %v", len(res.File.Users), n, res.Failures)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := keycast.WriteUsersFile(path, res.File); err != nil {
		t.Fatal(err)
	}
	return path, res.File.Users
}

// kcCounters reads the server's own counters straight from its /api/metrics (never through a
// proxy), by series name.
func kcCounters(t *testing.T, baseURL string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, series, err := keycastload.FetchServerMetrics(ctx, baseURL)
	if err != nil {
		t.Fatalf("reading the server's counters: %v", err)
	}
	return series
}

// counter reads one of the server's own counters in this process, through its handler (no socket,
// so it is cheap enough to poll).
func (s *kcServer) counter(t *testing.T, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, keycast.PathMetrics, nil))
	_, series, err := keycastload.ParseMetrics(rec.Body.Bytes())
	if err != nil {
		t.Errorf("reading the server's counters: %v", err)
	}
	return series[name]
}

// when runs do once cond holds, polling it every 2 ms from a goroutine, and returns a channel that
// is closed after do ran (or the test's bound passed, which fails the test). A test that ends first
// stops the poll, and waits for it, before its cleanups run.
func when(t *testing.T, cond func() bool, do func()) <-chan struct{} {
	t.Helper()
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Errorf("the trigger's condition never held")
				return
			}
		}
		do()
	}()
	t.Cleanup(func() {
		close(stop)
		testwait.Recv(t, done, time.Minute, "the end of when's poll and action")
	})
	return done
}

// readKC reads a Keycast results file.
func readKC(t *testing.T, path string) *keycastresult.Results {
	t.Helper()
	r, err := keycastresult.Read(path)
	if err != nil {
		t.Fatalf("results %s: %v", path, err)
	}
	return r
}

// kcAttempts is every attempt a run made: requests, connect failures and cut-off requests.
func kcAttempts(s keycastresult.Summary) uint64 {
	return s.TotalRequests + s.ConnectFailures + s.CutOffRequests
}

// checkKCTotals asserts that a Keycast summary adds up: every request is a success or a failure,
// and every failure is in exactly one bucket.
func checkKCTotals(t *testing.T, r *keycastresult.Results) {
	t.Helper()
	s := r.Summary
	if s.SuccessfulRequests+s.FailedRequests != s.TotalRequests {
		t.Errorf("successes %d + failures %d != requests %d", s.SuccessfulRequests, s.FailedRequests, s.TotalRequests)
	}
	buckets := s.ErrorsAuth + s.ErrorsServer + s.ErrorsClient + s.ErrorsNetwork + s.RateLimitedRequests + s.IntentionalRejections + s.ErrorsOther
	if buckets != s.FailedRequests {
		t.Errorf("failure buckets sum to %d, failures are %d: %+v", buckets, s.FailedRequests, s)
	}
}

// writeAll writes b to w; a helper for the byte-counting measurements.
func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
