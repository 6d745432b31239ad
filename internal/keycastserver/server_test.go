package keycastserver_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycaststore"
	"github.com/loadproof/loadproof/internal/keycaststore/storetest"
)

// TestEndToEnd runs register → authorize → token → every RPC method over real HTTP, against
// SQLite and PostgreSQL.
func TestEndToEnd(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			srv, c := startServer(t, keycastserver.Config{DatabaseURL: b.URL(t)})
			a := c.register("alice@test.local", nil)
			tr := c.grant(a, keycast.LoadtestScope)

			if tr.TokenType != "Bearer" || tr.ExpiresIn != 86400 || tr.Scope != "policy:social" || len(tr.AuthorizationHandle) != 64 ||
				tr.Policy == nil || tr.Policy.Slug != "social" || len(tr.Policy.Permissions) == 0 {
				t.Fatalf("token response %+v", tr)
			}
			if !strings.HasPrefix(tr.BunkerURL, "bunker://") || !strings.Contains(tr.BunkerURL, "?relay=wss%3A%2F%2Frelay.divine.video&") ||
				!strings.Contains(tr.BunkerURL, "&secret=") {
				t.Fatalf("bunker_url %q", tr.BunkerURL)
			}
			u, err := keycast.ParseUCAN(tr.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			if u.Issuer != srv.ServerPubkey() || u.Audience.Hex() != a.pubkey || u.Facts.BunkerPubkey == "" ||
				u.Facts.RedirectOrigin != srv.URL || u.Facts.Email != "alice@test.local" {
				t.Fatalf("access token %+v", u)
			}
			bunkerHex := strings.TrimPrefix(strings.SplitN(tr.BunkerURL, "?", 2)[0], "bunker://")
			if bunkerHex != u.Facts.BunkerPubkey {
				t.Fatalf("bunker_url key %s, token bunker_pubkey %s", bunkerHex, u.Facts.BunkerPubkey)
			}

			// get_public_key twice: one miss, one hit.
			for i := range 2 {
				if got := rpcString(t, c.rpc(tr.AccessToken, "get_public_key"), "get_public_key"); got != a.pubkey {
					t.Fatalf("get_public_key %d = %s, want %s", i, got, a.pubkey)
				}
			}
			// The load tool's exact body takes the fast path.
			body, _ := keycast.AppendRPCBody(nil, keycast.MethodGetPublicKey, a.pubkey, 0, "")
			if got := rpcString(t, c.do("POST", keycast.PathNostr, body, "Authorization", "Bearer "+tr.AccessToken), "fast path"); got != a.pubkey {
				t.Fatalf("fast path = %s", got)
			}

			// sign_event, object form as the load tool sends it, and the NIP-46 string form.
			now := time.Now().Unix()
			body, _ = keycast.AppendRPCBody(nil, keycast.MethodSignEvent, a.pubkey, now, "")
			var ev keycast.Event
			if err := json.Unmarshal(rpcResult(t, c.do("POST", keycast.PathNostr, body, "Authorization", "Bearer "+tr.AccessToken), "sign_event"), &ev); err != nil {
				t.Fatal(err)
			}
			if err := keycast.VerifyEvent(ev); err != nil {
				t.Fatalf("signed event does not verify: %v", err)
			}
			if ev.PubKey != a.pubkey || ev.Content != fmt.Sprintf("Load test %d", now) || ev.Kind != 1 {
				t.Fatalf("signed event %+v", ev)
			}
			inner := fmt.Sprintf(`{"pubkey":%q,"created_at":5,"kind":7,"tags":[["e","abc"]],"content":"+"}`, a.pubkey)
			var ev2 keycast.Event
			if err := json.Unmarshal(rpcResult(t, c.rpc(tr.AccessToken, "sign_event", inner), "sign_event string"), &ev2); err != nil {
				t.Fatal(err)
			}
			if err := keycast.VerifyEvent(ev2); err != nil || ev2.Kind != 7 || len(ev2.Tags) != 1 {
				t.Fatalf("string-form event %+v: %v", ev2, err)
			}
			// A supplied id must match; a foreign pubkey is refused with a message saying so.
			withID := fmt.Sprintf(`{"id":%q,"pubkey":%q,"created_at":5,"kind":7,"tags":[["e","abc"]],"content":"+"}`, ev2.ID, a.pubkey)
			rpcResult(t, c.rpc(tr.AccessToken, "sign_event", json.RawMessage(withID)), "sign_event matching id")
			badID := strings.Replace(withID, ev2.ID[:8], "00000000", 1)
			if r := c.rpc(tr.AccessToken, "sign_event", json.RawMessage(badID)); r.status != 400 || !strings.Contains(string(r.body), "does not match the computed id") {
				t.Fatalf("mismatched id: %d %s", r.status, r.body)
			}
			other := keycast.MustGenerateSecretKey().Public().Hex()
			foreign := fmt.Sprintf(`{"pubkey":%q,"created_at":5,"kind":1,"tags":[],"content":"x"}`, other)
			if r := c.rpc(tr.AccessToken, "sign_event", json.RawMessage(foreign)); r.status != 400 || !strings.Contains(string(r.body), "does not match the signer") {
				t.Fatalf("foreign pubkey: %d %s", r.status, r.body)
			}
			wantError(t, c.rpc(tr.AccessToken, "sign_event"), 400, keycast.MsgMissingEvent, "sign_event without params")

			// NIP-44 and NIP-04 round trips with a peer.
			peer := keycast.MustGenerateSecretKey()
			peerHex := peer.Public().Hex()
			ct := rpcString(t, c.rpc(tr.AccessToken, "nip44_encrypt", peerHex, "hello nip44"), "nip44_encrypt")
			if pt := rpcString(t, c.rpc(tr.AccessToken, "nip44_decrypt", peerHex, ct), "nip44_decrypt"); pt != "hello nip44" {
				t.Fatalf("nip44 round trip = %q", pt)
			}
			userPub, _ := keycast.ParsePublicKey(a.pubkey)
			ck, _ := keycast.NIP44ConversationKey(peer, userPub)
			if pt, err := keycast.NIP44Decrypt(ct, ck); err != nil || pt != "hello nip44" {
				t.Fatalf("peer cannot decrypt the server's NIP-44 payload: %q %v", pt, err)
			}
			ct4 := rpcString(t, c.rpc(tr.AccessToken, "nip04_encrypt", peerHex, "hello nip04"), "nip04_encrypt")
			if pt := rpcString(t, c.rpc(tr.AccessToken, "nip04_decrypt", peerHex, ct4), "nip04_decrypt"); pt != "hello nip04" {
				t.Fatalf("nip04 round trip = %q", pt)
			}
			wantError(t, c.rpc(tr.AccessToken, "nip44_encrypt"), 400, keycast.MsgMissingRecipient, "nip44_encrypt no params")
			wantError(t, c.rpc(tr.AccessToken, "nip44_encrypt", peerHex), 400, keycast.MsgMissingPlaintext, "nip44_encrypt no plaintext")
			wantError(t, c.rpc(tr.AccessToken, "nip44_decrypt"), 400, keycast.MsgMissingSender, "nip44_decrypt no params")
			wantError(t, c.rpc(tr.AccessToken, "nip04_decrypt", peerHex), 400, keycast.MsgMissingCiphertext, "nip04_decrypt no ciphertext")
			if r := c.rpc(tr.AccessToken, "nip44_encrypt", "zz", "x"); r.status != 400 || !strings.Contains(string(r.body), keycast.MsgInvalidPubkey) {
				t.Fatalf("bad pubkey: %d %s", r.status, r.body)
			}
			if r := c.rpc(tr.AccessToken, "nip44_decrypt", peerHex, "not a payload"); r.status != 400 {
				t.Fatalf("bad ciphertext: %d %s", r.status, r.body)
			}
			wantError(t, c.rpc(tr.AccessToken, "sign_canonical"), 400, keycast.MsgUnsupportedMethod+"sign_canonical", "unknown method")

			// login gives a fresh session that authorizes again.
			r := c.do("POST", keycast.PathLogin, map[string]string{"email": a.email, "password": a.password}, "Origin", c.base)
			wantStatus(t, r, 200, "login")
			a.session = sessionFrom(t, r.header)
			tr2 := c.grant(a, "policy:full")
			if tr2.AccessToken == tr.AccessToken || rpcString(t, c.rpc(tr2.AccessToken, "get_public_key"), "second grant") != a.pubkey {
				t.Fatal("second authorization does not work")
			}
			wantError(t, c.do("POST", keycast.PathLogin, map[string]string{"email": a.email, "password": "wrong"}, "Origin", c.base),
				401, keycast.MsgOAuthUnauthorized, "login with a wrong password")

			m := c.metrics()
			for name, want := range map[string]uint64{
				keycast.MetricHTTPRPCCacheMisses: 2, keycast.MetricHTTPRPCCacheSize: 2, "keycast_registrations_total": 1,
				"keycast_logins_total": 1, "keycast_login_failures_total": 1, "keycast_oauth_authorizations_created_total": 2,
				keycast.MetricHTTPRPCAuthErrors: 0,
			} {
				if m[name] != want {
					t.Errorf("metric %s = %d, want %d", name, m[name], want)
				}
			}
			if m[keycast.MetricHTTPRPCCacheHits] < 10 || m[keycast.MetricHTTPRPCRequests] != m[keycast.MetricHTTPRPCCacheHits]+2 {
				t.Errorf("hits %d, requests %d", m[keycast.MetricHTTPRPCCacheHits], m[keycast.MetricHTTPRPCRequests])
			}
		})
	}
}

func TestPKCEAndRedirectChecks(t *testing.T) {
	clk := newClock()
	_, c := startServer(t, keycastserver.Config{Now: clk.Now})
	a := c.register("pkce@test.local", nil)
	redirect := c.base + "/callback"
	code := func(challenge, method string) string {
		t.Helper()
		r := c.authorize(a, keycast.LoadtestScope, challenge, method)
		wantStatus(t, r, 200, "authorize")
		var ar keycast.AuthorizeResponse
		r.json(t, &ar)
		return ar.Code
	}
	v := keycast.NewPKCEVerifier()
	s256 := keycast.PKCEChallengeS256(v)

	tests := []struct {
		name               string
		challenge, method  string
		redirect, verifier string
		status             int
		msg                string
	}{
		{"S256 wrong verifier", s256, "S256", redirect, v + "x", 400, "Invalid request: " + keycast.ErrPKCEMismatch.Error()},
		{"S256 missing verifier", s256, "S256", redirect, "", 400, "Invalid request: " + keycast.ErrPKCEVerifierRequired.Error()},
		{"plain given S256 challenge as verifier", s256, "plain", redirect, v, 400, "Invalid request: " + keycast.ErrPKCEMismatch.Error()},
		{"method defaults to plain", v, "", redirect, v, 200, ""},
		{"plain", v, "plain", redirect, v, 200, ""},
		{"S256", s256, "S256", redirect, v, 200, ""},
		{"no PKCE", "", "", redirect, "", 200, ""},
		{"redirect_uri mismatch", s256, "S256", redirect + "/other", v, 400, keycast.MsgRedirectURIMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.token(code(tt.challenge, tt.method), tt.redirect, tt.verifier)
			if tt.status == 200 {
				wantStatus(t, r, 200, tt.name)
				return
			}
			wantError(t, r, tt.status, tt.msg, tt.name)
		})
	}

	t.Run("code is single use", func(t *testing.T) {
		cd := code(s256, "S256")
		wantStatus(t, c.token(cd, redirect, v), 200, "first exchange")
		wantError(t, c.token(cd, redirect, v), 401, keycast.MsgOAuthUnauthorized, "second exchange")
	})
	t.Run("failed PKCE leaves the code for the rightful client", func(t *testing.T) {
		cd := code(s256, "S256")
		wantStatus(t, c.token(cd, redirect, "guess"), 400, "guess")
		wantStatus(t, c.token(cd, redirect, v), 200, "rightful exchange")
	})
	t.Run("code expires after 10 minutes", func(t *testing.T) {
		cd := code(s256, "S256")
		clk.Advance(10*time.Minute + time.Second)
		wantError(t, c.token(cd, redirect, v), 401, keycast.MsgOAuthUnauthorized, "expired code")
	})
	t.Run("client_id mismatch", func(t *testing.T) {
		cd := code(s256, "S256")
		r := c.do("POST", keycast.PathToken, map[string]string{"code": cd, "client_id": "other", "redirect_uri": redirect, "code_verifier": v})
		wantError(t, r, 400, "Invalid request: client_id mismatch", "client_id")
	})
	t.Run("unknown grant_type", func(t *testing.T) {
		r := c.do("POST", keycast.PathToken, map[string]string{"grant_type": "password", "code": "x", "client_id": "c", "redirect_uri": redirect})
		wantStatus(t, r, 400, "grant_type")
	})
	t.Run("unknown policy", func(t *testing.T) {
		r := c.authorize(a, "policy:nope", "", "")
		var ar keycast.AuthorizeResponse
		r.json(t, &ar)
		r = c.token(ar.Code, redirect, "")
		if r.status != 400 || !strings.Contains(string(r.body), "Unknown policy") {
			t.Fatalf("unknown policy: %d %s", r.status, r.body)
		}
	})
	t.Run("scope that is not a policy", func(t *testing.T) {
		r := c.authorize(a, "openid", "", "")
		var ar keycast.AuthorizeResponse
		r.json(t, &ar)
		wantStatus(t, c.token(ar.Code, redirect, ""), 400, "bad scope")
	})
	t.Run("http redirect to a non-local host", func(t *testing.T) {
		req := keycast.AuthorizeRequest{Approved: true, ClientID: "loadtest", RedirectURI: "http://example.com/cb", Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req, "Cookie", keycast.SessionCookieName+"="+a.session)
		var ar keycast.AuthorizeResponse
		r.json(t, &ar)
		wantStatus(t, c.token(ar.Code, "http://example.com/cb", ""), 400, "http non-local redirect")
	})
	t.Run("denied approval redirects", func(t *testing.T) {
		req := keycast.AuthorizeRequest{Approved: false, ClientID: "loadtest", RedirectURI: redirect, Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != redirect+"?error=access_denied" {
			t.Fatalf("denied: %d %v", r.status, r.header)
		}
	})
	t.Run("authorize without a session", func(t *testing.T) {
		req := keycast.AuthorizeRequest{Approved: true, ClientID: "loadtest", RedirectURI: redirect, Scope: keycast.LoadtestScope}
		wantError(t, c.do("POST", keycast.PathAuthorize, req), 401, keycast.MsgOAuthUnauthorized, "no cookie")
		wantError(t, c.do("POST", keycast.PathAuthorize, req, "Cookie", keycast.SessionCookieName+"=garbage"), 401, keycast.MsgOAuthUnauthorized, "bad cookie")
	})
	t.Run("session from another tenant", func(t *testing.T) {
		req := keycast.AuthorizeRequest{Approved: true, ClientID: "loadtest", RedirectURI: redirect, Scope: keycast.LoadtestScope}
		r := c.do("POST", keycast.PathAuthorize, req, "Cookie", keycast.SessionCookieName+"="+a.session, "Host", "other.localhost")
		wantError(t, r, 401, keycast.MsgOAuthUnauthorized, "cross-tenant session")
	})
}

// forge builds a token signed by signer for audience with the given facts and expiry.
func forge(t *testing.T, signer *keycast.Signer, aud keycast.PublicKey, facts keycast.Facts, lifetime time.Duration, now time.Time) string {
	t.Helper()
	tok, err := keycast.MintUCAN(signer, aud, facts, lifetime, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenValidation(t *testing.T) {
	clk := newClock()
	_, c := startServer(t, keycastserver.Config{Now: clk.Now})
	a := c.register("tokens@test.local", nil)
	tr := c.grant(a, keycast.LoadtestScope)
	u, err := keycast.ParseUCAN(tr.AccessToken)
	if err != nil {
		t.Fatal(err)
	}

	parts := strings.Split(tr.AccessToken, ".")
	payload := []byte(parts[1])
	payload[10] ^= 1
	tampered := parts[0] + "." + string(payload) + "." + parts[2]
	sig := []byte(parts[2])
	if sig[5] == 'A' {
		sig[5] = 'B'
	} else {
		sig[5] = 'A'
	}
	badSig := parts[0] + "." + parts[1] + "." + string(sig)
	stranger := keycast.NewSigner(keycast.MustGenerateSecretKey())
	wrongIssuer := forge(t, stranger, u.Audience, u.Facts, time.Hour, clk.Now())
	expired := forge(t, stranger, stranger.Public(), keycast.Facts{RedirectOrigin: "x", BunkerPubkey: u.Facts.BunkerPubkey}, time.Hour, clk.Now().Add(-2*time.Hour))

	for _, tt := range []struct{ name, header, msg string }{
		{"missing header", "", keycast.MsgAuthRequired},
		{"not bearer", "Basic abc", keycast.MsgInvalidToken},
		{"tampered payload", "Bearer " + tampered, keycast.MsgInvalidToken},
		{"tampered signature", "Bearer " + badSig, keycast.MsgInvalidToken},
		{"wrong issuer", "Bearer " + wrongIssuer, keycast.MsgInvalidToken},
		{"expired", "Bearer " + expired, keycast.MsgInvalidToken},
		{"session token (no bunker_pubkey)", "Bearer " + a.session, keycast.MsgInvalidToken},
		{"garbage", "Bearer a.b.c", keycast.MsgInvalidToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r resp
			if tt.header == "" {
				r = c.do("POST", keycast.PathNostr, `{"method":"get_public_key","params":[]}`)
			} else {
				r = c.do("POST", keycast.PathNostr, `{"method":"get_public_key","params":[]}`, "Authorization", tt.header)
			}
			wantError(t, r, 401, tt.msg, tt.name)
		})
	}

	t.Run("expired token refused on a cache hit", func(t *testing.T) {
		rpcString(t, c.rpc(tr.AccessToken, "get_public_key"), "warm")
		before := c.metrics()
		clk.Advance(24*time.Hour + 2*time.Second)
		wantError(t, c.rpc(tr.AccessToken, "get_public_key"), 401, keycast.MsgInvalidToken, "expired on hit")
		after := c.metrics()
		if after[keycast.MetricHTTPRPCCacheHits] != before[keycast.MetricHTTPRPCCacheHits] {
			t.Error("an expired cached handler counted as a hit")
		}
		if after[keycast.MetricHTTPRPCCacheSize] != before[keycast.MetricHTTPRPCCacheSize]-1 {
			t.Errorf("expired handler not evicted: size %d -> %d", before[keycast.MetricHTTPRPCCacheSize], after[keycast.MetricHTTPRPCCacheSize])
		}
	})
}

func TestRevokedAuthorizationRefusedOnCacheHit(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			_, c := startServer(t, keycastserver.Config{DatabaseURL: b.URL(t)})
			a := c.register("revoke@test.local", nil)
			keep := c.grant(a, keycast.LoadtestScope)
			gone := c.grant(a, keycast.LoadtestScope)
			for range 3 {
				rpcString(t, c.rpc(gone.AccessToken, "get_public_key"), "warm")
				rpcString(t, c.rpc(keep.AccessToken, "get_public_key"), "warm")
			}
			u, _ := keycast.ParseUCAN(gone.AccessToken)
			before := c.metrics()

			r := c.do("POST", "/api/user/sessions/revoke", map[string]string{"bunker_pubkey": u.Facts.BunkerPubkey},
				"Cookie", keycast.SessionCookieName+"="+a.session, "Origin", c.base)
			wantStatus(t, r, 200, "revoke")
			if !strings.Contains(string(r.body), `"success":true`) {
				t.Fatalf("revoke answer %s", r.body)
			}
			wantError(t, c.rpc(gone.AccessToken, "get_public_key"), 401, keycast.MsgInvalidToken, "revoked on hit")
			wantError(t, c.rpc(gone.AccessToken, "sign_event", map[string]any{"pubkey": a.pubkey, "created_at": 1, "kind": 1, "tags": []any{}, "content": "x"}),
				401, keycast.MsgInvalidToken, "revoked sign_event")
			rpcString(t, c.rpc(keep.AccessToken, "get_public_key"), "other authorization still works")
			after := c.metrics()
			if after[keycast.MetricHTTPRPCCacheSize] != before[keycast.MetricHTTPRPCCacheSize]-1 {
				t.Errorf("cache size %d -> %d, want one eviction", before[keycast.MetricHTTPRPCCacheSize], after[keycast.MetricHTTPRPCCacheSize])
			}
			if after["keycast_oauth_authorizations_revoked_total"] != 1 || after[keycast.MetricHTTPRPCAuthErrors] != before[keycast.MetricHTTPRPCAuthErrors]+2 {
				t.Errorf("revoked %d, auth errors %d -> %d", after["keycast_oauth_authorizations_revoked_total"],
					before[keycast.MetricHTTPRPCAuthErrors], after[keycast.MetricHTTPRPCAuthErrors])
			}
			// Revoking again, or someone else's authorization, is refused.
			wantError(t, c.do("POST", "/api/user/sessions/revoke", map[string]string{"bunker_pubkey": u.Facts.BunkerPubkey},
				"Authorization", "Bearer "+keep.AccessToken), 401, keycast.MsgInvalidToken, "second revoke")
			wantError(t, c.do("POST", "/api/user/sessions/revoke", map[string]string{"bunker_pubkey": u.Facts.BunkerPubkey}),
				401, keycast.MsgAuthRequired, "revoke without credentials")
		})
	}
}

func TestPolicyBlocksOperations(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	a := c.register("policy@test.local", nil)
	event := func(kind int) map[string]any {
		return map[string]any{"pubkey": a.pubkey, "created_at": 1, "kind": kind, "tags": []any{}, "content": "x"}
	}
	peer := keycast.MustGenerateSecretKey().Public().Hex()
	tests := []struct {
		scope  string
		method string
		params []any
		status int
	}{
		{"policy:readonly", "sign_event", []any{event(1)}, 403},
		{"policy:readonly", "sign_event", []any{event(keycast.NIP42AuthKind)}, 200},
		{"policy:readonly", "nip44_encrypt", []any{peer, "x"}, 403},
		{"policy:readonly", "get_public_key", nil, 200},
		{"policy:social", "sign_event", []any{event(1)}, 200},
		{"policy:social", "sign_event", []any{event(30023)}, 403},
		{"policy:wallet", "sign_event", []any{event(9734)}, 200},
		{"policy:wallet", "sign_event", []any{event(1)}, 403},
		{"policy:full", "sign_event", []any{event(30023)}, 200},
	}
	tokens := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.scope+"/"+tt.method, func(t *testing.T) {
			tok, ok := tokens[tt.scope]
			if !ok {
				tok = c.grant(a, tt.scope).AccessToken
				tokens[tt.scope] = tok
			}
			r := c.rpc(tok, tt.method, tt.params...)
			if tt.status == 403 {
				wantError(t, r, 403, keycast.MsgPolicyDenied, "policy")
				return
			}
			wantStatus(t, r, tt.status, "policy")
		})
	}
}

func TestRegisterAndBodyErrors(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{BodyLimit: 1024})
	c.register("dup@test.local", nil)
	nsec := keycast.EncodeNsec(keycast.MustGenerateSecretKey())
	byok := c.register("byok@test.local", &nsec)
	sk, _ := keycast.ParseSecretKey(nsec)
	if byok.pubkey != sk.Public().Hex() {
		t.Fatalf("BYOK pubkey %s, want %s", byok.pubkey, sk.Public().Hex())
	}
	reg := func(body any, headers ...string) resp { return c.do("POST", keycast.PathRegister, body, headers...) }
	origin := []string{"Origin", c.base}
	tests := []struct {
		name   string
		r      resp
		status int
		msg    string
	}{
		{"no origin", reg(map[string]string{"email": "x@y.z", "password": "p"}), 400, keycast.MsgOriginRequired},
		{"duplicate email", reg(map[string]string{"email": "dup@test.local", "password": "p"}, origin...), 409, ""},
		{"duplicate key", reg(map[string]any{"email": "other@test.local", "password": "p", "nsec": nsec}, origin...), 409, ""},
		{"bad nsec", reg(map[string]any{"email": "n@test.local", "password": "p", "nsec": "nsec1garbage"}, origin...), 400, ""},
		{"bad email", reg(map[string]string{"email": "nope", "password": "p"}, origin...), 400, ""},
		{"empty password", reg(map[string]string{"email": "e@test.local", "password": ""}, origin...), 400, ""},
		{"missing field", reg(map[string]string{"email": "e@test.local"}, origin...), 422, ""},
		{"malformed JSON", reg(`{"email":`, origin...), 400, ""},
		{"not an object", reg(`[1,2]`, origin...), 422, ""},
		{"too large", reg(`{"email":"`+strings.Repeat("a", 2000)+`","password":"p"}`, origin...), 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.msg != "" {
				wantError(t, tt.r, tt.status, tt.msg, tt.name)
				return
			}
			wantStatus(t, tt.r, tt.status, tt.name)
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		req, _ := http.NewRequest("POST", c.base+keycast.PathRegister, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Origin", c.base)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 415 {
			t.Fatalf("status %d, want 415", res.StatusCode)
		}
	})
	t.Run("rpc body too large", func(t *testing.T) {
		wantStatus(t, c.do("POST", keycast.PathNostr, `{"method":"x","params":["`+strings.Repeat("a", 2000)+`"]}`, "Authorization", "Bearer x"), 413, "rpc too large")
	})
	t.Run("rpc malformed", func(t *testing.T) {
		wantStatus(t, c.do("POST", keycast.PathNostr, `{"method":`, "Authorization", "Bearer x"), 400, "rpc malformed")
		wantStatus(t, c.do("POST", keycast.PathNostr, `{"params":[]}`, "Authorization", "Bearer x"), 422, "rpc without method")
	})
}

func TestPublicEndpointsAndCORS(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{AllowedOrigins: []string{"https://app.example.com"}})
	for _, p := range []string{keycast.PathHealth, keycast.PathStartup, keycast.PathReady} {
		if r := c.do("GET", p, nil); r.status != 200 || len(r.body) != 0 {
			t.Errorf("%s: %d %q", p, r.status, r.body)
		}
	}
	var pl struct {
		Policies []keycast.PolicyInfo `json:"policies"`
	}
	c.do("GET", keycast.PathPolicies, nil).json(t, &pl)
	if len(pl.Policies) != 4 || pl.Policies[0].Slug != "social" {
		t.Fatalf("policies %+v", pl)
	}

	r := c.do("OPTIONS", keycast.PathNostr, nil, "Origin", "https://anything.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Headers") != "authorization,content-type" {
		t.Errorf("nostr preflight: %d %v", r.status, r.header)
	}
	for _, tt := range []struct{ origin, want string }{
		{"https://app.example.com", "https://app.example.com"},
		{"http://localhost:5173", "http://localhost:5173"},
		{"https://evil.example", ""},
	} {
		r := c.do("OPTIONS", keycast.PathRegister, nil, "Origin", tt.origin, "Access-Control-Request-Method", "POST")
		if got := r.header.Get("Access-Control-Allow-Origin"); got != tt.want {
			t.Errorf("register preflight from %s: allow-origin %q, want %q", tt.origin, got, tt.want)
		}
		if tt.want != "" && r.header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("register preflight from %s: no credentials", tt.origin)
		}
	}
	if r := c.do("GET", keycast.PathNostr, nil); r.status != 405 {
		t.Errorf("GET /api/nostr: %d", r.status)
	}
}

// TestMetricsExposition checks the 19 Keycast series come first, in Keycast's order, each with
// HELP and TYPE, followed by the histograms and admission series.
func TestMetricsExposition(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})
	a := c.register("m@test.local", nil)
	rpcString(t, c.rpc(c.grant(a, keycast.LoadtestScope).AccessToken, "get_public_key"), "one call")
	r := c.do("GET", keycast.PathMetrics, nil)
	if ct := r.header.Get("Content-Type"); ct != keycast.MetricsContentType {
		t.Errorf("Content-Type %q", ct)
	}
	var order []string
	for _, line := range strings.Split(string(r.body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			order = append(order, strings.Fields(name)[0])
		}
	}
	if len(order) < len(keycast.MetricSeries) {
		t.Fatalf("only %d series", len(order))
	}
	for i, s := range keycast.MetricSeries {
		if order[i] != s.Name {
			t.Fatalf("series %d is %s, want %s (order matters)", i, order[i], s.Name)
		}
		if !strings.Contains(string(r.body), "# HELP "+s.Name+" ") {
			t.Errorf("no HELP for %s", s.Name)
		}
	}
	rest := strings.Join(order[len(keycast.MetricSeries):], " ")
	for _, want := range []string{"keycast_http_rpc_operation_duration_seconds", "keycast_expensive_resource_rejections_total", "keycast_http_rpc_rate_limited_total"} {
		if !strings.Contains(rest, want) {
			t.Errorf("missing %s after the Keycast series (got %s)", want, rest)
		}
	}
	if !strings.Contains(string(r.body), `keycast_http_rpc_operation_duration_seconds_count{method="get_public_key",outcome="success"} 1`) {
		t.Error("histogram did not count the get_public_key call")
	}
	sm := keycast.ParseServerMetrics(r.body)
	if sm.HTTPRPCRequestsTotal != 1 || sm.HTTPRPCSuccess != 1 || sm.HTTPRPCCacheMisses != 1 {
		t.Errorf("parsed %+v", sm)
	}
}

func TestRateLimit(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{RPCRatePerSecond: 0.001, RPCBurst: 2})
	a := c.register("rl@test.local", nil)
	tok := c.grant(a, keycast.LoadtestScope).AccessToken
	other := c.grant(a, keycast.LoadtestScope).AccessToken
	rpcString(t, c.rpc(tok, "get_public_key"), "1")
	rpcString(t, c.rpc(tok, "get_public_key"), "2")
	r := c.rpc(tok, "get_public_key")
	wantStatus(t, r, 429, "third call")
	var e keycast.ErrorBody
	r.json(t, &e)
	if e.Code != keycast.CodeRateLimited || e.Error == "" || r.header.Get("Retry-After") == "" || r.header.Get("Retry-After") == "0" {
		t.Fatalf("429 answer %s %v", r.body, r.header)
	}
	rpcString(t, c.rpc(other, "get_public_key"), "another authorization has its own bucket")
	if m := c.metrics(); m["keycast_http_rpc_rate_limited_total"] != 1 {
		t.Errorf("rate_limited_total = %d", m["keycast_http_rpc_rate_limited_total"])
	}
}

// TestProvisionedUsersCanSign writes users the way the load tool's DB mode does (store +
// master key, user-signed token with bunker_pubkey) and signs with them.
func TestProvisionedUsersCanSign(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			srv, c := startServer(t, keycastserver.Config{DatabaseURL: b.URL(t)})
			ctx := context.Background()
			st := srv.Store()
			tn, err := st.EnsureTenant(ctx, keycast.LoadtestTenantDomain, keycast.LoadtestTenantName)
			if err != nil {
				t.Fatal(err)
			}
			sk := keycast.MustGenerateSecretKey()
			signer := keycast.NewSigner(sk)
			sealed, err := srv.MasterKey().Seal(sk[:])
			if err != nil {
				t.Fatal(err)
			}
			bunker := keycast.MustGenerateSecretKey().Public().Hex()
			err = st.Provision(ctx, []keycaststore.Provision{{
				User:               keycaststore.User{Pubkey: signer.Public().Hex(), TenantID: tn.ID, Email: "loadtest-0@test.local", PasswordHash: keycast.LoadtestPasswordHash, EmailVerified: true},
				EncryptedSecretKey: sealed,
				Authorization: keycaststore.Authorization{BunkerPubkey: bunker, Secret: "s", Relays: keycast.LoadtestDBRelaysJSON,
					Handle: strings.Repeat("ab", 32), HandleExpiresAt: time.Now().Add(30 * 24 * time.Hour)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			tok := forge(t, signer, signer.Public(), keycast.Facts{TenantID: keycast.Int64(tn.ID), Email: "loadtest-0@test.local",
				RedirectOrigin: keycast.LoadtestRedirectOrigin, BunkerPubkey: bunker}, 24*time.Hour, time.Now())
			body, _ := keycast.AppendRPCBody(nil, keycast.MethodSignEvent, signer.Public().Hex(), time.Now().Unix(), "")
			var ev keycast.Event
			if err := json.Unmarshal(rpcResult(t, c.do("POST", keycast.PathNostr, body, "Authorization", "Bearer "+tok), "provisioned sign"), &ev); err != nil {
				t.Fatal(err)
			}
			if err := keycast.VerifyEvent(ev); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRestartKeepsTokens: the generated server key and master key persist in the data
// directory, so tokens issued before a restart keep working.
func TestRestartKeepsTokens(t *testing.T) {
	dir := t.TempDir()
	var tok, pub string
	func() {
		_, c := startServer(t, keycastserver.Config{DataDir: dir})
		a := c.register("restart@test.local", nil)
		tok, pub = c.grant(a, keycast.LoadtestScope).AccessToken, a.pubkey
	}()
	_, c := startServer(t, keycastserver.Config{DataDir: dir})
	if got := rpcString(t, c.rpc(tok, "get_public_key"), "after restart"); got != pub {
		t.Fatalf("after restart: %s", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, keycastserver.MasterKeyFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v", fi, err)
	}
}

// TestOfficialVectorsThroughRPC drives the official BIP-340 keys and NIP-44 payloads through
// the server: a user registered with a vector's secret key gets the vector's public key, and
// nip44_decrypt opens the vector's payloads.
func TestOfficialVectorsThroughRPC(t *testing.T) {
	_, c := startServer(t, keycastserver.Config{})

	f, err := os.Open(vectorFile(t, "bip340-test-vectors.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Several rows of the current revision share one secret key (they sign
	// messages of other lengths): register each distinct key once, since a
	// second registration of the same key is a conflict, and check every
	// signing row's public key against it.
	registered := map[string]string{} // secret key (upper-case hex) -> public key the server derived
	n := 0
	for i, row := range rows[1:] {
		if row[1] == "" {
			continue // verification-only rows have no secret key
		}
		nsec := strings.ToUpper(row[1])
		pub, ok := registered[nsec]
		if !ok {
			a := c.register(fmt.Sprintf("bip340-%d@test.local", i), &nsec)
			pub = a.pubkey
			registered[nsec] = pub
		}
		if !strings.EqualFold(pub, row[2]) {
			t.Errorf("vector %s: pubkey %s, want %s", row[0], pub, row[2])
		}
		n++
	}
	if n < 8 || len(registered) < 5 {
		t.Fatalf("only %d BIP-340 signing rows with %d distinct keys; the current revision has 8 with 5", n, len(registered))
	}

	raw, err := os.ReadFile(vectorFile(t, "nip44.vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		V2 struct {
			Valid struct {
				EncryptDecrypt []struct {
					Sec1, Sec2, Plaintext, Payload string
				} `json:"encrypt_decrypt"`
			} `json:"valid"`
		} `json:"v2"`
	}
	if err := json.Unmarshal(raw, &vec); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for i, v := range vec.V2.Valid.EncryptDecrypt {
		tok, ok := tokens[v.Sec1]
		if !ok {
			sec := v.Sec1
			a := c.register(fmt.Sprintf("nip44-%d@test.local", i), &sec)
			tok = c.grant(a, "policy:full").AccessToken
			tokens[v.Sec1] = tok
		}
		sk2, err := keycast.ParseSecretKey(v.Sec2)
		if err != nil {
			t.Fatal(err)
		}
		if got := rpcString(t, c.rpc(tok, "nip44_decrypt", sk2.Public().Hex(), v.Payload), "nip44 vector"); got != v.Plaintext {
			t.Errorf("nip44 vector %d: %q, want %q", i, got, v.Plaintext)
		}
	}
}
