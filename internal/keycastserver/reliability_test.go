package keycastserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/testwait"
)

// Regression tests for the defects of docs/reliability.md ("Keycast server").

// TestDeniedAuthorizationRedirectsOnlyToValidatedURIs: a denied approval redirects only to a
// redirect_uri that the approve path would accept (https, or http for a local host); anything
// else (javascript:, data:, plain http elsewhere, relative) is a 400 with no Location.
func TestDeniedAuthorizationRedirectsOnlyToValidatedURIs(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	tests := []struct {
		redirect string
		location string // "" = refused with 400
	}{
		{c.base + "/callback", c.base + "/callback?error=access_denied"},
		{"https://app.example/cb", "https://app.example/cb?error=access_denied"},
		{"https://app.example/cb?state=x#top", "https://app.example/cb?state=x&error=access_denied#top"},
		{"javascript:alert(document.cookie)", ""},
		{"JavaScript://app.example/%0aalert(1)", ""},
		{"data:text/html,<script>alert(1)</script>", ""},
		{"http://evil.example/cb", ""},
		{"//evil.example/cb", ""},
		{"/relative", ""},
		{"", ""},
	}
	for _, tt := range tests {
		req := keycast.AuthorizeRequest{Approved: false, ClientID: "loadtest", RedirectURI: tt.redirect, Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req)
		if tt.location == "" {
			if r.status != http.StatusBadRequest || r.header.Get("Location") != "" {
				t.Errorf("denied with redirect_uri %q: %d Location %q, want 400 and no redirect", tt.redirect, r.status, r.header.Get("Location"))
			} else if !strings.Contains(string(r.body), "redirect_uri") {
				t.Errorf("denied with redirect_uri %q: body %s does not say what is wrong", tt.redirect, r.body)
			}
			continue
		}
		if r.status != http.StatusSeeOther || r.header.Get("Location") != tt.location {
			t.Errorf("denied with redirect_uri %q: %d Location %q, want 303 to %q", tt.redirect, r.status, r.header.Get("Location"), tt.location)
		}
	}
}

// TestAccessTokenIsNotASession: an access token (server-signed, or user-signed with a
// bunker_pubkey as the load tool's DB mode writes them) must never act as a session: sent as
// the session cookie or as a bearer token to /api/oauth/authorize it gets 401, so a policy:social
// token cannot mint itself a policy:full one. At revoke it may revoke its own authorization only.
func TestAccessTokenIsNotASession(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	nsec := keycast.EncodeNsec(keycast.MustGenerateSecretKey())
	a := c.register("limited@test.local", &nsec)
	sk, _ := keycast.ParseSecretKey(nsec)
	social := c.grant(a, "policy:social")
	wantStatus(t, c.rpc(social.AccessToken, "sign_event", map[string]any{"pubkey": a.pubkey, "created_at": 1, "kind": 30023, "tags": []any{}, "content": "x"}),
		http.StatusForbidden, "social token signing kind 30023")
	u, err := keycast.ParseUCAN(social.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	tenant := *u.Facts.TenantID
	signer := keycast.NewSigner(sk)
	selfSignedAccess := forge(t, signer, signer.Public(), keycast.Facts{TenantID: &tenant, Email: a.email,
		RedirectOrigin: c.base, BunkerPubkey: u.Facts.BunkerPubkey}, time.Hour, time.Now())

	full := keycast.AuthorizeRequest{Approved: true, ClientID: keycast.LoadtestClientID, RedirectURI: c.base + "/callback", Scope: "policy:full"}
	for name, hdr := range map[string][]string{
		"server-signed access token as cookie": {"Cookie", keycast.SessionCookieName + "=" + social.AccessToken},
		"server-signed access token as bearer": {"Authorization", "Bearer " + social.AccessToken},
		"user-signed access token as cookie":   {"Cookie", keycast.SessionCookieName + "=" + selfSignedAccess},
		"user-signed access token as bearer":   {"Authorization", "Bearer " + selfSignedAccess},
	} {
		r := c.do("POST", keycast.PathAuthorize, full, hdr...)
		wantError(t, r, http.StatusUnauthorized, keycast.MsgOAuthUnauthorized, name)
	}
	// The session itself still authorizes.
	wantStatus(t, c.do("POST", keycast.PathAuthorize, full, "Cookie", keycast.SessionCookieName+"="+a.session), http.StatusOK, "session")

	// Revoke: an access token may not revoke the user's other authorizations ...
	other := c.grant(a, "policy:social")
	ou, _ := keycast.ParseUCAN(other.AccessToken)
	wantError(t, c.do("POST", "/api/user/sessions/revoke", map[string]string{"bunker_pubkey": ou.Facts.BunkerPubkey},
		"Authorization", "Bearer "+social.AccessToken), http.StatusUnauthorized, keycast.MsgInvalidToken, "access token revoking another authorization")
	rpcString(t, c.rpc(other.AccessToken, "get_public_key"), "the other authorization still works")
	// ... but may revoke its own (log itself out).
	wantStatus(t, c.do("POST", "/api/user/sessions/revoke", map[string]string{"bunker_pubkey": u.Facts.BunkerPubkey},
		"Authorization", "Bearer "+social.AccessToken), http.StatusOK, "access token revoking itself")
	wantError(t, c.rpc(social.AccessToken, "get_public_key"), http.StatusUnauthorized, keycast.MsgInvalidToken, "self-revoked token")
}

// TestEmailsAreValidatedAndCaseFolded: register refuses malformed addresses with a 400 that says
// what is wrong, and an address is unique whatever its case (stored lower-cased; login finds it
// however it is typed).
func TestEmailsAreValidatedAndCaseFolded(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	for _, bad := range []struct{ email, why string }{
		{"a\x00b@test.local", "control character"},
		{"a\x1bb@test.local", "control character"},
		{"a\u0085b@test.local", "control character"},
		{"a@b@test.local", "exactly one @"},
		{"a b@test.local", "space"},
		{"nope", "exactly one @"},
		{"@test.local", "before the @"},
		{"a@", "after the @"},
		{"a..b@test.local", "dot"},
		{".a@test.local", "dot"},
		{"a@test..local", "domain"},
		{"a@-test.local", "domain"},
		{"a@test.local.", "domain"},
		{"a@te_st.local", "domain"},
		{"<a>@test.local", "not allowed"},
		{strings.Repeat("a", 65) + "@test.local", "64"},
	} {
		r := c.do("POST", keycast.PathRegister, map[string]string{"email": bad.email, "password": "pw"}, "Origin", c.base)
		var e keycast.ErrorBody
		if r.status == http.StatusBadRequest {
			r.json(t, &e)
		}
		if r.status != http.StatusBadRequest || !strings.HasPrefix(e.Error, "Invalid email address") || !strings.Contains(e.Error, bad.why) || e.Code != "INVALID_EMAIL" {
			t.Errorf("register %q: %d %s, want 400 INVALID_EMAIL mentioning %q", bad.email, r.status, r.body, bad.why)
		}
	}

	a := c.register("Mixed.Case@Test.Local", nil)
	u, _ := keycast.ParseUCAN(a.session)
	if u == nil || u.Facts.Email != "mixed.case@test.local" {
		t.Errorf("session token %q: want the email fact lower-cased", a.session)
	}
	r := c.do("POST", keycast.PathRegister, map[string]string{"email": "mixed.case@test.local", "password": "pw"}, "Origin", c.base)
	wantStatus(t, r, http.StatusConflict, "the same address in another case")
	r = c.do("POST", keycast.PathRegister, map[string]string{"email": " MIXED.CASE@TEST.LOCAL ", "password": "pw"}, "Origin", c.base)
	wantStatus(t, r, http.StatusConflict, "the same address in capitals")
	r = c.do("POST", keycast.PathLogin, map[string]string{"email": "MIXED.case@test.LOCAL", "password": a.password}, "Origin", c.base)
	wantStatus(t, r, http.StatusOK, "login in another case")
}

// TestLoneSurrogatesAreRejected: a \u escape of half a surrogate pair is not a character;
// encoding/json would turn it into U+FFFD and sign that, upstream's serde_json refuses the body.
// Both paths answer 400 with serde_json's reason and position; a whole pair is signed as the
// character it encodes.
func TestLoneSurrogatesAreRejected(t *testing.T) {
	for _, fast := range []bool{true, false} {
		_, c := startServer(t, keycastserver.Config{NoFastPath: !fast})
		a := c.register("surrogate@test.local", nil)
		tok := c.grant(a, keycast.LoadtestScope).AccessToken
		body := func(content string) string {
			return `{"method":"sign_event","params":[{"kind":1,"content":"` + content + `","tags":[],"created_at":1,"pubkey":"` + a.pubkey + `"}]}`
		}
		col := func(content string, extra int) string {
			return strconv.Itoa(strings.Index(body(content), content) + len(`\uXXXX`) + extra)
		}
		for _, tt := range []struct{ content, msg string }{
			{`\ud800`, "unexpected end of hex escape at line 1 column " + col(`\ud800`, 1)},
			{`x\ud800y`, "unexpected end of hex escape at line 1 column " + col(`x\ud800y`, 2)},
			{`\ud800\n`, "unexpected end of hex escape at line 1 column " + col(`\ud800\n`, 2)},
			{`\udc00`, "lone leading surrogate in hex escape at line 1 column " + col(`\udc00`, 0)},
			{`\ud800\u0041`, "lone leading surrogate in hex escape at line 1 column " + col(`\ud800\u0041`, 6)},
			{`\ud800\ud800`, "lone leading surrogate in hex escape at line 1 column " + col(`\ud800\ud800`, 6)},
		} {
			r := c.do("POST", keycast.PathNostr, body(tt.content), "Authorization", "Bearer "+tok)
			want := "Failed to parse the request body as JSON: " + tt.msg + "\n"
			if r.status != http.StatusBadRequest || string(r.body) != want {
				t.Errorf("fast=%v content %s: %d %q, want 400 %q", fast, tt.content, r.status, r.body, want)
			}
		}
		var ev struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(rpcResult(t, c.do("POST", keycast.PathNostr, body(`\ud83d\ude00`), "Authorization", "Bearer "+tok), "pair"), &ev); err != nil || ev.Content != "\U0001F600" {
			t.Errorf("fast=%v: a surrogate pair signed as %q (%v), want U+1F600", fast, ev.Content, err)
		}
		r := c.do("POST", keycast.PathRegister, `{"email":"a\udc00@test.local","password":"pw"}`, "Origin", c.base)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "lone leading surrogate") {
			t.Errorf("fast=%v: register with a lone surrogate: %d %s, want 400", fast, r.status, r.body)
		}
	}
}

// TestRandomHostsDoNotCreateTenants: a tenant row per made-up Host header would grow the
// database without bound. The server creates tenants from Host only up to MaxTenants rows in
// all; past that an unknown Host gets 400, and known tenants keep working.
func TestRandomHostsDoNotCreateTenants(t *testing.T) {
	srv, c := startServer(t, keycastserver.Config{MaxTenants: 4})
	c.register("first@test.local", nil) // tenant "127.0.0.1"; with "default", 2 rows
	created, refused := 0, 0
	for i := range 40 {
		host := "h" + strconv.Itoa(i) + ".example"
		r := c.do("POST", keycast.PathLogin, map[string]string{"email": "x@test.local", "password": "p"}, "Origin", c.base, "Host", host)
		switch {
		case r.status == http.StatusUnauthorized:
			created++
		case r.status == http.StatusBadRequest && strings.Contains(string(r.body), "Unknown tenant"):
			refused++
		default:
			t.Fatalf("login with Host %s: %d %s", host, r.status, r.body)
		}
	}
	n, err := srv.Store().CountTenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if created != 2 || refused != 38 || n != 4 {
		t.Errorf("40 unknown hosts: %d created, %d refused, %d tenant rows; want 2, 38 and 4", created, refused, n)
	}
	c.register("second@test.local", nil) // the known tenant still works
	r := c.do("POST", keycast.PathLogin, map[string]string{"email": "x@test.local", "password": "p"}, "Origin", c.base, "Host", "h1.example")
	wantStatus(t, r, http.StatusUnauthorized, "a tenant created before the limit")
}

// slowloris sends head in pieces, one every gap, and returns how long the server kept the
// connection open (at most limit).
func slowloris(t *testing.T, addr string, pieces []string, gap, limit time.Duration) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.SetReadDeadline(start.Add(limit))
		io.Copy(io.Discard, c)
	}()
	for _, p := range pieces {
		select {
		case <-closed:
			return time.Since(start)
		case <-time.After(gap):
		}
		if _, err := io.WriteString(c, p); err != nil {
			break
		}
	}
	<-closed
	return time.Since(start)
}

// TestHeadSlowlorisIsCutOff: a request head must arrive whole within HeaderTimeout of its first
// byte on both paths; the fast path reads heads itself, so net/http's ReadHeaderTimeout never
// applied to it and a head trickled a byte at a time held the connection for the 2-minute idle
// timeout.
func TestHeadSlowlorisIsCutOff(t *testing.T) {
	for _, fast := range []bool{true, false} {
		srv, _ := startServer(t, keycastserver.Config{NoFastPath: !fast, HeaderTimeout: 300 * time.Millisecond})
		pieces := []string{"POST /api/nostr HTTP/1.1\r\n", "Host: x\r\n"}
		for range 100 {
			pieces = append(pieces, "X")
		}
		if held := slowloris(t, srv.Addr, pieces, 50*time.Millisecond, 6*time.Second); held > 3*time.Second {
			t.Errorf("fast=%v: a trickled head held the connection %v, want it closed soon after HeaderTimeout (300ms)", fast, held)
		}
	}
}

// exchange writes raw on a new connection and reads answers until the server closes it (or
// 5 s pass); it returns the statuses in order and whether the connection was closed.
func exchange(t *testing.T, addr, raw string) (statuses []int, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			return statuses, !(errors.As(err, &ne) && ne.Timeout())
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		statuses = append(statuses, res.StatusCode)
	}
}

// TestAmbiguousFramingIsRefused: a request with both Content-Length and Transfer-Encoding, or
// with Content-Length twice, is answered 400 and the connection closed on both paths, so
// nothing it carries (here a GET /api/policies after an empty chunked body) is served as a
// second request. net/http alone dropped Content-Length, served the chunked request and then
// the hidden one.
func TestAmbiguousFramingIsRefused(t *testing.T) {
	for _, fast := range []bool{true, false} {
		srv, c := startServer(t, keycastserver.Config{NoFastPath: !fast})
		a := c.register("smuggle@test.local", nil)
		tok := c.grant(a, keycast.LoadtestScope).AccessToken
		addr := srv.Addr
		gpk := `{"method":"get_public_key","params":[]}`
		nostr := func(headers, body string) string {
			return "POST /api/nostr HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " + tok + "\r\n" +
				headers + "\r\n" + body
		}
		hidden := "GET /api/policies HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
		good := nostr("Content-Length: "+strconv.Itoa(len(gpk))+"\r\n", gpk)
		tests := []struct {
			name string
			raw  string
			want []int // statuses before the close
		}{
			{"CL then TE", nostr("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+hidden), []int{400}},
			{"TE then CL", nostr("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"+hidden), []int{400}},
			{"lower case", nostr("content-length: 5\r\ntransfer-encoding: Chunked\r\n", "0\r\n\r\n"+hidden), []int{400}},
			{"CL 0 and TE", nostr("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+hidden), []int{400}},
			{"same CL twice", nostr("Content-Length: 2\r\nContent-Length: 2\r\n", "{}"+hidden), []int{400}},
			{"conflicting CL", nostr("Content-Length: 2\r\nContent-Length: 41\r\n", "{}"+hidden), []int{400}},
			{"TE in HTTP/1.0", strings.Replace(nostr("Transfer-Encoding: chunked\r\n", "0\r\n\r\n"+hidden), "HTTP/1.1", "HTTP/1.0", 1), []int{400}},
			{"folded TE", nostr("Content-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n"+hidden), []int{400}},
			{"after a fast-path request", good + nostr("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+hidden), []int{200, 400}},
			{"after a net/http request", "GET /health HTTP/1.1\r\nHost: " + addr + "\r\n\r\n" +
				nostr("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+hidden), []int{200, 400}},
			{"bad chunk size hides a request", nostr("Transfer-Encoding: chunked\r\n", "2 ;x\r\n{}\r\n0\r\n\r\n"+hidden), []int{400}},
			{"bare LF in a chunk line", nostr("Transfer-Encoding: chunked\r\n", "2\n{}\r\n0\r\n\r\n"+hidden), []int{400}},
		}
		for _, tt := range tests {
			got, closed := exchange(t, addr, tt.raw)
			if !slices.Equal(got, tt.want) || !closed {
				t.Errorf("fast=%v %s: statuses %v, closed %v; want %v then the connection closed", fast, tt.name, got, closed, tt.want)
			}
		}
		// Plain chunked requests and pipelines keep working.
		chunked := nostr("Transfer-Encoding: chunked\r\n", strconv.FormatInt(int64(len(gpk)), 16)+"\r\n"+gpk+"\r\n0\r\n\r\n")
		last := "GET /api/policies HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n"
		if got, _ := exchange(t, addr, chunked+good+chunked+hidden+last); !slices.Equal(got, []int{200, 200, 200, 200, 200}) {
			t.Errorf("fast=%v: chunked and plain requests pipelined: %v, want five 200s", fast, got)
		}
	}
}

// TestStalledRequestsAreBounded: connections that send a request head and never its body (or
// never a head at all) end within the read timeouts on both paths, and past MaxConnections a new
// connection closes the one stalled longest to make room (it was answered 503 before the
// evictions, TestSlowBodyAttackDoesNotLockOutClients), so stalled sockets can neither hold the
// server's descriptors nor keep normal clients out.
func TestStalledRequestsAreBounded(t *testing.T) {
	srv, c := startServer(t, keycastserver.Config{MaxConnections: 60, HeaderTimeout: 300 * time.Millisecond,
		BodyTimeout: 300 * time.Millisecond})
	addr := srv.Addr
	heads := []string{
		"POST " + keycast.PathRegister + " HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: http://" + addr +
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST " + keycast.PathToken + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST " + keycast.PathNostr + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST " + keycast.PathNostr + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"GET /health HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100\r\n\r\n",
		"", // connects and sends nothing
		"POST " + keycast.PathNostr + " HTTP/1.1\r\nHost: " + addr + "\r\n", // half a head
	}
	const n = 300
	type outcome struct {
		status int // 0: no answer
		held   bool
		res    *http.Response
		body   []byte
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer conn.Close()
		io.WriteString(conn, heads[i%len(heads)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn.SetReadDeadline(start.Add(8 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			var ne net.Error
			if err != nil {
				outcomes[i].held = errors.As(err, &ne) && ne.Timeout()
				return
			}
			b, _ := io.ReadAll(res.Body)
			outcomes[i] = outcome{status: res.StatusCode, res: res, body: b}
			// After the answer the server must close the connection too.
			if _, err := conn.Read(make([]byte, 1)); errors.As(err, &ne) && ne.Timeout() {
				outcomes[i].held = true
			}
		}()
	}
	wg.Wait()
	held, shed := 0, 0
	for i, o := range outcomes {
		if o.held {
			held++
			continue
		}
		if o.status == http.StatusServiceUnavailable {
			shed++
			if o.res.Header.Get("Retry-After") != "1" || string(o.body) != `{"error":"server at capacity, retry shortly","code":"admission_rejected"}` {
				t.Errorf("connection %d shed with Retry-After %q body %s, want the shedding contract", i, o.res.Header.Get("Retry-After"), o.body)
			}
		}
	}
	m := c.metrics()
	evicted := 0
	for _, reason := range []string{"stalled_head", "stalled_body", "idle"} {
		evicted += int(m[`keycast_http_connections_evicted_total{reason="`+reason+`"}`])
	}
	// Past the cap each new connection closes the stalest stalled one (none is being served),
	// so nothing is shed; a few may have ended by their timeouts first.
	if held > 0 || shed > 0 || evicted < n-60-10 || evicted > n-60 {
		t.Errorf("%d stalled connections: %d still held after %v, %d shed and %d evicted at the 60-connection cap; want none held or shed and %d to %d evicted",
			n, held, time.Since(start).Round(time.Millisecond), shed, evicted, n-70, n-60)
	}
	// Normal clients get in again at once.
	wantStatus(t, c.do("GET", keycast.PathHealth, nil), http.StatusOK, "health after the stall")
	c.register("after-stall@test.local", nil)
	if open := c.metrics()["keycast_http_connections_open"]; open > 3 {
		t.Errorf("keycast_http_connections_open = %d after the stalled connections ended, want about 1", open)
	}
}

// slowBodyAttack opens waves of connections from 127.0.0.1 that each send head (a request head
// with Content-Length: 10000) and never the body, wave after wave until ctx ends: the attack of
// docs/reliability.md (Keycast server, 10). Each connection is read until the server closes it.
// It returns how many connections it opened and how many the server answered 503.
func slowBodyAttack(ctx context.Context, addr, head string, wave int, every time.Duration) (opened, shed *int64, done <-chan struct{}) {
	opened, shed = new(int64), new(int64)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		defer func() {
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		}()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for range wave {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					continue // a full backlog: the next wave tries again
				}
				mu.Lock()
				conns = append(conns, c)
				*opened++
				mu.Unlock()
				io.WriteString(c, head)
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := make([]byte, 64)
					n, _ := io.ReadAtLeast(c, b, 12)
					if n >= 12 && string(b[:12]) == "HTTP/1.1 503" {
						mu.Lock()
						*shed++
						mu.Unlock()
					}
					io.Copy(io.Discard, c)
					c.Close()
				}()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return opened, shed, fin
}

// TestSlowBodyAttackDoesNotLockOutClients: with a cap of 50 connections and a 30 s body
// timeout, waves of 200 connections that send a register head and never its body took every
// slot, and every new connection was answered 503 until the body timeout freed them: a normal
// get_public_key got 503 for as long as the waves went on. At the cap the server now closes the
// connection that has made no progress the longest (here a stalled body), so a normal request
// on a new connection is answered 200 within 5 s throughout the attack. Both ways a body
// stalls are tried: with Origin the register handler waits for the body; without it the handler
// refuses the request at once and net/http waits for the body (to keep the connection) before
// it writes the 400.
func TestSlowBodyAttackDoesNotLockOutClients(t *testing.T) {
	for _, tt := range []struct{ name, origin string }{{"handler reads the body", "Origin: http://%s\r\n"}, {"net/http drains the body", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			const maxConns = 50
			srv, c := startServer(t, keycastserver.Config{MaxConnections: maxConns, BodyTimeout: 30 * time.Second})
			a := c.register("attacked@test.local", nil)
			tok := c.grant(a, keycast.LoadtestScope).AccessToken
			gpk := `{"method":"get_public_key","params":[]}`
			probe := "POST " + keycast.PathNostr + " HTTP/1.1\r\nHost: " + srv.Addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " +
				tok + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(gpk)) + "\r\n\r\n" + gpk
			head := "POST " + keycast.PathRegister + " HTTP/1.1\r\nHost: " + srv.Addr + "\r\n" + strings.ReplaceAll(tt.origin, "%s", srv.Addr) +
				"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n"

			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancel()
			attackStart := time.Now()
			opened, shedAttack, done := slowBodyAttack(ctx, srv.Addr, head, maxConns+150, 500*time.Millisecond)
			// ask sends one get_public_key on a new connection and returns its status; a
			// connection closed before any answer is retried, as a client would, within the 5 s
			// allowed.
			ask := func() (status int, retries int, err error) {
				deadline := time.Now().Add(5 * time.Second)
				for {
					conn, err := net.DialTimeout("tcp", srv.Addr, time.Until(deadline))
					if err != nil {
						return 0, retries, err
					}
					conn.SetDeadline(deadline)
					_, err = io.WriteString(conn, probe)
					var res *http.Response
					if err == nil {
						res, err = http.ReadResponse(bufio.NewReader(conn), nil)
					}
					conn.Close()
					if err == nil {
						return res.StatusCode, retries, nil
					}
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						return 0, retries, err
					}
					retries++
				}
			}
			// Let the first wave fill the cap: the open-connections gauge, read in process (a
			// scrape over a socket would queue behind the attack), says when it has.
			openConns := func() uint64 {
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, keycast.PathMetrics, nil))
				return keycast.ParsePrometheusValues(rec.Body.Bytes())["keycast_http_connections_open"]
			}
			testwait.Eventually(t, testwait.Long, fmt.Sprintf("%d attack connections open (the cap)", maxConns), func() bool { return openConns() >= maxConns })
			probes, retried := 0, 0
			for ctx.Err() == nil {
				start := time.Now()
				status, retries, err := ask()
				probes++
				retried += retries
				if err != nil || status != http.StatusOK {
					cancel()
					testwait.Recv(t, done, testwait.Long, "end of the attack")
					t.Fatalf("get_public_key %v into the attack: status %d, err %v after %v (%d retries); want 200 within 5 s",
						start.Sub(attackStart).Round(time.Millisecond), status, err, time.Since(start).Round(time.Millisecond), retries)
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			testwait.Recv(t, done, testwait.Long, "end of the attack")
			m := c.metrics()
			evicted := m[`keycast_http_connections_evicted_total{reason="stalled_body"}`]
			t.Logf("%d attack connections, %d answered 503; %d probes answered 200 (%d retried after a closed connection); %d stalled bodies evicted",
				*opened, *shedAttack, probes, retried, evicted)
			if evicted == 0 {
				t.Errorf("keycast_http_connections_evicted_total{reason=\"stalled_body\"} = 0 after the attack, want the evictions counted")
			}
		})
	}
}

// TestPerSourceConnectionLimit: with KEYCAST_MAX_CONNECTIONS_PER_SOURCE a source at its limit
// gets the shedding contract on a new connection, counted as per_source_limit, while another
// source (127.0.0.2: the whole of 127/8 is loopback) is still served; once one of the first
// source's connections closes it gets in again.
func TestPerSourceConnectionLimit(t *testing.T) {
	srv, _ := startServer(t, keycastserver.Config{MaxConnectionsPerSource: 3})
	other := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	get := func(hc *http.Client, path string) (int, string) {
		t.Helper()
		res, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	var held []net.Conn
	for range 3 {
		conn, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		held = append(held, conn)
	}
	statuses, closed := exchange(t, srv.Addr, "GET "+keycast.PathHealth+" HTTP/1.1\r\nHost: x\r\n\r\n")
	if !slices.Equal(statuses, []int{http.StatusServiceUnavailable}) || !closed {
		t.Errorf("a 4th connection from 127.0.0.1: statuses %v, closed %v; want one 503 and the connection closed", statuses, closed)
	}
	if st, _ := get(other, keycast.PathHealth); st != http.StatusOK {
		t.Errorf("another source: %d, want 200", st)
	}
	_, body := get(other, keycast.PathMetrics)
	if n := keycast.ParsePrometheusValues([]byte(body))[`keycast_http_connections_shed_total{reason="per_source_limit"}`]; n != 1 {
		t.Errorf(`keycast_http_connections_shed_total{reason="per_source_limit"} = %d, want 1`, n)
	}
	held[0].Close()
	// The close reaches the server asynchronously: the first source gets in again within a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		statuses, _ = exchange(t, srv.Addr, "GET "+keycast.PathHealth+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if slices.Equal(statuses, []int{http.StatusOK}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one of its connections closed, 127.0.0.1 still gets %v", statuses)
		}
	}
}
