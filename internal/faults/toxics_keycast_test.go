//go:build linux && e2e

package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// Injected amounts shared by both harnesses' toxic scenarios.
const (
	injectedLatency = 40 * time.Millisecond
	// kcBandwidthKBs is the Keycast bandwidth toxic's rate (toxiproxy's KB is 1000 bytes): a
	// sign_event answer of about 600 bytes takes some 30 ms.
	kcBandwidthKBs = 20
)

// kcRun is `keycast run` through p: count-bounded (-n n, no duration), two workers, no ramp,
// warm-cache (user 0, so at most two connections carry answers at once).
func kcRun(t *testing.T, p *proxy, s *kcServer, n int, timeout time.Duration) (cliRun, *keycastresult.Results) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	r := runCLI(t, 60*time.Second, "keycast", "run", "--url", p.url(), "--users-file", s.usersFile,
		"--duration", "0", "--requests", fmt.Sprint(n), "--concurrency", "2", "--ramp-up", "0",
		"--scenario", "warm-cache", "--method", "sign-event", "--report-interval", "1",
		"--timeout", timeout.String(), "--output", out)
	if r.code != 0 {
		t.Fatalf("keycast run: want exit 0 (the run ended): %s", r)
	}
	res := readKC(t, out)
	checkKCTotals(t, res)
	return r, res
}

// TestToxicsKeycastRun puts each toxic between `keycast run` and the Keycast reference server.
func TestToxicsKeycastRun(t *testing.T) {
	t.Parallel()
	const success = keycast.MetricHTTPRPCSuccess

	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		s := startKeycast(t, keycastserver.Config{}, 1)
		p := newProxy(t, s.Addr)
		p.add(t, toxic{"latency", "downstream", fmt.Sprintf(`{"latency":%d}`, injectedLatency.Milliseconds())})
		before := s.counter(t, success)
		r, res := kcRun(t, p, s, 12, 10*time.Second)
		sm := res.Summary
		if r.code != 0 || sm.SuccessfulRequests != 12 || sm.FailedRequests != 0 {
			t.Fatalf("every request should succeed: %+v\n%s", sm, r)
		}
		if got := s.counter(t, success) - before; got != 12 {
			t.Errorf("the server counted %v successes, the client 12", got)
		}
		if min := time.Duration(sm.LatencyMinMs * float64(time.Millisecond)); min < injectedLatency*99/100 {
			t.Errorf("fastest request %v is below the injected %v", min, injectedLatency)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		t.Parallel()
		s := startKeycast(t, keycastserver.Config{}, 1)
		per := kcResponseBytes(t, s.URL, s.users[0])
		p := newProxy(t, s.Addr)
		p.add(t, toxic{"bandwidth", "downstream", fmt.Sprintf(`{"rate":%d}`, kcBandwidthKBs)})
		before := s.counter(t, success)
		const n = 12
		r, res := kcRun(t, p, s, n, 10*time.Second)
		sm := res.Summary
		if r.code != 0 || sm.SuccessfulRequests != n || sm.FailedRequests != 0 {
			t.Fatalf("every request should succeed: %+v\n%s", sm, r)
		}
		if got := s.counter(t, success) - before; got != n {
			t.Errorf("the server counted %v successes, the client %d", got, n)
		}
		// At most two answers are in the toxic at once, each link at the rate: the run cannot
		// deliver its n answers faster than 2·rate.
		least := float64(n*per) / (2 * kcBandwidthKBs * 1000)
		if sm.DurationSecs < least*0.95 {
			t.Errorf("%d answers of %d bytes arrived in %.3fs; %d KB/s on two connections needs at least %.3fs",
				n, per, sm.DurationSecs, kcBandwidthKBs, least)
		}
	})

	t.Run("slicer", func(t *testing.T) {
		t.Parallel()
		s := startKeycast(t, keycastserver.Config{}, 1)
		p := newProxy(t, s.Addr)
		for _, dir := range []string{"upstream", "downstream"} {
			p.add(t, toxic{"slicer", dir, `{"average_size":1,"size_variation":0,"delay":0}`})
		}
		requests, before := s.counter(t, keycast.MetricHTTPRPCRequests), s.counter(t, success)
		const n = 6
		r, res := kcRun(t, p, s, n, 10*time.Second)
		sm := res.Summary
		if r.code != 0 || sm.SuccessfulRequests != n || sm.FailedRequests != 0 {
			t.Fatalf("every request should survive 1-byte segments both ways: %+v\n%s", sm, r)
		}
		if got := s.counter(t, success) - before; got != n {
			t.Errorf("the server counted %v successes, the client %d", got, n)
		}
		if got := s.counter(t, keycast.MetricHTTPRPCRequests) - requests; got != n {
			t.Errorf("the server parsed %v requests from the 1-byte segments of %d", got, n)
		}
	})

	t.Run("reset_peer mid-run", func(t *testing.T) {
		t.Parallel()
		s := startKeycast(t, keycastserver.Config{}, 1)
		p := newProxy(t, s.Addr)
		// 20 ms a request, so the reset lands well inside the run.
		p.add(t, toxic{"latency", "downstream", `{"latency":20}`})
		before := s.counter(t, success)
		added := when(t, func() bool { return s.counter(t, success)-before >= 8 }, func() {
			p.add(t, toxic{"reset_peer", "upstream", `{"timeout":0}`})
		})
		const n = 40
		r, res := kcRun(t, p, s, n, 10*time.Second)
		testwait.Recv(t, added, time.Minute, "the toxic added mid-run")
		sm := res.Summary
		server := s.counter(t, success) - before
		if r.code != 0 || sm.SuccessfulRequests < 8 || sm.SuccessfulRequests == n {
			t.Fatalf("the reset should land mid-run: %+v\n%s", sm, r)
		}
		if float64(sm.SuccessfulRequests) != server {
			t.Errorf("client successes %d, server %v: a reset request reached the server or a success was not counted", sm.SuccessfulRequests, server)
		}
		// Every request after the reset is a network error: none a success, none lost.
		if sm.TotalRequests != n || sm.ErrorsNetwork != n-sm.SuccessfulRequests || sm.ConnectFailures != 0 || sm.CutOffRequests != 0 {
			t.Errorf("want %d requests = %d successes + %d network errors: %+v", n, sm.SuccessfulRequests, n-sm.SuccessfulRequests, sm)
		}
		// A request written on a kept-alive connection the toxic has just closed meets end of
		// stream and is not sent again (a written request may have reached the server), so it is
		// network_eof, at most one per kept-alive connection (the run's concurrency); every other
		// failure is a fresh connection the toxic resets (SO_LINGER 0).
		causes := res.FailureCauses()
		resets, eofs := causes["network_econnreset"], causes["network_eof"]
		if uint64(resets+eofs) != sm.FailedRequests || resets == 0 || eofs > 4 {
			t.Errorf("%d resets and %d end-of-stream failures of %d: %v", resets, eofs, sm.FailedRequests, causes)
		}
	})

	t.Run("timeout mid-run", func(t *testing.T) {
		t.Parallel()
		s := startKeycast(t, keycastserver.Config{}, 1)
		p := newProxy(t, s.Addr)
		p.add(t, toxic{"latency", "downstream", `{"latency":20}`})
		before := s.counter(t, success)
		added := when(t, func() bool { return s.counter(t, success)-before >= 6 }, func() {
			// Swallow everything the client sends; close a connection only after 2 s, well after
			// the client's 300 ms request timeout.
			p.add(t, toxic{"timeout", "upstream", `{"timeout":2000}`})
		})
		const n = 14
		r, res := kcRun(t, p, s, n, 300*time.Millisecond)
		testwait.Recv(t, added, time.Minute, "the toxic added mid-run")
		sm := res.Summary
		server := s.counter(t, success) - before
		if r.code != 0 || sm.SuccessfulRequests < 6 || sm.SuccessfulRequests == n {
			t.Fatalf("the timeout should land mid-run: %+v\n%s", sm, r)
		}
		if float64(sm.SuccessfulRequests) != server {
			t.Errorf("client successes %d, server %v", sm.SuccessfulRequests, server)
		}
		if sm.TotalRequests != n || sm.ErrorsNetwork != n-sm.SuccessfulRequests {
			t.Errorf("want %d requests = %d successes + %d timeouts: %+v", n, sm.SuccessfulRequests, n-sm.SuccessfulRequests, sm)
		}
		if got := res.FailureCauses()["network_timeout"]; uint64(got) != sm.FailedRequests {
			t.Errorf("%d of %d failures are timeouts: %v", got, sm.FailedRequests, res.FailureCauses())
		}
	})
}

// onlyCauses fails unless every failure cause of res starts with prefix.
func onlyCauses(t *testing.T, res *keycastresult.Results, prefix string) {
	t.Helper()
	var n int64
	for c, v := range res.FailureCauses() {
		if !strings.HasPrefix(c, prefix) {
			t.Errorf("failure cause %q (%d) is not a %s… cause: %v", c, v, prefix, res.FailureCauses())
		}
		n += v
	}
	if uint64(n) != res.Summary.FailedRequests {
		t.Errorf("causes count %d failures, the summary %d", n, res.Summary.FailedRequests)
	}
}

// kcSetup is `keycast setup` (HTTP mode, two registrations at once) of n users through p.
func kcSetup(t *testing.T, p *proxy, n int) (cliRun, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "users.json")
	r := runCLI(t, 60*time.Second, "keycast", "setup", "--url", p.url(), "--mode", "http", "--users", fmt.Sprint(n),
		"--concurrency", "2", "--output", out)
	return r, out
}

// TestToxicsKeycastSetup puts each toxic between `keycast setup` (register, authorize, token
// through net/http on both sides) and the Keycast reference server.
func TestToxicsKeycastSetup(t *testing.T) {
	t.Parallel()
	const n = 3
	// created asserts that setup made every user and the server recorded each registration and
	// authorization once.
	created := func(t *testing.T, s *kcServer, r cliRun, out string, regs, auths float64) {
		t.Helper()
		uf, err := keycast.ReadUsersFile(out)
		if r.code != 0 || err != nil || len(uf.Users) != n {
			t.Fatalf("setup should create %d users: %v\n%s", n, err, r)
		}
		if got := s.counter(t, "keycast_registrations_total") - regs; got != n {
			t.Errorf("the server registered %v users, setup %d", got, n)
		}
		if got := s.counter(t, "keycast_oauth_authorizations_created_total") - auths; got != n {
			t.Errorf("the server created %v authorizations, setup %d", got, n)
		}
	}
	// refused asserts that setup failed every user with a network cause, wrote no users file and
	// that the server registered nobody.
	refused := func(t *testing.T, s *kcServer, r cliRun, out string, regs float64, cause string) {
		t.Helper()
		if r.code != 3 || !strings.Contains(r.stderr, keycast.MsgNoUsersCreated) || !strings.Contains(r.stderr, cause) {
			t.Errorf("want exit 3, %q and the cause %q: %s", keycast.MsgNoUsersCreated, cause, r)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("setup wrote a users file with no user in it")
		}
		if got := s.counter(t, "keycast_registrations_total") - regs; got != 0 {
			t.Errorf("the server registered %v users that setup did not get", got)
		}
	}
	for _, tc := range []struct {
		name   string
		toxics []toxic
		ok     bool
		cause  string
	}{
		{name: "latency", toxics: []toxic{{"latency", "downstream", fmt.Sprintf(`{"latency":%d}`, injectedLatency.Milliseconds())}}, ok: true},
		{name: "bandwidth", toxics: []toxic{{"bandwidth", "downstream", fmt.Sprintf(`{"rate":%d}`, kcBandwidthKBs)}}, ok: true},
		{name: "slicer", toxics: []toxic{{"slicer", "upstream", `{"average_size":1,"size_variation":0,"delay":0}`},
			{"slicer", "downstream", `{"average_size":1,"size_variation":0,"delay":0}`}}, ok: true},
		{name: "reset_peer", toxics: []toxic{{"reset_peer", "upstream", `{"timeout":0}`}}, cause: "register: network_econnreset"},
		// Swallow the request and close after 300 ms: no answer, then end of stream.
		{name: "timeout", toxics: []toxic{{"timeout", "upstream", `{"timeout":300}`}}, cause: "register: network_eof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startKeycast(t, keycastserver.Config{}, 1)
			p := newProxy(t, s.Addr)
			for _, x := range tc.toxics {
				p.add(t, x)
			}
			regs, auths := s.counter(t, "keycast_registrations_total"), s.counter(t, "keycast_oauth_authorizations_created_total")
			r, out := kcSetup(t, p, n)
			if tc.ok {
				created(t, s, r, out, regs, auths)
			} else {
				refused(t, s, r, out, regs, tc.cause)
			}
		})
	}
}
