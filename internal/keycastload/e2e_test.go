package keycastload_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/keycaststore/storetest"
)

// End-to-end tests against the reference server on 127.0.0.1:0.

func setupUsers(t *testing.T, cfg keycastload.SetupConfig) *keycastload.SetupResult {
	t.Helper()
	res, err := keycastload.Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if len(res.File.Users) != cfg.Users || len(res.Failures) != 0 {
		t.Fatalf("setup made %d of %d users; failures %v", len(res.File.Users), cfg.Users, res.Failures)
	}
	return res
}

func TestSetupHTTPThenRunEveryMethod(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	res := setupUsers(t, keycastload.SetupConfig{URL: srv.URL, Users: 6, Concurrency: 3})
	if res.Mode != keycastload.ModeHTTP || res.File.URL != srv.URL || res.File.CreatedAt == "" {
		t.Fatalf("setup result %+v", res)
	}
	for _, u := range res.File.Users {
		if _, err := keycast.ParsePublicKey(u.Pubkey); err != nil || !strings.HasSuffix(u.Email, "@test.local") {
			t.Fatalf("user %+v", u)
		}
		tok, err := keycast.ParseUCAN(u.UcanToken)
		if err != nil || tok.Facts.BunkerPubkey == "" || tok.SelfIssued() {
			t.Fatalf("access token of %s: %v (self-issued %v)", u.Email, err, tok != nil && tok.SelfIssued())
		}
	}
	// The users file round-trips with mode 0600.
	path := filepath.Join(t.TempDir(), "users.json")
	if err := keycast.WriteUsersFile(path, res.File); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v %v", fi.Mode(), err)
	}
	uf, err := keycast.ReadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}

	for _, m := range []keycast.Method{keycast.MethodGetPublicKey, keycast.MethodSignEvent, keycast.MethodNIP44Encrypt} {
		for _, sc := range keycast.Scenarios {
			t.Run(string(m)+"/"+string(sc), func(t *testing.T) {
				r, err := keycastload.Run(context.Background(), keycastload.RunConfig{
					URL: srv.URL, Concurrency: 4, Requests: 60, Scenario: sc, Method: m, Users: uf.Users, Seed: 371,
				})
				if err != nil {
					t.Fatal(err)
				}
				s := r.Summary
				if s.TotalRequests != 60 || s.SuccessfulRequests != 60 {
					t.Fatalf("summary %+v causes %v", s, r.FailureCauses())
				}
				sm := r.ServerMetrics
				if sm == nil || sm.Deltas.HTTPRPCRequestsTotal != 60 || sm.Deltas.HTTPRPCSuccess != 60 {
					t.Fatalf("server metrics %+v", sm)
				}
				if r.Metadata.Seed != 371 || r.Metadata.UserCount != 6 {
					t.Fatalf("metadata %+v", r.Metadata)
				}
			})
		}
	}
}

func TestRegisterMethodRunsTheWholeFlow(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	r, err := keycastload.Run(context.Background(), keycastload.RunConfig{
		URL: srv.URL, Concurrency: 2, Requests: 4, Method: keycast.MethodRegister,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.SuccessfulRequests != 4 || r.Metadata.UserCount != 0 || r.Metadata.Method != "Register" {
		t.Fatalf("summary %+v causes %v metadata %+v", r.Summary, r.FailureCauses(), r.Metadata)
	}
}

func TestSetupDBModeUsersCanSign(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	dbURL := filepath.Join(srv.DataDir, "keycast.sqlite3")
	if _, err := os.Stat(dbURL); err != nil {
		t.Fatalf("reference server's SQLite file: %v", err)
	}
	dbModeUsersCanSign(t, srv, dbURL)
}

func TestSetupDBModeUsersCanSignPostgres(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	srv := kctest.Start(t, keycastserver.Config{DatabaseURL: dbURL})
	dbModeUsersCanSign(t, srv, dbURL)
}

func dbModeUsersCanSign(t *testing.T, srv *kctest.Server, dbURL string) {
	mode, err := keycastload.ChooseMode("", srv.URL, dbURL)
	if err != nil || mode != keycastload.ModeDB {
		t.Fatalf("auto mode %q %v; want db for a 127.0.0.1 URL with a database", mode, err)
	}
	res := setupUsers(t, keycastload.SetupConfig{URL: srv.URL, Users: 7, DatabaseURL: dbURL,
		MasterKeyPath: filepath.Join(srv.DataDir, "master.key")})
	if res.Mode != keycastload.ModeDB {
		t.Fatalf("mode %s", res.Mode)
	}

	// Every DB-mode user signs through the server, and the signature verifies.
	for _, u := range res.File.Users {
		ev := rpc(t, srv.URL, u.UcanToken, `{"method":"sign_event","params":[{"content":"hi","created_at":1700000000,"kind":1,"pubkey":"`+u.Pubkey+`","tags":[]}]}`)
		var signed keycast.Event
		if err := json.Unmarshal(ev, &signed); err != nil {
			t.Fatalf("sign_event result %s: %v", ev, err)
		}
		if err := keycast.VerifyEvent(signed); err != nil || signed.PubKey != u.Pubkey {
			t.Fatalf("DB-mode user %s: event %+v does not verify: %v", u.Email, signed, err)
		}
	}

	r, err := keycastload.Run(context.Background(), keycastload.RunConfig{
		URL: srv.URL, Concurrency: 3, Requests: 70, Scenario: keycast.ScenarioColdStart, Method: keycast.MethodSignEvent,
		Users: res.File.Users,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.SuccessfulRequests != 70 {
		t.Fatalf("summary %+v causes %v", r.Summary, r.FailureCauses())
	}
}

func TestSetupDBModeNeedsTheServersMasterKey(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	_, err := keycastload.Setup(context.Background(), keycastload.SetupConfig{URL: srv.URL, Users: 1, Mode: keycastload.ModeDB,
		DatabaseURL: filepath.Join(srv.DataDir, "keycast.sqlite3"), MasterKeyPath: filepath.Join(t.TempDir(), "absent.key")})
	if err == nil || !strings.Contains(err.Error(), "--master-key-path") {
		t.Fatalf("err %v", err)
	}
}

func TestSetupSummarisesFailuresByCause(t *testing.T) {
	// Nothing listens on a closed port: every registration fails the same way.
	_, err := keycastload.Setup(context.Background(), keycastload.SetupConfig{URL: "http://127.0.0.1:1", Users: 3, Concurrency: 2})
	if err == nil || !strings.Contains(err.Error(), keycast.MsgNoUsersCreated) || !strings.Contains(err.Error(), "3  register: network_econnrefused") {
		t.Fatalf("err %v", err)
	}
}

func TestRunAgainstShedingServerCountsIntentionalRejections(t *testing.T) {
	// One CPU slot and no queue: concurrent sign_event requests are shed with the 503 contract.
	srv := kctest.Start(t, keycastserver.Config{CPUSlots: 1, CPUQueue: -1})
	res := setupUsers(t, keycastload.SetupConfig{URL: srv.URL, Users: 4, Concurrency: 1})
	r, err := keycastload.Run(context.Background(), keycastload.RunConfig{
		URL: srv.URL, Concurrency: 16, Requests: 400, Scenario: keycast.ScenarioColdStart, Method: keycast.MethodSignEvent,
		Users: res.File.Users,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	if s.IntentionalRejections == 0 || s.IntentionalRejections != uint64(r.FailureCauses()["http_503_admission_rejected"]) ||
		s.ErrorsServer != 0 || s.SuccessfulRequests+s.IntentionalRejections != 400 {
		t.Fatalf("summary %+v causes %v", s, r.FailureCauses())
	}
	if s.UnintentionalErrorRate != 0 {
		t.Fatalf("shedding counted as unintentional: %v", s.UnintentionalErrorRate)
	}
}

// rpc posts one /api/nostr call and returns its result.
func rpc(t *testing.T, base, token, body string) json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+keycast.PathNostr, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out keycast.RPCResponse
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || out.Error != "" {
		t.Fatalf("rpc %s: HTTP %d %s", body, resp.StatusCode, b)
	}
	return out.Result
}

// TestSetupHTTPSurvivesShedding: against a server whose bcrypt and token steps queue past the
// admission wait, many steps are shed (503 admission_rejected) and retried; every user must still
// be created (a server that consumed the authorization code before shedding the token step turned
// such retries into 401s).
func TestSetupHTTPSurvivesShedding(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{BcryptCost: 10})
	res, err := keycastload.Setup(context.Background(), keycastload.SetupConfig{
		URL: srv.URL, Users: 80, Concurrency: 16, Mode: keycastload.ModeHTTP,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.File.Users) != 80 {
		t.Fatalf("created %d of 80 users; failures:%s", len(res.File.Users), keycastload.FormatFailures(res.Failures))
	}
}

// TestTwoSetupsInOneSecondDoNotCollide is issue 13 item 5: emails were lt{unix_ts}-{i}@test.local
// (DB mode: loadtest-{unix_ts}-{i}), so a second setup started in the same second met 409s on every
// user (DB mode: a failed batch). Each run's emails now carry a random run id.
func TestTwoSetupsInOneSecondDoNotCollide(t *testing.T) {
	srv := kctest.Start(t, keycastserver.Config{})
	db := keycastload.SetupConfig{URL: srv.URL, Users: 2, Mode: keycastload.ModeDB,
		DatabaseURL: filepath.Join(srv.DataDir, "keycast.sqlite3"), MasterKeyPath: filepath.Join(srv.DataDir, "master.key")}
	for _, cfg := range []keycastload.SetupConfig{{URL: srv.URL, Users: 2, Concurrency: 2, Mode: keycastload.ModeHTTP}, db} {
		t.Run(cfg.Mode, func(t *testing.T) {
			for range 5 {
				sec := time.Now().Unix()
				a, errA := keycastload.Setup(context.Background(), cfg)
				b, errB := keycastload.Setup(context.Background(), cfg)
				if time.Now().Unix() != sec {
					continue // the pair straddled a second: the old scheme would not collide; try again
				}
				if errA != nil || errB != nil {
					t.Fatalf("two setups in one second: %v / %v", errA, errB)
				}
				if len(a.File.Users) != 2 || len(b.File.Users) != 2 {
					t.Fatalf("created %d and %d users; failures %v %v", len(a.File.Users), len(b.File.Users), a.Failures, b.Failures)
				}
				seen := map[string]bool{}
				for _, u := range append(a.File.Users, b.File.Users...) {
					if seen[u.Email] {
						t.Fatalf("email %s used twice", u.Email)
					}
					seen[u.Email] = true
				}
				return
			}
			t.Skip("could not start and finish two setups within one second")
		})
	}
}

// TestSetupThenRunOverTLS: against the reference server serving https with a self-signed
// certificate, setup registers users over the OAuth flow (its redirect URI https on the target's
// own host) and timed runs of both request methods go through the fast client over TLS with
// --ca-cert; the server counts exactly what the client counted, and its fast path served the
// TLS connections.
func TestSetupThenRunOverTLS(t *testing.T) {
	srv := kctest.StartTLS(t, keycastserver.Config{})
	tlsOpts := keycastload.TLSOptions{CACertFile: srv.CAFile}
	res := setupUsers(t, keycastload.SetupConfig{URL: srv.URL, Users: 4, Concurrency: 2, Mode: keycastload.ModeHTTP, TLS: tlsOpts})
	for _, u := range res.File.Users {
		tok, err := keycast.ParseUCAN(u.UcanToken)
		if err != nil || tok.Facts.RedirectOrigin != srv.URL {
			t.Fatalf("user %s: redirect_origin %q (%v), want the target's own https origin %s", u.Email, tok.Facts.RedirectOrigin, err, srv.URL)
		}
	}
	for _, m := range []keycast.Method{keycast.MethodGetPublicKey, keycast.MethodSignEvent} {
		t.Run(string(m), func(t *testing.T) {
			r, err := keycastload.Run(context.Background(), keycastload.RunConfig{
				URL: srv.URL, Concurrency: 4, Duration: 1500 * time.Millisecond, Method: m, Users: res.File.Users, TLS: tlsOpts,
			})
			if err != nil {
				t.Fatal(err)
			}
			s, sm := r.Summary, r.ServerMetrics
			if s.TotalRequests == 0 || s.SuccessfulRequests != s.TotalRequests {
				t.Fatalf("summary %+v causes %v", s, r.FailureCauses())
			}
			if sm == nil || sm.Deltas.HTTPRPCRequestsTotal != uint64(s.TotalRequests) || sm.Deltas.HTTPRPCSuccess != uint64(s.SuccessfulRequests) {
				t.Fatalf("server counted %+v; the client %d requests, %d successful", sm, s.TotalRequests, s.SuccessfulRequests)
			}
			if r.Metadata.TLS == nil || r.Metadata.TLS.CACert != srv.CAFile {
				t.Fatalf("metadata tls %+v", r.Metadata.TLS)
			}
		})
	}
	res2, err := http.DefaultClient.Get(srv.URL + keycast.PathMetrics)
	if err == nil {
		res2.Body.Close()
		t.Fatalf("metrics fetched without trusting the self-signed certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.CertPool}}}
	mr, err := hc.Get(srv.URL + keycast.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	v := keycast.ParsePrometheusValues(body)
	if n := v[`keycast_http_fastpath_connections_total{transport="tls"}`]; n < 4 {
		t.Fatalf("fast path served %d TLS connections; the two runs opened at least 4", n)
	}
}
