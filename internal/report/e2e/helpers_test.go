//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// needBrowser starts Chromium, or skips the test when there is none (fails it under CI=true: the
// test script installs chromium, so a missing one there is a broken setup, not a reason to skip).
func needBrowser(t *testing.T) *browser.Browser {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests run real load and a real browser")
	}
	if _, err := browser.ExecPath(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: scripts/test.sh installs it; a missing browser fails the run)", err)
		}
		t.Skip(err)
	}
	b, err := browser.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// fixtures are result files of real runs, made once for every test of the package.
type fixtures struct {
	dir               string
	keycastA          string
	keycastB          string
	evidenceDir       string
	linkkeys          string
	srvURL, usersPath string
}

var (
	fixOnce sync.Once
	fix     fixtures
	fixErr  error
	fixStop func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixStop != nil {
		fixStop()
	}
	if fix.dir != "" {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

func getFixtures(t *testing.T) *fixtures {
	t.Helper()
	fixOnce.Do(func() { fixErr = makeFixtures() })
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return &fix
}

// makeFixtures runs the loads. The Keycast server has one CPU slot and no queue, so the capacity
// profile's spike sheds (503s in the outcome classes) and the other phases pass.
func makeFixtures() error {
	dir, err := os.MkdirTemp("", "loadproof-report-e2e-")
	if err != nil {
		return err
	}
	fix.dir = dir
	srv, stop, err := startKeycast(dir)
	if err != nil {
		return err
	}
	fixStop = stop
	fix.srvURL = srv
	ctx := context.Background()
	setup, err := keycastload.Setup(ctx, keycastload.SetupConfig{URL: srv, Users: 6, Concurrency: 2, Mode: keycastload.ModeHTTP})
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	fix.usersPath = filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(fix.usersPath, setup.File); err != nil {
		return err
	}
	// Two segments of one run (a report merges only those), one after the other.
	runID := result.NewRunID()
	for i, name := range []string{"keycast-a.json", "keycast-b.json"} {
		res, err := keycastload.Run(ctx, keycastload.RunConfig{URL: srv, Concurrency: 6, Duration: 3 * time.Second,
			Scenario: keycast.ScenarioWarmCache, Method: keycast.MethodGetPublicKey, Users: setup.File.Users, UsersFile: fix.usersPath,
			ReportInterval: time.Second, Segment: engine.Segment{Index: i, Count: 2}, RunID: runID})
		if err != nil {
			return fmt.Errorf("keycast run: %w", err)
		}
		p := filepath.Join(dir, name)
		if err := keycastresult.Write(p, res); err != nil {
			return err
		}
		if i == 0 {
			fix.keycastA = p
		} else {
			fix.keycastB = p
		}
	}
	fix.evidenceDir = filepath.Join(dir, "evidence")
	plan := capacity.RehearsalPlan(capacity.RehearsalOptions{Name: "e2e-report", URL: srv, UsersFile: fix.usersPath,
		PhaseSeconds: 1, SpikeConcurrency: 16, DeclareShedding: true})
	if ev, err := capacity.Execute(ctx, plan, capacity.Options{OutputDir: fix.evidenceDir}); ev == nil {
		return fmt.Errorf("capacity: %w", err)
	}
	fix.linkkeys = filepath.Join(dir, "linkkeys-connections.json")
	return connectionRun(ctx, fix.linkkeys)
}

func startKeycast(dir string) (string, func(), error) {
	srv, err := keycastserver.New(keycastserver.Config{DataDir: filepath.Join(dir, "kc-data"), CPUSlots: 1, CPUQueue: -1, BcryptCost: 4}, nil)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

var _ = kctest.Start // the in-package helper needs a *testing.T; fixtures outlive one test

// connectionRun is a connections run in the shape the LinkKeys harness writes once its clients are
// on the engine (harness "linkkeys", the attempt stages as classes, "class:DETAIL" reasons as
// causes, kind connect_handshake, server samples of open connections and frame buffers), over real
// TCP sockets to a local listener that holds a limited number and then resets the rest. It stands
// in for `linkkeys-loadtest connections --json` until that command writes the envelope.
func connectionRun(ctx context.Context, path string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var open atomic.Int64
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if len(held) >= 150 {
				mu.Unlock()
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				c.Close()
				continue
			}
			held = append(held, c)
			mu.Unlock()
			open.Add(1)
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	addr := ln.Addr().String()
	var clientConns []net.Conn
	var cmu sync.Mutex
	classes := []string{"success", "tcp_connect_error", "tls_handshake_error_or_server_reject", "attempt_timeout"}
	cfg := engine.Config{
		Classes: classes, Kinds: []string{"connect_handshake"},
		Workers: 4, Rate: 100, Duration: 3 * time.Second, Interval: time.Second,
		Driver: engine.DriverFunc(func(ctx context.Context, w *engine.Worker, n int64) engine.Outcome {
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return engine.Outcome{Class: 1, Cause: "tcp_connect_error:CONNECT"}
			}
			// A reset connection shows as a read error at once; a held one times out the read.
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.Close()
				return engine.Outcome{Class: 2, Cause: "tls_handshake_error_or_server_reject:RESET"}
			}
			cmu.Lock()
			clientConns = append(clientConns, c)
			cmu.Unlock()
			return engine.Outcome{}
		}),
		Sample: func(context.Context) (map[string]float64, error) {
			return map[string]float64{"open_connections": float64(open.Load()), "rss_bytes": float64(40 << 20),
				"frame_buffer_bytes": float64(open.Load() * 4096)}, nil
		},
	}
	run, err := engine.Execute(ctx, cfg)
	if err != nil {
		return err
	}
	cmu.Lock()
	for _, c := range clientConns {
		c.Close()
	}
	cmu.Unlock()
	env := run.Envelope
	env.Format, env.Harness, env.Command, env.Target = result.Format, "linkkeys", "connections", addr
	env.Machines = []machine.Record{machine.Collect()}
	b, err := json.MarshalIndent(&env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// model reads back the data a page carries, to compute what its charts must show.
func drawModel(t *testing.T, files []string, opt report.HTMLOptions) (*report.Model, []byte) {
	t.Helper()
	var srcs []report.Source
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			f = filepath.Join(f, "evidence.json")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, report.Source{Name: f, Data: b})
	}
	m, err := report.BuildModel(srcs, opt)
	if err != nil {
		t.Fatal(err)
	}
	page, err := report.Page(m)
	if err != nil {
		t.Fatal(err)
	}
	// The expectations come from the data as the page carries it (numbers rounded for size).
	s := string(page)
	const open = `<script id="lp-data" type="application/json">`
	i := strings.Index(s, open)
	j := strings.Index(s[i:], "</script>")
	if i < 0 || j < 0 {
		t.Fatal("page has no data element")
	}
	var back report.Model
	if err := json.Unmarshal([]byte(s[i+len(open):i+j]), &back); err != nil {
		t.Fatal(err)
	}
	return &back, page
}

// union counts the distinct x values of several runs' time axes (uPlot joins them).
func union(xs ...[]float64) int {
	seen := map[float64]bool{}
	for _, x := range xs {
		for _, v := range x {
			seen[v] = true
		}
	}
	return len(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ = slices.Contains[[]string]
