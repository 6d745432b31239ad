package keycastload

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

func baseConfig(url string, users int) RunConfig {
	return RunConfig{
		URL:         url + "/",
		Concurrency: 7,
		Scenario:    keycast.ScenarioColdStart,
		Method:      keycast.MethodGetPublicKey,
		Users:       testUsers(users),
	}
}

func TestRunUntilRequestsDoneIsExact(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		f := newFakeServer(t, nil)
		cfg := baseConfig(f.URL, 10)
		cfg.HTTPClient = client
		cfg.Requests = 1000
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		if s.TotalRequests != 1000 || s.SuccessfulRequests != 1000 || f.requests.Load() != 1000 {
			t.Fatalf("total %d success %d server saw %d; want exactly 1000", s.TotalRequests, s.SuccessfulRequests, f.requests.Load())
		}
		if res.Latency().Count() != 1000 {
			t.Fatalf("histogram holds %d samples", res.Latency().Count())
		}
		// cold-start sends request r as user r mod 10: 100 each.
		for i, u := range cfg.Users {
			if got := f.auths["Bearer "+u.UcanToken]; got != 100 {
				t.Fatalf("user %d sent %d requests, want 100", i, got)
			}
		}
		if res.Metadata.URL != f.URL || res.Metadata.Method != "GetPublicKey" || res.Metadata.Scenario != "ColdStart" ||
			res.Metadata.UserCount != 10 || res.Metadata.Concurrency != 7 || res.Metadata.Requests != 1000 {
			t.Fatalf("metadata %+v", res.Metadata)
		}
		if res.ServerMetrics == nil || res.ServerMetrics.Deltas == nil || res.ServerMetrics.Deltas.HTTPRPCRequestsTotal != 1000 {
			t.Fatalf("server metrics %+v", res.ServerMetrics)
		}
		if len(res.Machines) != 1 || res.Machines[0].Target != f.URL {
			t.Fatalf("machine records %+v", res.Machines)
		}
		if len(res.Timeline) < 2 || res.Timeline[len(res.Timeline)-1].RequestsTotal != 1000 {
			t.Fatalf("timeline %+v", res.Timeline)
		}
		if res.Stop != nil {
			t.Fatalf("stop %+v on a run that ended normally", res.Stop)
		}
		// The results survive the file format.
		if _, err := keycastresult.Parse(mustJSON(t, res)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunRequestBodies(t *testing.T) {
	for _, m := range []keycast.Method{keycast.MethodGetPublicKey, keycast.MethodSignEvent, keycast.MethodNIP44Encrypt} {
		t.Run(string(m), func(t *testing.T) {
			f := newFakeServer(t, nil)
			cfg := baseConfig(f.URL, 1)
			cfg.Method, cfg.Requests, cfg.Concurrency = m, 5, 1
			if _, err := Run(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			body := f.bodies[0]
			pk := cfg.Users[0].Pubkey
			switch m {
			case keycast.MethodGetPublicKey:
				if body != `{"method":"get_public_key","params":[]}` {
					t.Fatalf("body %s", body)
				}
			case keycast.MethodSignEvent:
				var ts int64
				want := `{"method":"sign_event","params":[{"content":"Load test %d","created_at":%d,"kind":1,"pubkey":"` + pk + `","tags":[]}]}`
				if _, err := fmt.Sscanf(body, `{"method":"sign_event","params":[{"content":"Load test %d"`, &ts); err != nil ||
					body != fmt.Sprintf(want, ts, ts) {
					t.Fatalf("body %s", body)
				}
			case keycast.MethodNIP44Encrypt:
				rest, ok := strings.CutPrefix(body, `{"method":"nip44_encrypt","params":["`)
				if !ok || len(rest) < 64 || rest[64:] != `","test message for load testing"]}` {
					t.Fatalf("body %s", body)
				}
				if _, err := keycast.ParsePublicKey(rest[:64]); err != nil {
					t.Fatalf("recipient is not a public key: %v", err)
				}
				if f.bodies[1] == body {
					t.Fatal("recipient is reused; upstream draws a fresh one per request")
				}
			}
		})
	}
}

func TestRunClassifiesEveryOutcome(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		answers := []struct {
			status int
			body   string
		}{
			{200, `{"result":"x"}`},
			{200, `{"error":"Operation denied"}`},
			{401, `{"error":"Invalid or expired token. Please log in again."}`},
			{403, `{"error":"Operation denied by policy"}`},
			{429, `{"error":"slow down","code":"rate_limited"}`},
			{503, `{"error":"server at capacity, retry shortly","code":"admission_rejected"}`},
			{503, `{"error":"Database temporarily unavailable"}`},
			{500, `{"error":"Database error"}`},
			{400, `{"error":"Missing event parameter"}`},
			{200, `not json`},
		}
		f := newFakeServer(t, func(n int64, _ *http.Request, _ []byte) (int, string) {
			a := answers[n%int64(len(answers))]
			return a.status, a.body
		})
		cfg := baseConfig(f.URL, 3)
		cfg.HTTPClient = client
		cfg.Requests = int64(len(answers)) * 20
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		want := keycastresult.Summary{TotalRequests: 200, SuccessfulRequests: 20, FailedRequests: 180,
			ErrorsAuth: 40, RateLimitedRequests: 20, IntentionalRejections: 20, ErrorsServer: 40, ErrorsClient: 20, ErrorsOther: 40}
		if s.TotalRequests != want.TotalRequests || s.SuccessfulRequests != want.SuccessfulRequests || s.FailedRequests != want.FailedRequests ||
			s.ErrorsAuth != want.ErrorsAuth || s.RateLimitedRequests != want.RateLimitedRequests || s.IntentionalRejections != want.IntentionalRejections ||
			s.ErrorsServer != want.ErrorsServer || s.ErrorsClient != want.ErrorsClient || s.ErrorsOther != want.ErrorsOther || s.ErrorsNetwork != 0 {
			t.Fatalf("summary %+v", s)
		}
		if s.IntentionalRejectionRate != 0.1 || s.ErrorRate != 0.9 || s.UnintentionalErrorRate != 0.8 {
			t.Fatalf("rates %v %v %v", s.IntentionalRejectionRate, s.ErrorRate, s.UnintentionalErrorRate)
		}
		wantCauses := map[string]int64{"rpc_error": 20, "bad_response_body": 20, "http_401": 20, "http_403": 20, "http_429": 20,
			"http_503_admission_rejected": 20, "http_503": 20, "http_500": 20, "http_400": 20}
		if fmt.Sprint(res.FailureCauses()) != fmt.Sprint(wantCauses) {
			t.Fatalf("causes %v", res.FailureCauses())
		}
	})
}

func TestRunCountsNetworkFailures(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		// A server that accepts and closes every connection: no status, so every request is a network
		// failure, and none is lost.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 4096)
				c.Read(buf)
				c.Close()
			}
		}()
		cfg := baseConfig("http://"+ln.Addr().String(), 2)
		cfg.HTTPClient = client
		cfg.Requests = 50
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.TotalRequests != 50 || res.Summary.ErrorsNetwork != 50 || res.ServerMetrics != nil {
			t.Fatalf("summary %+v, server metrics %+v", res.Summary, res.ServerMetrics)
		}
		if res.FailureCauses()["network_eof"]+res.FailureCauses()["network_econnreset"] != 50 {
			t.Fatalf("causes %v", res.FailureCauses())
		}
	})
}

func TestRunUnreachableTargetIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := baseConfig("http://"+addr, 1)
	cfg.Requests = 1
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("err %v", err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*RunConfig)
		want string
	}{
		{"no users", func(c *RunConfig) { c.Users = nil }, "no users"},
		{"never ends", func(c *RunConfig) { c.Requests, c.Duration = 0, 0 }, "needs --requests"},
		{"bad method", func(c *RunConfig) { c.Method = "sign" }, "unknown method"},
		{"bad scenario", func(c *RunConfig) { c.Scenario = "hot" }, "unknown scenario"},
		{"bad url", func(c *RunConfig) { c.URL = "ftp://x" }, "http://"},
		{"bad rate", func(c *RunConfig) { c.Rate = -1 }, "rate"},
		{"rate-from alone", func(c *RunConfig) { c.RateFrom = 5 }, "rate-from needs --rate"},
		{"bad segment", func(c *RunConfig) { c.Segment = engine.Segment{Index: 2, Count: 2} }, "segment"},
		{"bad stop", func(c *RunConfig) { c.Stop = &StopConditions{MaxUnintentionalErrorRate: 2} }, "between 0 and 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig("http://127.0.0.1:1", 1)
			cfg.Requests = 1
			tc.mod(&cfg)
			_, err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
			var ue *UsageError
			if tc.name != "bad url" && !errors.As(err, &ue) {
				t.Fatalf("err %v (%T) is not a *UsageError", err, err)
			}
		})
	}
}

// TestRunConfigValidate: Validate is the one check of a run's settings: every problem at once, in
// the flags' terms, as a *UsageError; it does not read the users (Run checks them), and it refuses
// a concurrency below 1 that Run would read as its default.
func TestRunConfigValidate(t *testing.T) {
	good := RunConfig{URL: "http://127.0.0.1:1", Concurrency: 3, Duration: time.Second, Scenario: keycast.ScenarioMixed,
		Method: keycast.MethodSignEvent, HTTPClient: HTTPClientStd}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good configuration without users: %v", err)
	}
	bad := good
	bad.Concurrency, bad.Duration, bad.HTTPClient, bad.Scenario, bad.RateFrom = 0, 0, "curl", "hot", 2
	err := bad.Validate()
	var ue *UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("err %v (%T), want a *UsageError", err, err)
	}
	want := []string{"--http-client \"curl\": want fast or std", "--concurrency 0 must be at least 1",
		"--duration 0 runs until the requests are done, so it needs --requests N > 0", "unknown scenario \"hot\"", "rate-from needs --rate"}
	if len(ue.Problems) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(ue.Problems), len(want), err)
	}
	for i, w := range want {
		if p := ue.Problems[i].Error(); !strings.Contains(p, w) || strings.HasPrefix(p, "keycastload: ") {
			t.Errorf("problem %d %q, want it to contain %q without the package prefix", i, p, w)
		}
		if line := strings.Split(err.Error(), "\n")[i]; !strings.HasPrefix(line, "keycastload: ") {
			t.Errorf("line %d %q lacks the package prefix", i, line)
		}
	}
	// Run fills the default concurrency; the users are its to check.
	zero := good
	zero.Concurrency, zero.Users = 0, nil
	if _, err := zero.normalize(); !errors.Is(err, ErrNoUsers) || !errors.As(err, &ue) {
		t.Fatalf("normalize without users: %v, want ErrNoUsers in a *UsageError", err)
	}
	zero.Users = testUsers(1)
	if c, err := zero.normalize(); err != nil || c.Concurrency != DefaultConcurrency {
		t.Fatalf("normalize: %v, concurrency %d", err, c.Concurrency)
	}
}

func TestRunOpenModel(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := baseConfig(f.URL, 4)
	cfg.Rate, cfg.Requests, cfg.Concurrency = 5000, 300, 4
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	om := res.OpenModel
	if res.Summary.TotalRequests != 300 || om == nil || om.Scheduled != 300 || om.Dropped != 0 || om.TargetRate != 5000 ||
		om.LateThresholdMs != 1 || res.UncorrectedLatency() == nil || res.UncorrectedLatency().Count() != 300 {
		t.Fatalf("summary %+v open %+v", res.Summary, om)
	}
	// Latency from the intended time is never shorter than from the actual send.
	if res.Latency().Max() < res.UncorrectedLatency().Max() || res.Metadata.TargetRate != 5000 {
		t.Fatalf("corrected max %v < uncorrected max %v", res.Latency().Max(), res.UncorrectedLatency().Max())
	}
}

func TestRunOpenModelCountsDroppedSends(t *testing.T) {
	// One request in flight at a time against a server that holds each for a while: the schedule
	// falls behind, so sends are late and, when the duration ends, some are dropped.
	f := newFakeServer(t, func(n int64, _ *http.Request, _ []byte) (int, string) {
		if n == 0 {
			time.Sleep(1200 * time.Millisecond) // a server stalled past the end of the run
		}
		return 200, `{"result":"x"}`
	})
	cfg := baseConfig(f.URL, 1)
	cfg.Rate, cfg.Duration, cfg.Concurrency = 200, time.Second, 1
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	om := res.OpenModel
	if res.Summary.TotalRequests != 1 || om.Scheduled != 200 || om.Dropped != 199 {
		t.Fatalf("total %d scheduled %d dropped %d", res.Summary.TotalRequests, om.Scheduled, om.Dropped)
	}
	if res.Latency().Min() < time.Second {
		t.Fatalf("the held request's latency %v does not include the hold", res.Latency().Min())
	}
}

func TestSegmentsMergeExactly(t *testing.T) {
	f := newFakeServer(t, nil)
	var parts []*keycastresult.Results
	for _, seg := range engine.Split(3) {
		cfg := baseConfig(f.URL, 10)
		cfg.Requests, cfg.Concurrency, cfg.Segment = 1001, 6, seg
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, res)
	}
	m, err := keycastresult.Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Summary.TotalRequests != 1001 || m.Latency().Count() != 1001 || m.Metadata.Concurrency != 6 || len(m.Segments) != 3 {
		t.Fatalf("merged %+v concurrency %d segments %v", m.Summary, m.Metadata.Concurrency, m.Segments)
	}
	// The segments together used the users exactly as one whole run: request numbers 0..1000.
	for i, u := range testUsers(10) {
		want := int64(100)
		if i == 0 {
			want = 101
		}
		if got := f.auths["Bearer "+u.UcanToken]; got != want {
			t.Fatalf("user %d sent %d, want %d", i, got, want)
		}
	}
}

func TestRunStopsOnStopCondition(t *testing.T) {
	f := newFakeServer(t, func(int64, *http.Request, []byte) (int, string) { return 500, `{"error":"boom"}` })
	cfg := baseConfig(f.URL, 2)
	cfg.Duration = time.Minute
	cfg.Concurrency = 2
	cfg.Stop = &StopConditions{MaxUnintentionalErrorRate: 0.05, MaxLatencyP95Ms: 10_000}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stop
	if st == nil || st.Reason != StopCondition || st.Metric != MetricUnintErrors || st.Observed != 1 || st.Limit != 0.05 ||
		st.WindowSecs != 5 || st.At == "" {
		t.Fatalf("stop %+v", st)
	}
	if res.Summary.DurationSecs >= 60 || res.Summary.TotalRequests == 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
}

func TestRunEndsOnSignalWithPartialResults(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		ctx, cancel := context.WithCancel(context.Background())
		f := newFakeServer(t, func(n int64, _ *http.Request, _ []byte) (int, string) {
			if n == 100 {
				cancel()
			}
			return 200, `{"result":"x"}`
		})
		cfg := baseConfig(f.URL, 2)
		cfg.HTTPClient = client
		cfg.Duration = time.Minute
		res, err := Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// 101 requests had reached the server when it cancelled; at most Concurrency were still in flight
		// (cut off, uncounted).
		if res.Stop == nil || res.Stop.Reason != StopSignal || res.Summary.TotalRequests < 101-7 || res.Summary.DurationSecs >= 60 {
			t.Fatalf("stop %+v summary %+v", res.Stop, res.Summary)
		}
		if uint64(res.Latency().Count()) != res.Summary.TotalRequests {
			t.Fatal("histogram and counters disagree")
		}
	})
}

func TestEachUserKeepsItsOwnCookies(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		f := newFakeServer(t, nil, cookieSetter)
		cfg := baseConfig(f.URL, 3)
		cfg.HTTPClient = client
		cfg.Requests, cfg.Concurrency = 30, 1
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		// Requests 0..2 are each user's first: no cookie yet. Afterwards user i always sends its own.
		for n, c := range f.cookies {
			want := ""
			if n >= 3 {
				want = fmt.Sprintf("affinity=token-%d", n%3)
			}
			if c != want {
				t.Fatalf("request %d sent Cookie %q, want %q", n, c, want)
			}
		}
	})
}

// cookieSetter answers every request with a Set-Cookie naming the caller's token.
func cookieSetter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			w.Header().Add("Set-Cookie", "affinity="+tok+"; Path=/; HttpOnly")
		}
		h.ServeHTTP(w, r)
	})
}

func TestRunReportsTimeoutAsNetworkFailure(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		block := make(chan struct{})
		defer close(block)
		f := newFakeServer(t, func(n int64, _ *http.Request, _ []byte) (int, string) {
			<-block
			return 200, "{}"
		})
		cfg := baseConfig(f.URL, 1)
		cfg.HTTPClient = client
		cfg.Requests, cfg.Concurrency, cfg.HTTPTimeout = 1, 1, 200*time.Millisecond
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.FailureCauses()["network_timeout"] != 1 {
			t.Fatalf("causes %v", res.FailureCauses())
		}
	})
}

func mustJSON(t *testing.T, r *keycastresult.Results) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNoUsersError(t *testing.T) {
	cfg := baseConfig("http://127.0.0.1:1", 0)
	cfg.Requests = 1
	_, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrNoUsers) {
		t.Fatalf("err %v", err)
	}
}

func TestRunEndsAtItsDurationEvenDuringRampUp(t *testing.T) {
	// Workers still waiting for their ramp-up turn must not hold the run past its duration.
	f := newFakeServer(t, nil)
	cfg := baseConfig(f.URL, 2)
	cfg.Duration, cfg.RampUp, cfg.Concurrency = time.Second, time.Minute, 3
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.DurationSecs >= 30 || res.Summary.TotalRequests == 0 {
		t.Fatalf("duration %v s, %d requests", res.Summary.DurationSecs, res.Summary.TotalRequests)
	}
	// Only worker 0 (ramp delay 0) ever started: user selection still spread its requests.
	if len(f.auths) != 2 {
		t.Fatalf("users seen %v", f.auths)
	}
}

func TestRunOverTLS(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/nostr" || r.Header.Get("Authorization") == "" {
				w.WriteHeader(404)
				return
			}
			w.Header().Set("Set-Cookie", "lb=1")
			io.WriteString(w, `{"result":"ok"}`)
		}))
		srv.EnableHTTP2 = false
		srv.StartTLS()
		defer srv.Close()
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := baseConfig(srv.URL, 2)
		cfg.HTTPClient = client
		cfg.Requests, cfg.TLS = 40, TLSOptions{CACertFile: ca}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.SuccessfulRequests != 40 {
			t.Fatalf("summary %+v causes %v", res.Summary, res.FailureCauses())
		}
	})
}

func TestRunOpenModelRamp(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := baseConfig(f.URL, 3)
	cfg.Rate, cfg.RateFrom, cfg.RampUp, cfg.Requests = 4000, 500, 200*time.Millisecond, 400
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	om := res.OpenModel
	if res.Summary.TotalRequests != 400 || om.RampFrom != 500 || om.RampSecs != 0.2 || om.Scheduled != 400 || om.Dropped != 0 {
		t.Fatalf("summary %+v open %+v", res.Summary, om)
	}
}

// TestSetupConfigValidate: setup's settings are checked once, here: every problem at once as a
// *UsageError; Setup itself reads 0 users and concurrency as the defaults.
func TestSetupConfigValidate(t *testing.T) {
	err := SetupConfig{URL: "ftp://x", Users: 0, Concurrency: 2, Mode: "sql"}.Validate()
	var ue *UsageError
	if !errors.As(err, &ue) || len(ue.Problems) != 3 {
		t.Fatalf("err %v, want a *UsageError with 3 problems", err)
	}
	for _, w := range []string{"--users and --concurrency must be at least 1", "ftp://x", `unknown setup mode "sql"; want db or http`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if err := (SetupConfig{Users: 1, Concurrency: 1}).Validate(); err != nil {
		t.Fatalf("a good setup refused: %v", err)
	}
	if c, err := (SetupConfig{}).normalize(); err != nil || c.Users != DefaultSetupUsers || c.Concurrency != DefaultSetupConcurrency {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}
