//go:build linux && e2e

package faults_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// Bandwidth toxic rates of the LinkKeys scenarios (toxiproxy's KB is 1000 bytes): a handshake's
// server flight of about a kilobyte takes some 50 ms, a hello answer of some 60 bytes 12 ms.
const (
	lkHandshakeKBs = 20
	lkRequestKBs   = 5
)

// lkCase is one LinkKeys client scenario: the server, the proxy in front of it, and the command
// line of the client through the proxy.
type lkCase struct {
	ts   *linkkeysserver.TestServer
	p    *proxy
	info string
	out  string
}

func newLKCase(t *testing.T) *lkCase {
	t.Helper()
	ts := startLinkKeys(t)
	p := newProxy(t, ts.Addr)
	return &lkCase{ts: ts, p: p, info: writeInfo(t, ts.Info(), p.port), out: filepath.Join(t.TempDir(), "result.json")}
}

// run runs a LinkKeys client command (with the info file, one process and the JSON result), and
// returns its outcome, its result and the server's counters before and after (settled).
func (c *lkCase) run(t *testing.T, cmd string, args ...string) (cliRun, linkkeysresult.Result, linkkeysserver.Snapshot, linkkeysserver.Snapshot) {
	t.Helper()
	before := settled(t, c.ts)
	// --preflight=false: these tests count every connection the server sees against the client's
	// attempts, and some toxics fail every connection, the preflight's included.
	all := append([]string{"linkkeys", cmd, "--info-file", c.info, "--workers", "1", "--json", c.out, "--preflight=false"}, args...)
	r := runCLI(t, 30*time.Second, all...)
	if r.code != 0 && r.code != 4 {
		t.Fatalf("linkkeys %s: %s", cmd, r)
	}
	res := readLK(t, c.out)
	if ok := res.Totals["success"]; (r.code == 4) != (ok == 0 && res.Total() > 0) {
		t.Fatalf("linkkeys %s: exit %d with %d successes of %d: a run exits 4 exactly when nothing succeeded\n%s", cmd, r.code, ok, res.Total(), r)
	}
	return r, res, before, settled(t, c.ts)
}

// The attempt clients: connections (hold 0), ddos and handshake-bench, all with two or three
// attempts in flight and a one-second attempt timeout.
var attemptClients = []struct {
	name string
	args []string
	// count is the number of attempts of a count-bounded client; 0 for handshake-bench, which is
	// bounded by its duration.
	count       int64
	concurrency int64
}{
	{"connections", []string{"--count", "6", "--concurrency", "3", "--hold-secs", "0", "--attempt-timeout-secs", "1", "--client-ip-count", "1"}, 6, 3},
	{"ddos", []string{"--sources", "6", "--concurrency", "3", "--attempt-timeout-secs", "1"}, 6, 3},
	{"handshake-bench", []string{"--duration-secs", "1", "--concurrency", "2", "--attempt-timeout-secs", "1"}, 0, 2},
}

// TestToxicsLinkKeysAttempts puts each toxic between the connection-attempt clients (connections,
// ddos, handshake-bench) and the LinkKeys reference server.
func TestToxicsLinkKeysAttempts(t *testing.T) {
	t.Parallel()
	for _, cl := range attemptClients {
		// checkCount asserts the attempt count of a count-bounded client.
		checkCount := func(t *testing.T, a *linkkeysresult.Attempts) {
			t.Helper()
			if cl.count > 0 && a.Attempted != cl.count {
				t.Errorf("%d attempts, want %d", a.Attempted, cl.count)
			}
			if a.Attempted == 0 || a.Succeeded+a.Failed != a.Attempted {
				t.Errorf("attempts do not add up: %+v", a)
			}
		}
		// allSucceed asserts that every attempt succeeded and that the server counted each one.
		allSucceed := func(t *testing.T, res linkkeysresult.Result, before, after linkkeysserver.Snapshot) {
			t.Helper()
			a := res.Attempts
			checkCount(t, a)
			if a.Failed != 0 {
				t.Errorf("%d attempts failed: %v", a.Failed, a.Reasons)
			}
			if got := int64(after.EstablishedTotal - before.EstablishedTotal); got != a.Succeeded {
				t.Errorf("the server completed %d handshakes, the client %d", got, a.Succeeded)
			}
			if got := int64(after.AcceptedConnections - before.AcceptedConnections); got != a.Attempted {
				t.Errorf("the server accepted %d connections, the client attempted %d", got, a.Attempted)
			}
		}

		t.Run(cl.name+"/latency", func(t *testing.T) {
			t.Parallel()
			c := newLKCase(t)
			c.p.add(t, toxic{"latency", "downstream", fmt.Sprintf(`{"latency":%d}`, injectedLatency.Milliseconds())})
			_, res, before, after := c.run(t, cl.name, cl.args...)
			allSucceed(t, res, before, after)
			if min := res.Attempts.Latency.Min(); min < injectedLatency*99/100 {
				t.Errorf("fastest connect+handshake %v is below the injected %v", min, injectedLatency)
			}
		})

		t.Run(cl.name+"/bandwidth", func(t *testing.T) {
			t.Parallel()
			c := newLKCase(t)
			per, _ := lkBytes(t, c.ts, linkkeysload.OpHello)
			c.p.add(t, toxic{"bandwidth", "downstream", fmt.Sprintf(`{"rate":%d}`, lkHandshakeKBs)})
			_, res, before, after := c.run(t, cl.name, cl.args...)
			allSucceed(t, res, before, after)
			// concurrency attempts at most are in the toxic at once, each at the rate.
			least := time.Duration(float64(res.Attempts.Succeeded*per) / float64(cl.concurrency*lkHandshakeKBs*1000) * float64(time.Second))
			if el := time.Duration(res.Elapsed); el < least*95/100 {
				t.Errorf("%d handshakes of %d server bytes in %v; %d KB/s on %d connections needs at least %v",
					res.Attempts.Succeeded, per, el, lkHandshakeKBs, cl.concurrency, least)
			}
		})

		t.Run(cl.name+"/slicer", func(t *testing.T) {
			t.Parallel()
			c := newLKCase(t)
			for _, dir := range []string{"upstream", "downstream"} {
				c.p.add(t, toxic{"slicer", dir, `{"average_size":1,"size_variation":0,"delay":0}`})
			}
			_, res, before, after := c.run(t, cl.name, cl.args...)
			allSucceed(t, res, before, after)
		})

		t.Run(cl.name+"/reset_peer", func(t *testing.T) {
			t.Parallel()
			c := newLKCase(t)
			// Reset every connection as soon as the client sends its ClientHello.
			c.p.add(t, toxic{"reset_peer", "upstream", `{"timeout":0}`})
			_, res, before, after := c.run(t, cl.name, cl.args...)
			a := res.Attempts
			checkCount(t, a)
			if a.Succeeded != 0 || a.Classes[linkkeysresult.ClassTLS] != a.Failed {
				t.Errorf("every attempt should fail in the handshake: %+v", a)
			}
			onlyReasons(t, a, linkkeysresult.ClassTLS+":")
			if got := int64(after.AcceptedConnections - before.AcceptedConnections); got != a.Attempted {
				t.Errorf("the server accepted %d connections, the client attempted %d", got, a.Attempted)
			}
			if after.EstablishedTotal != before.EstablishedTotal {
				t.Errorf("the server completed %d handshakes that the client saw reset", after.EstablishedTotal-before.EstablishedTotal)
			}
		})

		t.Run(cl.name+"/timeout", func(t *testing.T) {
			t.Parallel()
			c := newLKCase(t)
			// Swallow everything the client sends and never close.
			c.p.add(t, toxic{"timeout", "upstream", `{"timeout":0}`})
			r, res, _, _ := c.run(t, cl.name, cl.args...)
			a := res.Attempts
			checkCount(t, a)
			if a.Succeeded != 0 || a.Classes[linkkeysresult.ClassTimeout] != a.Attempted {
				t.Errorf("every attempt should time out: %+v", a)
			}
			// Attempts in waves of `concurrency`, each ending at its one-second timeout.
			waves := max((a.Attempted+cl.concurrency-1)/cl.concurrency, 1)
			if bound := time.Duration(waves)*time.Second + 5*time.Second; r.took > bound {
				t.Errorf("%d timed-out attempts took %v (bound %v)", a.Attempted, r.took, bound)
			}
		})
	}
}

// onlyReasons fails unless every failure reason of a starts with prefix.
func onlyReasons(t *testing.T, a *linkkeysresult.Attempts, prefix string) {
	t.Helper()
	var n int64
	for k, v := range a.Reasons {
		if !strings.HasPrefix(k, prefix) {
			t.Errorf("failure reason %q (%d) is not %s…: %v", k, v, prefix, a.Reasons)
		}
		n += v
	}
	if n != a.Failed {
		t.Errorf("reasons count %d failures, the attempts %d", n, a.Failed)
	}
}

// TestToxicsLinkKeysRequestBench puts each toxic between request-bench (two connections, hello,
// one second) and the LinkKeys reference server.
func TestToxicsLinkKeysRequestBench(t *testing.T) {
	t.Parallel()
	args := []string{"--connections", "2", "--duration-secs", "1", "--op", linkkeysload.OpHello, "--attempt-timeout-secs", "1"}
	// answered asserts that the server answered exactly the requests the client completed.
	answered := func(t *testing.T, rq *linkkeysresult.Requests, before, after linkkeysserver.Snapshot) {
		t.Helper()
		if got := int64(after.FramesProcessed - before.FramesProcessed); got != rq.Completed+rq.Errors-rq.IOErrors {
			t.Errorf("the server processed %d frames, the client has %d answers (%d completed, %d error statuses)",
				got, rq.Completed+rq.Errors-rq.IOErrors, rq.Completed, rq.Errors-rq.IOErrors)
		}
	}
	clean := func(t *testing.T, res linkkeysresult.Result, before, after linkkeysserver.Snapshot) {
		t.Helper()
		rq := res.Requests
		if rq == nil || rq.Completed == 0 || rq.Errors != 0 || rq.Sent != rq.Completed {
			t.Fatalf("every request should succeed: %+v", rq)
		}
		answered(t, rq, before, after)
	}

	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		c := newLKCase(t)
		c.p.add(t, toxic{"latency", "downstream", fmt.Sprintf(`{"latency":%d}`, injectedLatency.Milliseconds())})
		_, res, before, after := c.run(t, "request-bench", args...)
		clean(t, res, before, after)
		if min := res.Requests.Latency.Min(); min < injectedLatency*99/100 {
			t.Errorf("fastest request %v is below the injected %v", min, injectedLatency)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		t.Parallel()
		c := newLKCase(t)
		_, per := lkBytes(t, c.ts, linkkeysload.OpHello)
		c.p.add(t, toxic{"bandwidth", "downstream", fmt.Sprintf(`{"rate":%d}`, lkRequestKBs)})
		_, res, before, after := c.run(t, "request-bench", args...)
		clean(t, res, before, after)
		rq := res.Requests
		least := time.Duration(float64(rq.Completed*per) / float64(2*lkRequestKBs*1000) * float64(time.Second))
		if el := time.Duration(res.Elapsed); el < least*95/100 {
			t.Errorf("%d answers of %d bytes in %v; %d KB/s on 2 connections needs at least %v", rq.Completed, per, el, lkRequestKBs, least)
		}
	})

	t.Run("slicer", func(t *testing.T) {
		t.Parallel()
		c := newLKCase(t)
		for _, dir := range []string{"upstream", "downstream"} {
			c.p.add(t, toxic{"slicer", dir, `{"average_size":1,"size_variation":0,"delay":0}`})
		}
		_, res, before, after := c.run(t, "request-bench", args...)
		clean(t, res, before, after)
	})

	// lostOnePerConnection asserts the outcome of a fault that breaks both connections mid-run:
	// one I/O error per connection (the request in flight on it), of the given reason, and every
	// other request answered and counted by the server.
	lostOnePerConnection := func(t *testing.T, res linkkeysresult.Result, before, after linkkeysserver.Snapshot, reason string) {
		t.Helper()
		rq := res.Requests
		if rq == nil || rq.Completed == 0 {
			t.Fatalf("no request completed before the fault: %+v", rq)
		}
		if rq.IOErrors != 2 || rq.Errors != 2 || rq.Sent != rq.Completed+2 {
			t.Errorf("want one lost request per connection (2 I/O errors, sent = completed + 2): %+v", rq)
		}
		if got := res.Causes[reason]; got != 2 {
			t.Errorf("want 2 %s, causes %v", reason, res.Causes)
		}
		answered(t, rq, before, after)
	}

	t.Run("reset_peer mid-run", func(t *testing.T) {
		t.Parallel()
		c := newLKCase(t)
		base := c.ts.Metrics().FramesProcessed
		added := when(t, func() bool { return c.ts.Metrics().FramesProcessed-base >= 20 }, func() {
			c.p.add(t, toxic{"reset_peer", "upstream", `{"timeout":0}`})
		})
		_, res, before, after := c.run(t, "request-bench", args...)
		testwait.Recv(t, added, time.Minute, "the toxic added mid-run")
		lostOnePerConnection(t, res, before, after, linkkeysresult.ClassIO+":EOF")
	})

	// The regression test of request-bench's unbounded wait: with one request in flight per
	// connection (the seed's loop) it read answers without a deadline, so a server that stopped
	// answering held the run open until Ctrl-C.
	t.Run("timeout mid-run", func(t *testing.T) {
		t.Parallel()
		c := newLKCase(t)
		base := c.ts.Metrics().FramesProcessed
		added := when(t, func() bool { return c.ts.Metrics().FramesProcessed-base >= 20 }, func() {
			c.p.add(t, toxic{"timeout", "upstream", `{"timeout":0}`})
		})
		r, res, before, after := c.run(t, "request-bench", args...)
		testwait.Recv(t, added, time.Minute, "the toxic added mid-run")
		lostOnePerConnection(t, res, before, after, linkkeysresult.ClassIO+":timeout")
		// The duration, then at most the attempt timeout for the answers in flight.
		if bound := time.Second + time.Second + 3*time.Second; r.took > bound {
			t.Errorf("request-bench took %v against a black hole (bound %v)", r.took, bound)
		}
	})
}
