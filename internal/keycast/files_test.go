package keycast

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsersFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	uf := &UsersFile{
		URL:       "http://127.0.0.1:3000",
		CreatedAt: "2025-12-10T12:34:56.123456789Z",
		Users: []TestUser{
			{Pubkey: nip19PubHex, Email: "lt1-0@test.local", UcanToken: "tok0"},
			{Pubkey: strings.Repeat("a", 64), Email: "lt1-1@test.local", UcanToken: "tok1"},
		},
	}
	if err := WriteUsersFile(path, uf); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	golden(t, "users.golden.json", data)
	back, err := ReadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.URL != uf.URL || len(back.Users) != 2 || back.Users[1] != uf.Users[1] {
		t.Fatalf("round trip %+v", back)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestReadUsersFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"empty users", `{"url":"x","created_at":"y","users":[]}`, "No users found in "},
		{"no users key", `{"url":"x"}`, "No users found in "},
		{"syntax", "{\n  \"users\": [,]\n}", "not valid JSON at line 2"},
		{"wrong shape", `{"users":{"a":1}}`, "does not have the setup format"},
		{"bad pubkey", `{"users":[{"pubkey":"xyz","email":"e","ucan_token":"t"}]}`, "user 0 has pubkey"},
		{"no token", `{"users":[{"pubkey":"` + nip19PubHex + `","email":"e","ucan_token":""}]}`, "empty ucan_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			os.WriteFile(p, []byte(tc.content), 0o600)
			_, err := ReadUsersFile(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ReadUsersFile(filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "setup") {
		t.Fatalf("missing file: err = %v", err)
	}
	p := filepath.Join(dir, "empty_users.json")
	if _, err := ReadUsersFile(p); err.Error() != "No users found in "+p {
		t.Fatalf("message %q", err)
	}
}

func TestMetricsText(t *testing.T) {
	if len(MetricSeries) != 19 {
		t.Fatalf("%d series, want 19", len(MetricSeries))
	}
	seen := map[string]bool{}
	for _, s := range MetricSeries {
		if seen[s.Name] || (s.Type != "counter" && s.Type != "gauge") || s.Help == "" {
			t.Fatalf("bad series %+v", s)
		}
		seen[s.Name] = true
	}
	values := map[string]uint64{MetricHTTPRPCRequests: 42, MetricHTTPRPCCacheHits: 40, MetricHTTPRPCCacheSize: 7}
	text := AppendMetricsText(nil, func(name string) uint64 { return values[name] })
	golden(t, "metrics.golden.txt", text)

	got := ParseServerMetrics(text)
	want := ServerMetrics{HTTPRPCRequestsTotal: 42, HTTPRPCCacheHits: 40, HTTPRPCCacheSize: 7}
	if got != want {
		t.Fatalf("ParseServerMetrics = %+v, want %+v", got, want)
	}
}

func TestParsePrometheusValues(t *testing.T) {
	text := "# HELP x y\n\nkeycast_http_rpc_requests_total 12\nkeycast_http_rpc_cache_hits_total{instance=\"a\"} 5\nkeycast_http_rpc_cache_misses_total 1.5\nkeycast_http_rpc_success_total   9   1700000000\nlonely\n"
	v := ParsePrometheusValues([]byte(text))
	if v["keycast_http_rpc_requests_total"] != 12 || v[`keycast_http_rpc_cache_hits_total{instance="a"}`] != 5 || v["keycast_http_rpc_success_total"] != 9 {
		t.Fatalf("values %v", v)
	}
	if _, ok := v["keycast_http_rpc_cache_misses_total"]; ok {
		t.Fatal("float value kept")
	}
	m := ParseServerMetrics([]byte(text))
	if m.HTTPRPCCacheHits != 0 || m.HTTPRPCRequestsTotal != 12 {
		t.Fatalf("labelled series must not count: %+v", m)
	}
	if ParseServerMetrics([]byte("<html>not metrics</html>")) != (ServerMetrics{}) {
		t.Fatal("HTML page did not parse to zeros")
	}
}

func TestAPIJSON(t *testing.T) {
	// Field names and omission rules of docs/protocol-keycast.md, Server API.
	tok := TokenResponse{BunkerURL: "bunker://x", TokenType: TokenTypeBearer, ExpiresIn: TokenExpiresIn, Scope: LoadtestScope, AuthorizationHandle: "h"}
	b, _ := json.Marshal(tok)
	if string(b) != `{"bunker_url":"bunker://x","token_type":"Bearer","expires_in":86400,"scope":"policy:social","authorization_handle":"h"}` {
		t.Fatalf("TokenResponse %s", b)
	}
	b, _ = json.Marshal(RPCResponse{Result: json.RawMessage(`"abc"`)})
	if string(b) != `{"result":"abc"}` {
		t.Fatalf("RPCResponse %s", b)
	}
	b, _ = json.Marshal(RPCResponse{Error: "Unsupported method: x"})
	if string(b) != `{"error":"Unsupported method: x"}` {
		t.Fatalf("RPCResponse error %s", b)
	}
	if got := string(AppendErrorJSON(nil, AdmissionRejectedMessage, CodeAdmissionRejected)); got != `{"error":"server at capacity, retry shortly","code":"admission_rejected"}` {
		t.Fatalf("shedding body %s", got)
	}
	var eb ErrorBody
	json.Unmarshal([]byte(`{"error":"x","code":"rate_limited"}`), &eb)
	if eb.Code != CodeRateLimited {
		t.Fatal(eb)
	}
	var req RPCRequest
	if err := json.Unmarshal([]byte(`{"method":"get_public_key"}`), &req); err != nil || req.Params != nil {
		t.Fatalf("params default: %v %v", req.Params, err)
	}
	var ar AuthorizeRequest
	json.Unmarshal([]byte(`{"approved":true,"client_id":"loadtest","redirect_uri":"r","scope":"policy:social","code_challenge":"c","code_challenge_method":"S256"}`), &ar)
	if !ar.Approved || ar.CodeChallenge == nil || *ar.CodeChallengeMethod != "S256" {
		t.Fatalf("authorize %+v", ar)
	}
}

func TestAppendRPCBody(t *testing.T) {
	var out strings.Builder
	for _, m := range []Method{MethodGetPublicKey, MethodSignEvent, MethodNIP44Encrypt} {
		b, err := AppendRPCBody(nil, m, nip19PubHex, 1765000000, "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9")
		if err != nil {
			t.Fatal(err)
		}
		var req RPCRequest
		if err := json.Unmarshal(b, &req); err != nil || req.Method != m.RPCName() {
			t.Fatalf("%s: body %s does not parse: %v", m, b, err)
		}
		if m == MethodSignEvent {
			ev, err := ParseUnsignedEvent(req.Params[0])
			if err != nil || ev.Kind != 1 || ev.Content != "Load test 1765000000" || ev.PubKey != nip19PubHex {
				t.Fatalf("sign_event param %+v %v", ev, err)
			}
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	golden(t, "rpc_bodies.golden", []byte(out.String()))
	if _, err := AppendRPCBody(nil, MethodRegister, "", 0, ""); err == nil {
		t.Fatal("register has no RPC body")
	}
}

func TestSaveUsersFileFallsBackRatherThanLosingTokens(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	notADir := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	uf := &UsersFile{Users: []TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "only-copy"}}}
	err := SaveUsersFile(filepath.Join(notADir, "sub", "users.json"), uf)
	if err == nil {
		t.Fatal("no error")
	}
	_, after, ok := strings.Cut(err.Error(), "users created are saved in ")
	path := strings.TrimSuffix(after, " instead")
	if !ok {
		t.Fatalf("error %q names no fallback", err)
	}
	back, rerr := ReadUsersFile(path)
	if rerr != nil || back.Users[0].UcanToken != "only-copy" {
		t.Fatalf("fallback %s: %v", path, rerr)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("fallback mode %v", fi.Mode())
	}
}
