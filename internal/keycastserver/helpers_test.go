package keycastserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
)

// clock is a settable test clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// client talks to a test server the way the load tool does.
type client struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newClient(t testing.TB, srv *kctest.Server) *client {
	return &client{t: t, base: srv.URL, hc: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %q is not the JSON expected: %v", r.status, r.body, err)
	}
}

// do sends one request; headers are name, value pairs.
func (c *client) do(method, path string, body any, headers ...string) resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func wantStatus(t testing.TB, r resp, status int, what string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d body %s, want %d", what, r.status, r.body, status)
	}
}

func wantError(t testing.TB, r resp, status int, msg string, what string) {
	t.Helper()
	wantStatus(t, r, status, what)
	var e keycast.ErrorBody
	r.json(t, &e)
	if e.Error != msg {
		t.Fatalf("%s: error %q, want %q", what, e.Error, msg)
	}
}

// account is one registered user with a session cookie.
type account struct {
	email, password, pubkey, session string
}

func (c *client) register(email string, nsec *string) account {
	c.t.Helper()
	a := account{email: email, password: "pw-" + email}
	r := c.do("POST", keycast.PathRegister, keycast.RegisterRequest{Email: email, Password: a.password, Nsec: nsec}, "Origin", c.base)
	wantStatus(c.t, r, http.StatusOK, "register")
	var rr keycast.RegisterResponse
	r.json(c.t, &rr)
	if !rr.Success || len(rr.Pubkey) != 64 {
		c.t.Fatalf("register answer %s", r.body)
	}
	a.pubkey = rr.Pubkey
	a.session = sessionFrom(c.t, r.header)
	return a
}

func sessionFrom(t testing.TB, h http.Header) string {
	t.Helper()
	for _, sc := range h.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, keycast.SessionCookieName+"="); ok {
			tok, _, _ := strings.Cut(v, ";")
			return tok
		}
	}
	t.Fatalf("no %s cookie in %v", keycast.SessionCookieName, h)
	return ""
}

// authorize runs the approval step and returns the code.
func (c *client) authorize(a account, scope, challenge, method string) resp {
	c.t.Helper()
	req := keycast.AuthorizeRequest{Approved: true, ClientID: keycast.LoadtestClientID, RedirectURI: c.base + "/callback", Scope: scope}
	if challenge != "" {
		req.CodeChallenge = &challenge
	}
	if method != "" {
		req.CodeChallengeMethod = &method
	}
	return c.do("POST", keycast.PathAuthorize, req, "Cookie", keycast.SessionCookieName+"="+a.session, "Origin", c.base)
}

func (c *client) token(code, redirect, verifier string) resp {
	c.t.Helper()
	req := keycast.TokenRequest{Code: code, ClientID: keycast.LoadtestClientID, RedirectURI: redirect}
	if verifier != "" {
		req.CodeVerifier = &verifier
	}
	return c.do("POST", keycast.PathToken, req)
}

// grant runs authorize + token with PKCE S256 and returns the token response.
func (c *client) grant(a account, scope string) keycast.TokenResponse {
	c.t.Helper()
	v := keycast.NewPKCEVerifier()
	r := c.authorize(a, scope, keycast.PKCEChallengeS256(v), keycast.PKCES256)
	wantStatus(c.t, r, http.StatusOK, "authorize")
	var ar keycast.AuthorizeResponse
	r.json(c.t, &ar)
	if len(ar.Code) != 32 || ar.RedirectURI != c.base+"/callback" {
		c.t.Fatalf("authorize answer %s", r.body)
	}
	r = c.token(ar.Code, c.base+"/callback", v)
	wantStatus(c.t, r, http.StatusOK, "token")
	var tr keycast.TokenResponse
	r.json(c.t, &tr)
	return tr
}

// rpc calls /api/nostr with a bearer token.
func (c *client) rpc(token, method string, params ...any) resp {
	c.t.Helper()
	if params == nil {
		params = []any{}
	}
	return c.do("POST", keycast.PathNostr, map[string]any{"method": method, "params": params}, "Authorization", "Bearer "+token)
}

func (c *client) metrics() map[string]uint64 {
	c.t.Helper()
	r := c.do("GET", keycast.PathMetrics, nil)
	wantStatus(c.t, r, http.StatusOK, "metrics")
	return keycast.ParsePrometheusValues(r.body)
}

func rpcResult(t testing.TB, r resp, what string) json.RawMessage {
	t.Helper()
	wantStatus(t, r, http.StatusOK, what)
	var rr keycast.RPCResponse
	r.json(t, &rr)
	if rr.Error != "" || rr.Result == nil {
		t.Fatalf("%s: %s", what, r.body)
	}
	return rr.Result
}

func rpcString(t testing.TB, r resp, what string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(rpcResult(t, r, what), &s); err != nil {
		t.Fatalf("%s: result is not a string: %s", what, r.body)
	}
	return s
}

// vectorFile returns the path of an official vector file in testdata/. A
// missing file fails the test: the vectors are part of the repository.
func vectorFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("testdata", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("official test vectors: %v (testdata/README.md says where they come from)", err)
	}
	return p
}

func startServer(t testing.TB, cfg keycastserver.Config) (*kctest.Server, *client) {
	t.Helper()
	srv := kctest.Start(t, cfg)
	return srv, newClient(t, srv)
}
