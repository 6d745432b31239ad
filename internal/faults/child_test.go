//go:build linux && e2e

package faults_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	_ "modernc.org/sqlite"

	"github.com/loadproof/loadproof/internal/cli"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/testwait"
)

// childEnv marks a run of this test binary as a `loadproof` child process (a reference server
// that a scenario kills or stops): TestMain runs the command line instead of the tests.
const childEnv = "LOADPROOF_FAULTS_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "loadproof":
		os.Exit(cli.Main(cli.Loadproof))
	case "sqlite-lock":
		os.Exit(holdSQLiteLock(os.Args[1]))
	case "pg-guard":
		os.Exit(guardCluster(os.Args[1], os.Args[2]))
	}
	os.Exit(m.Run())
}

// child is a process started from this test binary: a `loadproof` command line, or one of the
// helper roles of TestMain.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	err    error // Wait's error, once exited is closed
}

// startChild starts `loadproof args…` with env added to this process's environment. It is
// killed when the test ends (and by the kernel if the test binary dies first).
func startChild(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	return startRole(t, "loadproof", procexec.Options{}, env, args...)
}

// startRole starts this test binary in role (see TestMain) with args; opt says what it receives
// when the test binary dies.
func startRole(t *testing.T, role string, opt procexec.Options, env []string, args ...string) *child {
	t.Helper()
	cmd, err := procexec.Command(os.Args[0], args...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	c := &child{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := procexec.Start(cmd, opt); err != nil {
		t.Fatalf("starting %s %s: %v", role, strings.Join(args, " "), err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		testwait.Recv(t, c.exited, testwait.Long, role+"'s exit after SIGKILL")
		if t.Failed() {
			t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", role, strings.Join(args, " "), c.stdout, c.stderr)
		}
	})
	return c
}

// signal sends sig to the child.
func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling the server: %v", err)
	}
}

// kill kills the child with SIGKILL and waits for it. Tests call it from when's goroutine, so a
// child that outlives the wait fails the test with Errorf, which any goroutine may call.
func (c *child) kill(t *testing.T) {
	t.Helper()
	c.signal(t, syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(testwait.Long):
		t.Errorf("the child did not exit within %v of SIGKILL", testwait.Long)
	}
}

// waitOutput waits until the child's stdout matches re and returns the submatches.
func (c *child) waitOutput(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	return c.wait(t, c.stdout, re)
}

// waitLog waits until the child's stderr (its log) matches re.
func (c *child) waitLog(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	c.wait(t, c.stderr, re)
}

func (c *child) wait(t *testing.T, out *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case <-c.exited:
			t.Fatalf("the child exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", c.err, re, c.stdout, c.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not print %q\nstdout:\n%s\nstderr:\n%s", re, c.stdout, c.stderr)
		}
	}
}

// kcChild is a Keycast reference server in its own process.
type kcChild struct {
	*child
	url, dataDir string
}

var kcListening = regexp.MustCompile(`keycast server listening on (http://[0-9.:]+) \(pid`)

// startKeycastChild starts `loadproof keycast server` on 127.0.0.1:0 with dataDir (bcrypt cost 4)
// and extra environment.
func startKeycastChild(t *testing.T, dataDir string, env ...string) *kcChild {
	t.Helper()
	c := startChild(t, append([]string{"KEYCAST_BCRYPT_COST=4"}, env...),
		"keycast", "server", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	m := c.waitOutput(t, kcListening)
	return &kcChild{child: c, url: m[1], dataDir: dataDir}
}

// lkChild is a LinkKeys reference server in its own process.
type lkChild struct {
	*child
	infoPath string
	info     linkkeys.Info
	metrics  string // http://…/metrics
}

// startLinkKeysChild starts `loadproof linkkeys server` with dir holding its SQLite database and
// info file, a Prometheus endpoint, and lkLimits. Its key is stored encrypted with a passphrase,
// so a server started again on dir presents the same key.
func startLinkKeysChild(t *testing.T, dir string) *lkChild {
	t.Helper()
	env := []string{"DOMAIN_KEY_PASSPHRASE=loadproof fault suite"}
	for k, v := range lkLimits {
		env = append(env, k+"="+v)
	}
	infoPath := filepath.Join(dir, "info.json")
	_ = os.Remove(infoPath)
	c := startChild(t, env, "linkkeys", "server", "--db-path", filepath.Join(dir, "lk.sqlite3"), "--info-file", infoPath,
		"--metrics-addr", "127.0.0.1:0", "--metrics-interval-secs", "1")
	c.waitOutput(t, regexp.MustCompile(`listening on `))
	info, err := linkkeys.ReadInfo(infoPath)
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		MetricsAddr string `json:"metrics_addr"`
	}
	b, _ := os.ReadFile(infoPath)
	if err := json.Unmarshal(b, &extra); err != nil || extra.MetricsAddr == "" {
		t.Fatalf("info file %s has no metrics_addr: %s", infoPath, b)
	}
	return &lkChild{child: c, infoPath: infoPath, info: info, metrics: "http://" + extra.MetricsAddr + "/metrics"}
}

// scrape reads a Prometheus text page and returns the value of every series, by name (for a
// labelled series: name{label="value",…} as the text format writes it).
func scrape(url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			if len(m.GetLabel()) == 0 {
				out[name] = v
			}
		}
	}
	return out, nil
}

// counterAtLeast returns a condition for when: the series name at url is at least n.
func counterAtLeast(url, name string, n float64) func() bool {
	return func() bool {
		m, err := scrape(url)
		return err == nil && m[name] >= n
	}
}

// integrityCheck runs PRAGMA integrity_check on an SQLite file and fails unless it answers "ok".
func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check of %s: %v", path, err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check of %s: %s", path, res)
	}
}

// countRows returns SELECT count(*) FROM table of an SQLite file.
func countRows(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM %s", table)).Scan(&n); err != nil {
		t.Fatalf("counting %s in %s: %v", table, path, err)
	}
	return n
}

// holdSQLiteLock is the body of the sqlite-lock child: it opens the SQLite database at path,
// takes an exclusive lock with BEGIN EXCLUSIVE on its own connection, prints "locked", and holds
// the lock until its stdin closes; then it rolls back and exits.
func holdSQLiteLock(path string) int {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		fmt.Fprintln(os.Stderr, "BEGIN EXCLUSIVE:", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	return 0
}
