//go:build linux && e2e

package faults_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycaststore/storetest"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/testwait"
)

// serialEnv enables the scenarios that disturb what other tests share (the machine's PostgreSQL
// cluster). `go test ./...` runs packages in parallel, so scripts/test.sh runs them in a step of
// their own after it: LOADPROOF_FAULTS_SERIAL=1 go test -run TestPostgresRestartedMidRun ./internal/faults.
const serialEnv = "LOADPROOF_FAULTS_SERIAL"

// pgCluster is the machine's PostgreSQL cluster as scripts/postgres.sh finds it: the Debian
// cluster "main" of the one version under /etc/postgresql, driven with pg_ctlcluster.
type pgCluster struct{ version string }

func findCluster(t *testing.T) pgCluster {
	t.Helper()
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		t.Fatalf("pg_ctlcluster is not installed: %v (scripts/postgres.sh installs PostgreSQL)", err)
	}
	dirs, _ := filepath.Glob("/etc/postgresql/*/main")
	if len(dirs) == 0 {
		t.Fatal("no PostgreSQL cluster under /etc/postgresql/*/main (scripts/postgres.sh installs one)")
	}
	return pgCluster{version: filepath.Base(filepath.Dir(dirs[0]))}
}

func (c pgCluster) ctl(action string, extra ...string) error {
	args := append([]string{"--skip-systemctl-redirect", c.version, "main", action}, extra...)
	out, err := exec.Command("pg_ctlcluster", args...).CombinedOutput()
	if err != nil {
		return &exec.Error{Name: "pg_ctlcluster " + strings.Join(args, " ") + ": " + strings.TrimSpace(string(out)), Err: err}
	}
	return nil
}

// ready reports whether the cluster accepts connections on the test URL.
func pgReady(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	c.Close(ctx)
	return true
}

// TestPostgresRestartedMidRun stops the machine's PostgreSQL cluster while `keycast run` loads a
// Keycast server stored in it, and starts it again after the server has answered requests without
// it. Requests that need the database meanwhile fail clearly (a 5xx with an error body, counted as
// server errors, no network error and no silent success); the same server process serves again once
// the cluster is back; the client's successes and requests equal the server's own counts; and the
// stored users are intact. The cluster is started again when the test ends, whatever happened.
//
// It runs only with LOADPROOF_FAULTS_SERIAL=1 (scripts/test.sh runs it on its own after the other
// packages), because restarting the shared cluster would break the PostgreSQL tests of packages
// running at the same time.
func TestPostgresRestartedMidRun(t *testing.T) {
	if os.Getenv(serialEnv) != "1" {
		t.Skipf("restarts the machine's PostgreSQL cluster, which tests of other packages share: runs only with %s=1 (scripts/test.sh runs it serially)", serialEnv)
	}
	if os.Getenv("KEYCAST_TEST_DATABASE_URL") != "" {
		t.Skip("KEYCAST_TEST_DATABASE_URL points at another server; this scenario restarts the machine's own cluster")
	}
	cluster := findCluster(t)
	url := storetest.PostgresURL(t)
	// The cluster is started again when the test ends, and by a guard process if this test
	// binary dies first (killed, or its output pipe closed): the guard waits for its stdin to
	// close, which happens either way.
	guard := startRole(t, "pg-guard", procexec.Options{Signal: syscall.SIGTERM}, nil, cluster.version, url)
	t.Cleanup(func() {
		guard.stdin.Close()
		// The guard tries to start the cluster for up to a minute.
		testwait.Recv(t, guard.exited, 2*time.Minute, "the PostgreSQL guard's exit")
		if guard.err != nil || !pgReady(url) {
			t.Errorf("PostgreSQL was not started again (%v):\n%s", guard.err, guard.stderr)
		}
	})

	// A handler cache of one entry and cold-start over two users: nearly every request loads its
	// handler from the database.
	s := startKeycast(t, keycastserver.Config{DatabaseURL: url, HandlerCacheSize: 1}, 2)
	const success, requests, authErrors = keycast.MetricHTTPRPCSuccess, keycast.MetricHTTPRPCRequests, keycast.MetricHTTPRPCAuthErrors
	okBefore, reqBefore := s.counter(t, success), s.counter(t, requests)

	// Stop the cluster after 20 successes; start it again once the server has failed 10 requests
	// without it; then count what the server answers after that.
	var okAtStart float64
	restarted, stop := make(chan error, 1), make(chan struct{})
	go func() {
		restarted <- func() error {
			if err := waitFor(stop, func() bool { return s.counter(t, success)-okBefore >= 20 }); err != nil {
				return err
			}
			if err := cluster.ctl("stop", "-m", "fast"); err != nil {
				return err
			}
			failed := s.counter(t, authErrors)
			if err := waitFor(stop, func() bool { return s.counter(t, authErrors)-failed >= 10 }); err != nil {
				return err
			}
			if err := cluster.ctl("start"); err != nil {
				return err
			}
			okAtStart = s.counter(t, success)
			return nil
		}()
	}()
	// A test that fails early stops the sequence and waits for it before the cleanups run.
	var waited bool
	t.Cleanup(func() {
		close(stop)
		if !waited {
			testwait.Recv(t, restarted, 2*time.Minute, "the end of the PostgreSQL restart sequence")
		}
	})
	out := filepath.Join(t.TempDir(), "results.json")
	r := runCLI(t, 90*time.Second, "keycast", "run", "--url", s.URL, "--users-file", s.usersFile, "--duration", "8",
		"--concurrency", "2", "--ramp-up", "0", "--scenario", "cold-start", "--timeout", "5s", "--output", out)
	err := testwait.Recv(t, restarted, 2*time.Minute, "the end of the PostgreSQL restart sequence")
	waited = true
	if err != nil {
		t.Fatalf("restarting PostgreSQL mid-run: %v\n%s", err, r)
	}
	res := readKC(t, out)
	checkKCTotals(t, res)
	sm := res.Summary
	if r.code != 0 || sm.FailedRequests < 10 || sm.ConnectFailures != 0 || sm.CutOffRequests != 0 || sm.ErrorsNetwork != 0 || sm.ErrorsOther != 0 {
		t.Errorf("want successes and clear failures, no network error, nothing cut off: %+v\n%s", sm, r)
	}
	onlyCauses(t, res, "http_5")
	if got := s.counter(t, success) - okBefore; got != float64(sm.SuccessfulRequests) {
		t.Errorf("the server counted %v successes, the client %d", got, sm.SuccessfulRequests)
	}
	if got := s.counter(t, requests) - reqBefore; got != float64(sm.TotalRequests) {
		t.Errorf("the server counted %v requests, the client %d", got, sm.TotalRequests)
	}
	if after := s.counter(t, success) - okAtStart; after < 20 {
		t.Errorf("the server answered %v requests after PostgreSQL came back: it did not recover", after)
	}
	kcRecovered(t, s.URL, s.usersFile)
	if err := register(t.Context(), s.URL, "after-restart@faults.test"); err != nil {
		t.Errorf("registration after the restart: %v", err)
	}
}

// guardCluster is the body of the pg-guard role: it ignores the signals that end the test binary,
// waits until its stdin closes (the test ended, or the test binary died), and then starts the
// machine's cluster if it does not answer at url, trying again for up to a minute (a stop still in
// progress makes pg_ctlcluster start fail).
func guardCluster(version, url string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	_, _ = io.Copy(io.Discard, os.Stdin)
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if pgReady(url) {
			return 0
		}
		err = pgCluster{version: version}.ctl("start")
	}
	fmt.Fprintf(os.Stderr, "PostgreSQL does not answer at %s after a minute of starting it: %v\n", url, err)
	return 1
}

// waitFor polls cond every 2 ms for up to 30 s, or until stop is closed.
func waitFor(stop <-chan struct{}, cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-stop:
			return context.Canceled
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}
