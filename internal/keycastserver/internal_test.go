package keycastserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/testwait"
)

// startInternal runs a server on 127.0.0.1:0 for tests that need its internals.
func startInternal(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.BcryptCost = 4
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		testwait.Recv(t, done, testwait.Long, "Serve's return after Shutdown")
	})
	return s, "http://" + ln.Addr().String()
}

func post(t testing.TB, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// grantToken registers a user and runs the OAuth flow without PKCE.
func grantToken(t testing.TB, base string) (token, pubkey string) {
	t.Helper()
	st, h, b := post(t, base+keycast.PathRegister, `{"email":"shed@test.local","password":"pw"}`, "Origin", base)
	if st != 200 {
		t.Fatalf("register: %d %s", st, b)
	}
	var rr keycast.RegisterResponse
	json.Unmarshal(b, &rr)
	var session string
	for _, c := range h.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(c, "keycast_session="); ok {
			session, _, _ = strings.Cut(v, ";")
		}
	}
	st, _, b = post(t, base+keycast.PathAuthorize, `{"approved":true,"client_id":"loadtest","redirect_uri":"`+base+`/callback","scope":"policy:social"}`,
		"Cookie", "keycast_session="+session)
	if st != 200 {
		t.Fatalf("authorize: %d %s", st, b)
	}
	var ar keycast.AuthorizeResponse
	json.Unmarshal(b, &ar)
	st, _, b = post(t, base+keycast.PathToken, `{"code":"`+ar.Code+`","client_id":"loadtest","redirect_uri":"`+base+`/callback"}`)
	if st != 200 {
		t.Fatalf("token: %d %s", st, b)
	}
	var tr keycast.TokenResponse
	json.Unmarshal(b, &tr)
	return tr.AccessToken, rr.Pubkey
}

func signBody(pubkey string) string {
	b, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, pubkey, time.Now().Unix(), "")
	return string(b)
}

// wantAdmissionRejected checks the exact shedding contract.
func wantAdmissionRejected(t testing.TB, status int, h http.Header, body []byte) {
	t.Helper()
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" ||
		string(body) != `{"error":"server at capacity, retry shortly","code":"admission_rejected"}` {
		t.Errorf("want the 503 admission_rejected contract, got %d Retry-After=%q %s", status, h.Get("Retry-After"), body)
	}
}

func TestSheddingContract(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: -1, QueueTimeout: 50 * time.Millisecond})
	tok, pub := grantToken(t, base)
	auth := []string{"Authorization", "Bearer " + tok}
	if st, _, b := post(t, base+keycast.PathNostr, signBody(pub), auth...); st != 200 {
		t.Fatalf("sign_event with a free slot: %d %s", st, b)
	}

	// Saturated: the only slot is held and nobody may wait.
	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, h, b := post(t, base+keycast.PathNostr, signBody(pub), auth...)
	wantAdmissionRejected(t, st, h, b)
	peer := keycast.MustGenerateSecretKey().Public().Hex()
	st, h, b = post(t, base+keycast.PathNostr, `{"method":"nip44_encrypt","params":["`+peer+`","x"]}`, auth...)
	wantAdmissionRejected(t, st, h, b)
	st, h, b = post(t, base+keycast.PathRegister, `{"email":"second@test.local","password":"pw"}`, "Origin", base)
	wantAdmissionRejected(t, st, h, b)
	// get_public_key needs no CPU slot: a cache hit still answers.
	if st, _, b := post(t, base+keycast.PathNostr, `{"method":"get_public_key","params":[]}`, auth...); st != 200 {
		t.Fatalf("get_public_key while saturated: %d %s", st, b)
	}
	release()

	m := string(must(s.m.appendText(nil)))
	if !strings.Contains(m, `keycast_expensive_resource_rejections_total{outcome="queue_full",resource="cpu"} 3`) {
		t.Errorf("rejections not counted:\n%s", grep(m, "rejections"))
	}
	if !strings.Contains(m, `keycast_http_rpc_operation_duration_seconds_count{method="sign_event",outcome="admission_rejected"} 1`) {
		t.Errorf("histogram outcome missing:\n%s", grep(m, "sign_event"))
	}
}

func TestSheddingQueueTimeout(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: 4, QueueTimeout: 20 * time.Millisecond})
	tok, pub := grantToken(t, base)
	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	st, h, b := post(t, base+keycast.PathNostr, signBody(pub), "Authorization", "Bearer "+tok)
	wantAdmissionRejected(t, st, h, b)
	if !strings.Contains(string(must(s.m.appendText(nil))), `outcome="queue_timeout",resource="cpu"} 1`) {
		t.Error("queue timeout not counted")
	}
}

// TestHandlerTimeout: a request still waiting for a CPU slot when the handler budget ends gets
// 504, not the admission contract.
func TestHandlerTimeout(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: 4, QueueTimeout: time.Minute, HandlerTimeout: 30 * time.Millisecond})
	tok, pub := grantToken(t, base)
	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	st, _, b := post(t, base+keycast.PathNostr, signBody(pub), "Authorization", "Bearer "+tok)
	if st != http.StatusGatewayTimeout || string(b) != `{"error":"RPC request timed out after 30ms"}` {
		t.Fatalf("got %d %s, want 504", st, b)
	}
	if !strings.Contains(string(must(s.m.appendText(nil))), `method="sign_event",outcome="timeout"} 1`) {
		t.Error("timeout outcome not counted")
	}
}

// TestSheddingUnderLoad fires concurrent sign_event at one slot with no queue: every answer is
// either a signed event or the exact 503 contract, never a 500 or a 429.
func TestSheddingUnderLoad(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: -1})
	tok, pub := grantToken(t, base)
	// Hold the only slot until the first request has been shed, so shedding certainly happens;
	// then free it so the rest of the burst competes for it.
	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		ok, shed  int
		firstShed = make(chan struct{})
		once      sync.Once
	)
	start := make(chan struct{})
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, h, b := post(t, base+keycast.PathNostr, signBody(pub), "Authorization", "Bearer "+tok)
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case 200:
				var r struct{ Result keycast.Event }
				if err := json.Unmarshal(b, &r); err != nil || keycast.VerifyEvent(r.Result) != nil {
					t.Errorf("request %d: 200 with a bad event: %s", i, b)
				}
				ok++
			case 503:
				wantAdmissionRejected(t, st, h, b)
				shed++
				once.Do(func() { close(firstShed) })
			default:
				t.Errorf("request %d: status %d %s", i, st, b)
			}
		}()
	}
	close(start)
	testwait.Recv(t, firstShed, testwait.Long, "503 while the slot was held")
	release()
	testwait.WaitGroup(t, &wg, testwait.Long, "answers to all 64 requests")
	if shed == 0 || ok+shed != 64 {
		t.Fatalf("ok %d, shed %d", ok, shed)
	}
	if st, _, b := post(t, base+keycast.PathNostr, signBody(pub), "Authorization", "Bearer "+tok); st != 200 {
		t.Fatalf("after the burst: %d %s", st, b)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := ConfigFromEnv(env())
	if err != nil {
		t.Fatal(err)
	}
	d := c.withDefaults()
	if d.Addr != DefaultAddr || d.HandlerCacheSize != 1_000_000 || d.CPUQueue != 64*d.CPUSlots || d.QueueTimeout != 250*time.Millisecond ||
		d.RPCRatePerSecond != 0 || d.BcryptCost != 12 || d.BodyLimit != 64<<10 || d.TokenLifetime != 24*time.Hour || d.MaxTenants != 100 || d.HeaderTimeout != 10*time.Second ||
		d.BodyTimeout != 30*time.Second || d.MaxConnections < 1 || d.MaxConnections > DefaultMaxConnections || d.MaxConnectionsPerSource != 0 {
		t.Errorf("defaults %+v", d)
	}
	c, err = ConfigFromEnv(env("PORT", "4000", "KEYCAST_CPU_QUEUE", "0", "KEYCAST_CPU_SLOTS", "3", "HANDLER_CACHE_SIZE", "10",
		"KEYCAST_RPC_RATE_PER_SECOND", "2.5", "ALLOWED_ORIGINS", "https://a.example, https://b.example", "DATABASE_URL", "postgres://u@h/db",
		"KEYCAST_QUEUE_TIMEOUT_MS", "5", "TOKEN_EXPIRY_SECONDS", "60", "BUNKER_RELAYS", "wss://r.example", "KEYCAST_MAX_TENANTS", "0", "KEYCAST_HEADER_TIMEOUT_MS", "2500",
		"KEYCAST_BODY_TIMEOUT_MS", "700", "KEYCAST_MAX_CONNECTIONS", "5", "KEYCAST_MAX_CONNECTIONS_PER_SOURCE", "3"))
	if err != nil {
		t.Fatal(err)
	}
	d = c.withDefaults()
	if d.Addr != "127.0.0.1:4000" || d.CPUQueue != 0 || d.CPUSlots != 3 || d.HandlerCacheSize != 10 || d.RPCRatePerSecond != 2.5 ||
		d.RPCBurst != 2.5 || len(d.AllowedOrigins) != 2 || d.QueueTimeout != 5*time.Millisecond || d.TokenLifetime != time.Minute ||
		len(d.BunkerRelays) != 1 || d.MaxTenants != 0 || d.HeaderTimeout != 2500*time.Millisecond ||
		d.BodyTimeout != 700*time.Millisecond || d.MaxConnections != 5 || d.MaxConnectionsPerSource != 3 {
		t.Errorf("parsed %+v", d)
	}
	_, err = ConfigFromEnv(env("PORT", "0", "HANDLER_CACHE_SIZE", "-1", "KEYCAST_CPU_SLOTS", "x", "KEYCAST_CPU_QUEUE", "-3",
		"KEYCAST_RPC_RATE_PER_SECOND", "0", "SERVER_NSEC", "nsec1bad", "ALLOWED_ORIGINS", "not a url", "KEYCAST_BCRYPT_COST", "99",
		"BUNKER_RELAYS", "http://x", "DATABASE_URL", "postgres://", "KEYCAST_MAX_TENANTS", "-1", "KEYCAST_HEADER_TIMEOUT_MS", "99",
		"KEYCAST_BODY_TIMEOUT_MS", "1e3", "KEYCAST_MAX_CONNECTIONS", "0", "KEYCAST_MAX_CONNECTIONS_PER_SOURCE", "-1"))
	if err == nil {
		t.Fatal("bad environment accepted")
	}
	for _, name := range []string{"PORT", "HANDLER_CACHE_SIZE", "KEYCAST_CPU_SLOTS", "KEYCAST_CPU_QUEUE", "KEYCAST_RPC_RATE_PER_SECOND",
		"SERVER_NSEC", "ALLOWED_ORIGINS", "KEYCAST_BCRYPT_COST", "BUNKER_RELAYS", "DATABASE_URL", "KEYCAST_MAX_TENANTS", "KEYCAST_HEADER_TIMEOUT_MS",
		"KEYCAST_BODY_TIMEOUT_MS", "KEYCAST_MAX_CONNECTIONS", "KEYCAST_MAX_CONNECTIONS_PER_SOURCE"} {
		if !strings.Contains(err.Error(), name+"=") {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	if strings.Contains(err.Error(), "nsec1bad") {
		t.Error("the error shows the secret key")
	}
	if _, err := ConfigFromEnv(env("KEYCAST_RPC_BURST", "5")); err == nil || !strings.Contains(err.Error(), "KEYCAST_RPC_RATE_PER_SECOND") {
		t.Errorf("burst without rate: %v", err)
	}
}

func TestHandlerCache(t *testing.T) {
	mk := func(id int64, key byte) *rpcHandler {
		return &rpcHandler{key: tokenKey{key}, auth: &authState{id: id}, tokenExp: 1 << 40}
	}
	sec := int64(time.Second)
	c := newHandlerCache(2, time.Hour, time.Minute)
	now := int64(1000) * sec
	if !c.put(mk(1, 1), now) || !c.put(mk(1, 2), now) {
		t.Fatal("put refused")
	}
	if _, st := c.get(tokenKey{1}, now); st != cacheHit {
		t.Fatal("miss after put")
	}
	// Capacity 2: a third entry evicts the least recently used (key 2) and the index follows.
	c.put(mk(2, 3), now)
	if _, st := c.get(tokenKey{2}, now); st != cacheMiss {
		t.Fatal("LRU did not evict the oldest")
	}
	c.mu.Lock()
	if len(c.byAuth[1].keys) != 1 {
		t.Errorf("index of authorization 1: %v", c.byAuth[1].keys)
	}
	c.mu.Unlock()
	// Revocation evicts every handler of the authorization and blocks re-caching it.
	if n := c.revoke([]int64{1}, now); n != 1 {
		t.Errorf("revoke evicted %d", n)
	}
	if _, st := c.get(tokenKey{1}, now); st != cacheMiss {
		t.Error("revoked handler still cached")
	}
	if c.put(mk(1, 9), now) {
		t.Error("a handler of a revoked authorization was cached (stale load after revocation)")
	}
	// A handler whose state was revoked after it was cached is refused on the hit.
	h := mk(3, 4)
	c.put(h, now)
	h.auth.revoked.Store(true)
	if _, st := c.get(tokenKey{4}, now); st != cacheInvalid {
		t.Error("revoked state not checked on hit")
	}
	// Idle expiry on get and in the sweep.
	c.put(mk(4, 5), now)
	if _, st := c.get(tokenKey{5}, now+int64(time.Hour)+1); st != cacheMiss {
		t.Error("idle entry served")
	}
	c.put(mk(5, 6), now)
	c.put(mk(6, 7), now+int64(30*time.Minute))
	if n := c.sweep(now+int64(time.Hour)+sec, 10); n != 1 || c.len() != 1 {
		t.Errorf("sweep dropped %d, %d left", n, c.len())
	}
	// Authorization expiry and token expiry on hit.
	e := mk(7, 8)
	e.auth.expiresAt = now + sec
	c.put(e, now)
	if _, st := c.get(tokenKey{8}, now+2*sec); st != cacheInvalid {
		t.Error("expired authorization served")
	}
	f := mk(8, 10)
	f.tokenExp = now/sec + 1
	c.put(f, now)
	if _, st := c.get(tokenKey{10}, now+3*sec); st != cacheInvalid {
		t.Error("expired token served")
	}
}

func TestTenantDomain(t *testing.T) {
	for _, tt := range []struct{ host, want string }{
		{"localhost:3000", "localhost"},
		{"Example.COM", "example.com"},
		{"127.0.0.1:80", "127.0.0.1"},
		{"[::1]:3000", "::1"},
		{"", ""},
		{"bad host", ""},
		{"a/b", ""},
	} {
		got, err := tenantDomain(tt.host)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("tenantDomain(%q) = %q, %v; want %q", tt.host, got, err, tt.want)
		}
	}
	if _, err := tenantDomain(""); err == nil || err.Error() != keycast.MsgMissingHost {
		t.Errorf("missing host: %v", err)
	}
}

func TestParseRPC(t *testing.T) {
	for _, tt := range []struct {
		body   string
		method string
		params int
		status int
	}{
		{`{"method":"get_public_key","params":[]}`, "get_public_key", 0, 0},
		{`{"method": "get_public_key"}`, "get_public_key", 0, 0},
		{`{"method":"sign_event","params":[{"kind":1}]}`, "sign_event", 1, 0},
		{`{"method":"x","params":null}`, "x", 0, 0},
		{`{"params":[]}`, "", 0, 422},
		{`{"method":1}`, "", 0, 422},
		{`{"method":"x","params":{}}`, "", 0, 422},
		{`[]`, "", 0, 422},
		{`{"method":`, "", 0, 400},
		{``, "", 0, 400},
	} {
		c, err := parseRPC([]byte(tt.body))
		var be *bodyError
		switch {
		case tt.status != 0:
			if !errors.As(err, &be) || be.status != tt.status {
				t.Errorf("parseRPC(%s): %v, want status %d", tt.body, err, tt.status)
			}
		case err != nil || c.method != tt.method || len(c.params) != tt.params:
			t.Errorf("parseRPC(%s) = %+v, %v", tt.body, c, err)
		}
	}
}

func FuzzParseRPC(f *testing.F) {
	for _, s := range []string{`{"method":"get_public_key","params":[]}`, `{"method":"sign_event","params":[{"kind":1,"content":"x"}]}`,
		`{"method":"nip44_encrypt","params":["ab","cd"]}`, `{"method":null}`, `{`, `[]`, `{"params":[1,2,3]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseRPC(b)
		if err != nil {
			var be *bodyError
			if !errors.As(err, &be) || (be.status != 400 && be.status != 422) {
				t.Fatalf("parseRPC error without a 400/422 status: %v", err)
			}
			return
		}
		if c.idx < 0 || c.idx > mUnknown || (c.idx != mUnknown && rpcMethodLabels[c.idx] != c.method) {
			t.Fatalf("method %q mapped to index %d", c.method, c.idx)
		}
		// Every accepted body's params reach the parameter readers without panics.
		stringParam(c.params, 0)
		stringParam(c.params, 1)
		if len(c.params) > 0 {
			keycast.ParseUnsignedEvent(c.params[0])
		}
	})
}

// FuzzFastRPC checks that whatever the single-pass scanner accepts, encoding/json decodes to
// the same call.
func FuzzFastRPC(f *testing.F) {
	for _, s := range []string{`{"method":"get_public_key","params":[]}`, `{"method":"sign_event","params":[{"kind":1,"content":"x","tags":[["a"]]}]}`,
		`{"method":"nip44_encrypt","params":["ab","cd"]}`, ` {"params":[1,-2.5e3,true,null,{"a":[]}],"method":"x"} `, `{"method":"a\u00e9"}`,
		`{"method":"x","params":["\ud800"]}`, `{"method":"x","method":"y"}`, `{"METHOD":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastRPC(b)
		if !ok {
			return
		}
		var wire struct {
			Method *string           `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if !json.Valid(b) || json.Unmarshal(b, &wire) != nil || wire.Method == nil {
			t.Fatalf("fastRPC accepted %q, encoding/json does not", b)
		}
		if *wire.Method != fast.method || len(wire.Params) != len(fast.params) {
			t.Fatalf("fastRPC %q/%d, encoding/json %q/%d for %q", fast.method, len(fast.params), *wire.Method, len(wire.Params), b)
		}
		for i := range wire.Params {
			if !bytes.Equal(wire.Params[i], fast.params[i]) {
				t.Fatalf("param %d: fastRPC %q, encoding/json %q", i, fast.params[i], wire.Params[i])
			}
		}
	})
}

func FuzzDecodeJSONBytes(f *testing.F) {
	for _, s := range []string{`{"email":"a@b.c","password":"p"}`, `{"email":null}`, `{"email":"a","password":"b","nsec":"x","relays":["r"]}`, `{`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req keycast.RegisterRequest
		err := decodeJSONBytes(b, &req, "email", "password")
		if err == nil {
			if !json.Valid(b) || !bytes.Contains(b, []byte(`"email"`)) {
				t.Fatalf("accepted %q", b)
			}
			return
		}
		var be *bodyError
		if !errors.As(err, &be) || (be.status != 400 && be.status != 422) {
			t.Fatalf("error without a 400/422 status: %v", err)
		}
	})
}

func FuzzTenantDomain(f *testing.F) {
	for _, s := range []string{"localhost:3000", "[::1]:80", "example.com", "", "a b", "x:y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		d, err := tenantDomain(host)
		if err != nil {
			return
		}
		if d == "" || len(d) > 253 || strings.ToLower(d) != d {
			t.Fatalf("tenantDomain(%q) = %q", host, d)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func FuzzEventFast(f *testing.F) {
	signer := keycast.NewSigner(keycast.MustGenerateSecretKey())
	pub := signer.Public().Hex()
	body, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, pub, 1700000000, "")
	call, _ := parseRPC(body)
	f.Add([]byte(call.params[0]))
	for _, s := range []string{
		`{"pubkey":"` + pub + `","created_at":1,"kind":7,"tags":[["e","x"]],"content":"+","id":"` + strings.Repeat("A", 64) + `"}`,
		`{"pubkey":"` + pub + `","created_at":-1,"kind":1,"tags":[],"content":""}`,
		`{"pubkey":"` + pub + `","created_at":1,"kind":65536,"tags":[],"content":""}`,
		`{"pubkey":"` + pub + `","created_at":1,"kind":1,"tags":[null],"content":""}`,
		`{"pubkey":"` + strings.ToUpper(pub) + `","created_at":1,"kind":1,"tags":[],"content":""}`,
		`{"PUBKEY":"` + pub + `","created_at":1.5,"kind":1,"tags":[],"content":""}`,
		`"{\"pubkey\":\"` + pub + `\"}"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		full, err := keycast.ParseUnsignedEvent(raw)
		gj, _ := json.Marshal(full)
		for name, parse := range map[string]func(json.RawMessage, string) (keycast.UnsignedEvent, bool){"fastEvent": fastEvent, "fastEventObject": fastEventObject} {
			fast, ok := parse(raw, pub)
			if !ok {
				continue
			}
			if err != nil {
				t.Fatalf("%s accepted %q, the full parser refused it: %v", name, raw, err)
			}
			if fj, _ := json.Marshal(fast); !bytes.Equal(fj, gj) {
				t.Fatalf("%s gave %s, the full parser %s for %q", name, fj, gj, raw)
			}
		}
	})
}

// TestConcurrentMissesCoalesce: a burst of first requests with one token must cost one handler
// load (one CPU slot), not one each. With the only slot held and room for one waiter, uncoalesced
// misses would overflow the queue and be shed; coalesced, every request is answered.
func TestConcurrentMissesCoalesce(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: 1, QueueTimeout: time.Minute})
	tok, _ := grantToken(t, base)
	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	before := s.m.rpcRequests.Load()
	const n = 16
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _, _ = post(t, base+keycast.PathNostr, `{"method":"get_public_key","params":[]}`, "Authorization", "Bearer "+tok)
		}()
	}
	// Every request has reached the RPC handler and the one load is waiting for the slot.
	testwait.Eventually(t, testwait.Long, "every request at the RPC handler and one load waiting for the slot", func() bool {
		return s.m.rpcRequests.Load()-before >= n && s.gate.Waiting() >= 1
	})
	release()
	testwait.WaitGroup(t, &wg, testwait.Long, "answers to all requests")
	for i, st := range statuses {
		if st != 200 {
			t.Errorf("request %d: status %d, want 200 (misses for one token share one load)", i, st)
		}
	}
}

// TestShedTokenExchangeKeepsTheCode: a token exchange shed for lack of CPU must not consume the
// authorization code, so the client's retry (as Retry-After tells it) succeeds.
func TestShedTokenExchangeKeepsTheCode(t *testing.T) {
	s, base := startInternal(t, Config{CPUSlots: 1, CPUQueue: -1})
	st, h, b := post(t, base+keycast.PathRegister, `{"email":"retry@test.local","password":"pw"}`, "Origin", base)
	if st != 200 {
		t.Fatalf("register: %d %s", st, b)
	}
	var session string
	for _, c := range h.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(c, "keycast_session="); ok {
			session, _, _ = strings.Cut(v, ";")
		}
	}
	st, _, b = post(t, base+keycast.PathAuthorize, `{"approved":true,"client_id":"loadtest","redirect_uri":"`+base+`/callback","scope":"policy:social"}`,
		"Cookie", "keycast_session="+session)
	if st != 200 {
		t.Fatalf("authorize: %d %s", st, b)
	}
	var ar keycast.AuthorizeResponse
	json.Unmarshal(b, &ar)
	tokenBody := `{"code":"` + ar.Code + `","client_id":"loadtest","redirect_uri":"` + base + `/callback"}`

	release, err := s.gate.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, h, b = post(t, base+keycast.PathToken, tokenBody)
	wantAdmissionRejected(t, st, h, b)
	release()
	if st, _, b = post(t, base+keycast.PathToken, tokenBody); st != 200 {
		t.Fatalf("retry after shedding: %d %s, want 200 (the shed exchange must not consume the code)", st, b)
	}
	if st, _, b = post(t, base+keycast.PathToken, tokenBody); st != 401 {
		t.Fatalf("third use of the code: %d %s, want 401 (single use)", st, b)
	}
}

// FuzzConfigFromEnv: any environment either configures a server whose defaults are sane or is
// refused with errors that each name one of the variables read.
func FuzzConfigFromEnv(f *testing.F) {
	names := []string{"PORT", "DATABASE_URL", "SERVER_NSEC", "MASTER_KEY_PATH", "ALLOWED_ORIGINS", "HANDLER_CACHE_SIZE",
		"TOKEN_EXPIRY_SECONDS", "BUNKER_RELAYS", "HTTP_BODY_LIMIT", "KEYCAST_CPU_SLOTS", "KEYCAST_CPU_QUEUE",
		"KEYCAST_QUEUE_TIMEOUT_MS", "KEYCAST_RPC_RATE_PER_SECOND", "KEYCAST_RPC_BURST", "KEYCAST_BCRYPT_COST", "KEYCAST_FAST_PATH",
		"KEYCAST_MAX_TENANTS", "KEYCAST_HEADER_TIMEOUT_MS", "KEYCAST_BODY_TIMEOUT_MS", "KEYCAST_MAX_CONNECTIONS", "KEYCAST_MAX_CONNECTIONS_PER_SOURCE"}
	f.Add(uint8(0), "3000", uint8(9), "4")
	f.Add(uint8(10), "-1", uint8(12), "1e9")
	f.Add(uint8(4), "http://a, wss://b", uint8(15), "maybe")
	f.Add(uint8(16), "0", uint8(16), "1000001")
	f.Add(uint8(16), "+7", uint8(0), "x")
	f.Add(uint8(17), "99", uint8(17), "600000")
	f.Add(uint8(18), "100", uint8(19), "0")
	f.Add(uint8(19), "1000000", uint8(18), "600001")
	f.Add(uint8(20), "0", uint8(20), "-5")
	f.Fuzz(func(t *testing.T, i uint8, v string, j uint8, w string) {
		env := map[string]string{names[int(i)%len(names)]: v, names[int(j)%len(names)]: w}
		c, err := ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				line = strings.TrimSpace(line)
				if line == "keycastserver: bad configuration:" {
					continue
				}
				ok := false
				for _, n := range names {
					if strings.HasPrefix(line, n) {
						ok = true
					}
				}
				if !ok {
					t.Fatalf("error line %q names no variable", line)
				}
			}
			return
		}
		d := c.withDefaults()
		if d.CPUSlots < 1 || d.HandlerCacheSize < 1 || d.BodyLimit < 1 || d.QueueTimeout <= 0 || d.BcryptCost < 4 || d.BcryptCost > 31 ||
			d.MaxTenants < 0 || d.MaxTenants > 1_000_000 || d.HeaderTimeout < 100*time.Millisecond || d.HeaderTimeout > 10*time.Minute ||
			d.BodyTimeout < 100*time.Millisecond || d.BodyTimeout > 10*time.Minute || d.MaxConnections < 1 || d.MaxConnections > 1_000_000 ||
			d.MaxConnectionsPerSource < 0 || d.MaxConnectionsPerSource > 1_000_000 {
			t.Fatalf("accepted %v into a config with bad defaults: %+v", env, d)
		}
	})
}

// FuzzSurrogateProblem: the lone-surrogate scan never panics, reports a position inside the
// text, and misses nothing encoding/json would have turned into U+FFFD.
func FuzzSurrogateProblem(f *testing.F) {
	for _, s := range []string{`"\ud800"`, `{"a":"\udc00"}`, `["\ud83d\ude00","\\ud800"]`, `"\ud800\u0041"`, `"\ud800\n"`,
		`{"\ud800":1}`, `"x\\"`, `"\"\ud800"`, `"\uFFFD"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !utf8.Valid(b) {
			return
		}
		p := surrogateProblem(b)
		if p != "" {
			var msg string
			var line, col int
			if i := strings.Index(p, " at line "); i < 0 {
				t.Fatalf("%q: message %q has no position", b, p)
			} else if _, err := fmt.Sscanf(p[i:], " at line %d column %d", &line, &col); err != nil || line < 1 || col < 0 || col > len(b) {
				t.Fatalf("%q: bad position in %q", b, p)
			} else {
				msg = p[:i]
			}
			if msg != "lone leading surrogate in hex escape" && msg != "unexpected end of hex escape" {
				t.Fatalf("%q: message %q", b, p)
			}
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(v); strings.ContainsRune(s, utf8.RuneError) &&
			!bytes.Contains(bytes.ToLower(b), []byte("fffd")) && !bytes.Contains(b, []byte("\uFFFD")) {
			t.Fatalf("%q decodes to U+FFFD but no lone surrogate was reported", b)
		}
	})
}

// TestConnTableEvictsStalestWaiting: eviction takes the connection that has made no progress
// the longest among those waiting on their client (head, body, idle), never one being served;
// progress moves a connection back only once its place is refileEvery old; the reason is what
// it was waiting for.
func TestConnTableEvictsStalestWaiting(t *testing.T) {
	ms := int64(time.Millisecond)
	type step struct {
		op    string // "add", "state", "progress", "evict", "remove"
		name  string // the node; for evict the one expected ("" = none)
		st    int32  // state for add and state
		at    int64  // ms
		cause string // evict: the reason expected
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"oldest first, with its reason", []step{
			{op: "add", name: "a", st: csBody, at: 0}, {op: "add", name: "b", st: csHead, at: 1}, {op: "add", name: "c", st: csIdle, at: 2},
			{op: "evict", name: "a", at: 10, cause: "stalled_body"}, {op: "evict", name: "b", at: 10, cause: "stalled_head"},
			{op: "evict", name: "c", at: 10, cause: "idle"}, {op: "evict", name: "", at: 10},
		}},
		{"a connection being served is skipped", []step{
			{op: "add", name: "a", st: csBusy, at: 0}, {op: "add", name: "b", st: csIdle, at: 1},
			{op: "evict", name: "b", at: 5, cause: "idle"}, {op: "evict", name: "", at: 5},
			// Once served and idle again it is evictable, filed where the scan moved it.
			{op: "state", name: "a", st: csIdle}, {op: "add", name: "c", st: csHead, at: 6},
			{op: "evict", name: "a", at: 7, cause: "idle"},
		}},
		{"progress within refileEvery keeps the place", []step{
			{op: "add", name: "a", st: csIdle, at: 0}, {op: "add", name: "b", st: csIdle, at: 1},
			{op: "progress", name: "a", at: 100}, {op: "evict", name: "a", at: 200, cause: "idle"},
		}},
		{"progress past refileEvery moves to the tail", []step{
			{op: "add", name: "a", st: csIdle, at: 0}, {op: "add", name: "b", st: csHead, at: 1},
			{op: "progress", name: "a", at: 300}, {op: "evict", name: "b", at: 400, cause: "stalled_head"},
			{op: "evict", name: "a", at: 400, cause: "idle"},
		}},
		{"closed connections are gone", []step{
			{op: "add", name: "a", st: csIdle, at: 0}, {op: "add", name: "b", st: csIdle, at: 1}, {op: "remove", name: "a"},
			{op: "evict", name: "b", at: 2, cause: "idle"}, {op: "evict", name: "", at: 2},
		}},
	}
	for _, tt := range tests {
		tab := newConnTable(0)
		nodes := map[string]*connNode{}
		for i, s := range tt.steps {
			switch s.op {
			case "add":
				nodes[s.name] = &connNode{}
				if !tab.add(nodes[s.name], s.st, s.at*ms) {
					t.Fatalf("%s: step %d: add refused without a per-source limit", tt.name, i)
				}
			case "state":
				nodes[s.name].state.Store(s.st)
			case "progress":
				tab.progress(nodes[s.name], s.at*ms)
			case "remove":
				tab.remove(nodes[s.name])
			case "evict":
				n, reason := tab.evict(s.at * ms)
				got := ""
				for name, m := range nodes {
					if m == n {
						got = name
					}
				}
				if got != s.name || reason != s.cause {
					t.Fatalf("%s: step %d: evicted %q (%q), want %q (%q)", tt.name, i, got, reason, s.name, s.cause)
				}
				if n != nil && (n.state.Load() != csGone || n.next != nil) {
					t.Fatalf("%s: step %d: the evicted node is still in the table", tt.name, i)
				}
			}
		}
	}
	// However many are served, an eviction looks at no more than evictScan of them.
	tab := newConnTable(0)
	for range 10 * evictScan {
		tab.add(&connNode{}, csBusy, 0)
	}
	last := &connNode{}
	tab.add(last, csIdle, 0)
	evictions := 0
	for range 20 {
		if n, _ := tab.evict(ms); n != nil {
			if n != last {
				t.Fatal("evicted a connection being served")
			}
			evictions++
		}
	}
	if evictions != 1 || tab.len() != 10*evictScan {
		t.Errorf("%d served and 1 idle: %d evictions, %d left; want the idle one only", 10*evictScan, evictions, tab.len())
	}
}

// TestConnTablePerSource: with a per-source limit, a source at it is refused until one of its
// connections closes or is evicted; other sources are not affected.
func TestConnTablePerSource(t *testing.T) {
	tab := newConnTable(2)
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	mk := func(src netip.Addr) *connNode { return &connNode{src: src} }
	a1, a2 := mk(a), mk(a)
	if !tab.add(a1, csIdle, 0) || !tab.add(a2, csIdle, 1) {
		t.Fatal("refused within the limit")
	}
	if tab.add(mk(a), csHead, 2) {
		t.Fatal("a third connection from one source accepted with a limit of 2")
	}
	if !tab.add(mk(b), csHead, 2) {
		t.Fatal("another source refused")
	}
	tab.remove(a1)
	tab.remove(a1) // closing twice counts once
	if !tab.add(mk(a), csHead, 3) || tab.add(mk(a), csHead, 3) {
		t.Fatal("after one closed: want exactly one more admitted")
	}
	if n, _ := tab.evict(4); n != a2 {
		t.Fatal("did not evict the stalest")
	}
	if !tab.add(mk(a), csHead, 5) {
		t.Fatal("refused after an eviction freed a place")
	}
	if got := sourceOf(&net.TCPConn{}); got.IsValid() {
		t.Errorf("sourceOf a connection without an address = %v, want none", got)
	}
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.7:4000", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:4000", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:4000", "2001:db8:1:2::"}, // an IPv6 source is its /64
	} {
		ap := netip.MustParseAddrPort(tt.remote)
		if got := sourceOf(addrConn{ra: net.TCPAddrFromAddrPort(ap)}); got.String() != tt.want {
			t.Errorf("sourceOf %s = %v, want %s", tt.remote, got, tt.want)
		}
	}
}

// addrConn is a connection that only has a remote address.
type addrConn struct {
	net.Conn
	ra net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.ra }

// BenchmarkConnTable: what the connection table costs per event with 20,000 connections open:
// a sign of progress within refileEvery (the fast path's case on every request), one that moves
// the connection to the tail, and an eviction with the accept that follows it.
func BenchmarkConnTable(b *testing.B) {
	const open = 20_000
	setup := func() (*connTable, []*connNode) {
		tab := newConnTable(0)
		nodes := make([]*connNode, open)
		for i := range nodes {
			nodes[i] = &connNode{}
			tab.add(nodes[i], csIdle, int64(i))
		}
		return tab, nodes
	}
	b.Run("progress", func(b *testing.B) {
		tab, nodes := setup()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				tab.progress(nodes[i%open], int64(open))
				i++
			}
		})
	})
	b.Run("refile", func(b *testing.B) {
		tab, nodes := setup()
		now := int64(open)
		for i := 0; b.Loop(); i++ {
			now += int64(refileEvery)
			tab.progress(nodes[i%open], now)
		}
	})
	b.Run("evict+add", func(b *testing.B) {
		tab, _ := setup()
		// A third of the connections are being served: the eviction steps over them.
		n := tab.root.next
		for i := 0; n != &tab.root; i, n = i+1, n.next {
			if i%3 == 0 {
				n.state.Store(csBusy)
			}
		}
		now := int64(open)
		for b.Loop() {
			now++
			v, _ := tab.evict(now)
			if v == nil {
				b.Fatal("nothing to evict")
			}
			tab.add(&connNode{}, csIdle, now)
		}
	})
}
