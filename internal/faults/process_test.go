//go:build linux && e2e

package faults_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/testwait"
)

// The process scenarios run each reference server in its own process (this test binary re-run as
// `loadproof … server`), kill it (SIGKILL) or stop it (SIGSTOP) while a client loads it, and check
// what the client reports, then that the server's files survived.

// kcCounterAtLeast returns a condition for when: the Keycast server at url has counted at least n
// of the series name.
func kcCounterAtLeast(url, name string, n float64) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, series, err := keycastload.FetchServerMetrics(ctx, url)
		return err == nil && series[name] >= n
	}
}

// kcTimedRun is `keycast run` for a duration: two workers, no ramp, warm-cache.
func kcTimedRun(t *testing.T, url, users string, secs int, timeout time.Duration) (cliRun, *keycastresult.Results) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	r := runCLI(t, 60*time.Second, "keycast", "run", "--url", url, "--users-file", users,
		"--duration", fmt.Sprint(secs), "--concurrency", "2", "--ramp-up", "0", "--scenario", "warm-cache",
		"--report-interval", "1", "--timeout", timeout.String(), "--output", out)
	res := readKC(t, out)
	checkKCTotals(t, res)
	return r, res
}

// kcRecovered checks that a Keycast server answers every request of a short run with users.
func kcRecovered(t *testing.T, url, users string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "after.json")
	r := runCLI(t, 60*time.Second, "keycast", "run", "--url", url, "--users-file", users, "--duration", "0",
		"--requests", "10", "--concurrency", "2", "--ramp-up", "0", "--output", out)
	if s := readKC(t, out).Summary; r.code != 0 || s.SuccessfulRequests != 10 {
		t.Fatalf("the server did not answer every request afterwards: %+v\n%s", s, r)
	}
}

// lkBench is request-bench against info: two connections, hello, secs seconds.
func lkBench(t *testing.T, info string, secs int) (cliRun, linkkeysresult.Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	r := runCLI(t, 60*time.Second, "linkkeys", "request-bench", "--info-file", info, "--workers", "1", "--json", out,
		"--connections", "2", "--duration-secs", fmt.Sprint(secs), "--op", "hello", "--attempt-timeout-secs", "1")
	if r.code != 0 {
		t.Fatalf("request-bench: %s", r)
	}
	return r, readLK(t, out)
}

// lkAnswers checks that a LinkKeys server answers every request of a one-second request-bench.
func lkAnswers(t *testing.T, info string) {
	t.Helper()
	r, res := lkBench(t, info, 1)
	if rq := res.Requests; rq.Completed == 0 || rq.Errors != 0 {
		t.Fatalf("the server did not answer every request: %+v\n%s", rq, r)
	}
}

func TestKilledServer(t *testing.T) {
	t.Parallel()

	t.Run("keycast", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		srv := startKeycastChild(t, dir)
		users, _ := makeUsers(t, srv.url, 2)
		killed := when(t, kcCounterAtLeast(srv.url, keycast.MetricHTTPRPCSuccess, 20), func() { srv.kill(t) })
		r, res := kcTimedRun(t, srv.url, users, 3, 2*time.Second)
		testwait.Recv(t, killed, time.Minute, "the kill of the server")
		s := res.Summary
		// The run ran to its end: exit 0, results written, and they say what happened: the
		// few requests around the kill are network errors (those written before the client learned
		// of it — a written request is never sent again — and connections the kernel still accepted
		// while the process was exiting), every attempt after that a refused connect, none of them
		// a request.
		if r.code != 0 || res.Stop != nil {
			t.Fatalf("a run that outlives its target ends normally (exit 0): %s", r)
		}
		if s.SuccessfulRequests < 20 || s.ErrorsNetwork > 8 || s.FailedRequests != s.ErrorsNetwork || s.CutOffRequests != 0 {
			t.Errorf("want the successes before the kill and at most 8 network errors: %+v", s)
		}
		// A connect can also meet a reset: the kernel completed its handshake on the listening
		// socket just before the process died, and the exit reset it (seen once in CI).
		refused, reset := res.ConnectFailureCauses["network_econnrefused"], res.ConnectFailureCauses["network_econnreset"]
		if s.ConnectFailures == 0 || refused == 0 || refused+reset != int64(s.ConnectFailures) || reset > 8 {
			t.Errorf("the attempts after the kill should be refused connects (a few reset around the kill): %d, causes %v", s.ConnectFailures, res.ConnectFailureCauses)
		}
		onlyCauses(t, res, "network_")
		if !strings.Contains(r.stdout, "onnect failures") {
			t.Errorf("the text report does not mention the connect failures:\n%s", r.stdout)
		}
		// Nothing corrupted: the database checks out and a restarted server serves the same users.
		integrityCheck(t, filepath.Join(dir, keycastserver.SQLiteFileName))
		again := startKeycastChild(t, dir)
		kcRecovered(t, again.url, users)
	})

	t.Run("linkkeys", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		srv := startLinkKeysChild(t, dir)
		killed := when(t, counterAtLeast(srv.metrics, "linkkeys_server_frames_processed_total", 50), func() { srv.kill(t) })
		r, res := lkBench(t, srv.infoPath, 2)
		testwait.Recv(t, killed, time.Minute, "the kill of the server")
		rq := res.Requests
		// Each connection loses the request in flight on it (one I/O error each); every other
		// request was answered.
		if rq.Completed < 50-2 || rq.IOErrors != 2 || rq.Errors != 2 || rq.Sent-rq.Completed > 2 {
			t.Errorf("want one I/O error per connection: %+v\n%s", rq, r)
		}
		if n := res.Causes[linkkeysresult.ClassIO+":EOF"] + res.Causes[linkkeysresult.ClassIO+":ECONNRESET"]; n != 2 {
			t.Errorf("the lost requests should be EOF or ECONNRESET: %v", res.Causes)
		}
		// Nothing corrupted: the database checks out, and a restarted server has the same key.
		integrityCheck(t, filepath.Join(dir, "lk.sqlite3"))
		again := startLinkKeysChild(t, dir)
		if again.info.Fingerprint != srv.info.Fingerprint {
			t.Errorf("the restarted server's key changed: %s, was %s", again.info.Fingerprint, srv.info.Fingerprint)
		}
		lkAnswers(t, again.infoPath)
	})
}

func TestStoppedServer(t *testing.T) {
	t.Parallel()

	t.Run("keycast", func(t *testing.T) {
		t.Parallel()
		srv := startKeycastChild(t, t.TempDir())
		users, _ := makeUsers(t, srv.url, 2)
		stopped := when(t, kcCounterAtLeast(srv.url, keycast.MetricHTTPRPCSuccess, 20), func() { srv.signal(t, syscall.SIGSTOP) })
		const secs, timeout = 3, time.Second
		r, res := kcTimedRun(t, srv.url, users, secs, timeout)
		testwait.Recv(t, stopped, time.Minute, "the SIGSTOP of the server")
		srv.signal(t, syscall.SIGCONT)
		s := res.Summary
		// The run ends within its duration plus the drain (the request timeout, 1 s, being
		// shorter than 5 s); the fetch of the server's counters after it adds at most 5 s.
		drain := min(keycastload.DefaultDrain, timeout)
		if s.DurationSecs > (time.Duration(secs)*time.Second + drain + 500*time.Millisecond).Seconds() {
			t.Errorf("the run took %.2fs of a %ds duration and a %v drain", s.DurationSecs, secs, drain)
		}
		if bound := time.Duration(secs)*time.Second + drain + 5*time.Second + 3*time.Second; r.took > bound {
			t.Errorf("the command took %v (bound %v)", r.took, bound)
		}
		// Requests to the stopped server time out (1 s) or are cut off at the end; none is
		// anything else, and each worker had at least one stuck.
		if r.code != 0 || s.SuccessfulRequests < 20 || s.ErrorsNetwork+s.CutOffRequests < 2 || s.ConnectFailures != 0 {
			t.Errorf("want successes, then timeouts and cut-offs: %+v\n%s", s, r)
		}
		if got := res.FailureCauses()["network_timeout"]; uint64(got) != s.FailedRequests {
			t.Errorf("%d of %d failures are timeouts: %v", got, s.FailedRequests, res.FailureCauses())
		}
		kcRecovered(t, srv.url, users)
	})

	t.Run("linkkeys", func(t *testing.T) {
		t.Parallel()
		srv := startLinkKeysChild(t, t.TempDir())
		stopped := when(t, counterAtLeast(srv.metrics, "linkkeys_server_frames_processed_total", 50), func() { srv.signal(t, syscall.SIGSTOP) })
		r, res := lkBench(t, srv.infoPath, 2)
		testwait.Recv(t, stopped, time.Minute, "the SIGSTOP of the server")
		rq := res.Requests
		// Both connections' requests in flight time out at the end of the drain (duration +
		// the 1 s attempt timeout), one I/O error each.
		if rq.IOErrors != 2 || res.Causes[linkkeysresult.ClassIO+":timeout"] != 2 || rq.Errors != 2 {
			t.Errorf("want one io_error:timeout per connection: %+v causes %v\n%s", rq, res.Causes, r)
		}
		if bound := 2*time.Second + time.Second + 3*time.Second; r.took > bound {
			t.Errorf("request-bench took %v against a stopped server (bound %v)", r.took, bound)
		}
		// A new client against the stopped server fails before its run: the preflight's handshake
		// never answers, and the command says so within its 2 s (and the process's own start, which
		// a busy machine stretches: 4.01 s was seen under a full test suite).
		pre := runCLI(t, 30*time.Second, "linkkeys", "handshake-bench", "--info-file", srv.infoPath, "--workers", "1",
			"--json", filepath.Join(t.TempDir(), "pre.json"), "--duration-secs", "1", "--concurrency", "2", "--attempt-timeout-secs", "1")
		if pre.code != 1 || !strings.Contains(pre.stderr, "before the run: no TLS handshake") || pre.took > 6*time.Second {
			t.Errorf("the preflight should fail the command at once:\n%s", pre)
		}
		// Without it, attempts against the stopped server: the kernel completes the TCP connect,
		// the handshake never answers, each attempt times out, and nothing succeeded: exit 4.
		out := filepath.Join(t.TempDir(), "hs.json")
		h := runCLI(t, 30*time.Second, "linkkeys", "handshake-bench", "--info-file", srv.infoPath, "--workers", "1", "--json", out,
			"--duration-secs", "1", "--concurrency", "2", "--attempt-timeout-secs", "1", "--preflight=false")
		a := readLK(t, out).Attempts
		if h.code != 4 || a.Attempted < 2 || a.Succeeded != 0 || a.Classes[linkkeysresult.ClassTimeout] != a.Attempted {
			t.Errorf("every handshake should time out: %+v\n%s", a, h)
		}
		srv.signal(t, syscall.SIGCONT)
		lkAnswers(t, srv.infoPath)
	})
}
