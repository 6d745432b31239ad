//go:build linux && e2e

package faults_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/testwait"
)

// lockSQLite has another process hold an exclusive lock on the SQLite database at path: this
// test binary in the sqlite-lock role (holdSQLiteLock), which runs BEGIN EXCLUSIVE on its own
// connection and holds the lock until its stdin is closed.
func lockSQLite(t *testing.T, path string) *child {
	t.Helper()
	c := startRole(t, "sqlite-lock", procexec.Options{}, nil, path)
	c.waitOutput(t, regexp.MustCompile(`(?m)^locked$`))
	return c
}

// register runs the registration flow for a new email and returns its error.
func register(ctx context.Context, url, email string) error {
	hc := &http.Client{Timeout: 30 * time.Second}
	_, err := keycastload.RegisterUser(ctx, hc, url, email, "a-password-of-32-characters-0123", 0)
	return err
}

// TestSQLiteLockedByAnotherProcess: while another process holds BEGIN EXCLUSIVE on the Keycast
// server's SQLite database, a registration (a write) waits out busy_timeout (5 s) and is answered
// with Keycast's contract for a database failure (503 "Service temporarily unavailable. Please try
// again in a few minutes.") while the server logs the cause (SQLITE_BUSY, database is locked); the
// signing requests (reads under WAL) keep succeeding; once the lock is released the same server
// registers again without a restart. Afterwards the database passes integrity_check and holds
// exactly the users that registered.
func TestSQLiteLockedByAnotherProcess(t *testing.T) {
	t.Parallel()
	t.Run("keycast", testKeycastSQLiteLocked)
	t.Run("linkkeys", testLinkKeysSQLiteLocked)
}

func testKeycastSQLiteLocked(t *testing.T) {
	t.Parallel()
	// A handler cache of one entry and cold-start over two users: every request loads its
	// handler from the database.
	dir := t.TempDir()
	s := startKeycastChild(t, dir, "HANDLER_CACHE_SIZE=1")
	users, _ := makeUsers(t, s.url, 2)
	db := filepath.Join(dir, keycastserver.SQLiteFileName)
	usersBefore := countRows(t, db, "users")
	ctx := t.Context()

	lock := lockSQLite(t, db)
	t0 := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- register(ctx, s.url, "locked@faults.test") }()

	out := filepath.Join(t.TempDir(), "results.json")
	r := runCLI(t, 60*time.Second, "keycast", "run", "--url", s.url, "--users-file", users, "--duration", "0",
		"--requests", "40", "--concurrency", "2", "--ramp-up", "0", "--scenario", "cold-start", "--output", out)
	if res := readKC(t, out); r.code != 0 || res.Summary.SuccessfulRequests != 40 {
		t.Errorf("signing should go on while the database is locked for writing: %+v\n%s", res.Summary, r)
	} else if d := res.ServerMetrics.Deltas; d == nil || d.HTTPRPCCacheMisses < 20 {
		t.Errorf("the run should load handlers from the database: %+v", res.ServerMetrics)
	}

	err := testwait.Recv(t, errc, testwait.Long, "the registration under the lock")
	waited := time.Since(t0)
	var se *keycastload.StepError
	if !errors.As(err, &se) || se.Step != "register" || se.Status != http.StatusServiceUnavailable ||
		!strings.Contains(string(se.Body), keycast.MsgServiceUnavailable) {
		t.Fatalf("registration under the lock: want 503 %q at the register step, got %v", keycast.MsgServiceUnavailable, err)
	}
	if waited < 4*time.Second {
		t.Errorf("the write failed after %v, before busy_timeout (5 s) ran out", waited)
	}
	s.waitLog(t, regexp.MustCompile(`level=ERROR .*database is locked .*SQLITE_BUSY`))

	lock.stdin.Close()
	if testwait.Recv(t, lock.exited, testwait.Long, "the locking process's exit"); lock.err != nil {
		t.Fatalf("the locking process: %v\n%s", lock.err, lock.stderr)
	}
	if err := register(ctx, s.url, "after@faults.test"); err != nil {
		t.Fatalf("registration after the lock was released: %v", err)
	}
	integrityCheck(t, db)
	if got := countRows(t, db, "users"); got != usersBefore+1 {
		t.Errorf("%d users, want %d: the refused registration left a row, or the accepted one none", got, usersBefore+1)
	}
}

// testLinkKeysSQLiteLocked: while another process holds BEGIN EXCLUSIVE on the LinkKeys server's
// database, the running server keeps answering get-domain-keys (reads under WAL), and a second
// server started on the locked database (its start writes: the migration step, then its key) gives
// up after busy_timeout with an error naming the lock instead of hanging. Afterwards the database
// passes integrity_check and the first server still answers.
func testLinkKeysSQLiteLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startLinkKeysChild(t, dir)
	db := filepath.Join(dir, "lk.sqlite3")
	lock := lockSQLite(t, db)

	out := filepath.Join(t.TempDir(), "result.json")
	r := runCLI(t, 60*time.Second, "linkkeys", "request-bench", "--info-file", srv.infoPath, "--workers", "1", "--json", out,
		"--connections", "2", "--duration-secs", "1", "--op", "domain-keys", "--attempt-timeout-secs", "1")
	if rq := readLK(t, out).Requests; r.code != 0 || rq.Completed == 0 || rq.Errors != 0 {
		t.Errorf("get-domain-keys should be answered while the database is locked for writing: %+v\n%s", rq, r)
	}

	t0 := time.Now()
	other := startChild(t, nil, "linkkeys", "server", "--db-path", db, "--info-file", filepath.Join(t.TempDir(), "info.json"))
	select {
	case <-other.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("a server started on the locked database neither started nor gave up in 30 s\n%s", other.stderr)
	}
	if other.err == nil || !strings.Contains(other.stderr.String(), "database is locked") {
		t.Errorf("want a failed start naming the lock, got %v:\n%s", other.err, other.stderr)
	}
	t.Logf("the start on the locked database (%v):\n%s", other.err, other.stderr)
	if waited := time.Since(t0); waited < 4*time.Second {
		t.Errorf("the start gave up after %v, before busy_timeout (5 s) ran out", waited)
	}

	lock.stdin.Close()
	if testwait.Recv(t, lock.exited, testwait.Long, "the locking process's exit"); lock.err != nil {
		t.Fatalf("the locking process: %v\n%s", lock.err, lock.stderr)
	}
	integrityCheck(t, db)
	lkAnswers(t, srv.infoPath)
}
