package keycastload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

func TestSelectUserUpstreamValues(t *testing.T) {
	// The unit test of upstream's runner.rs (docs/protocol-keycast.md, User selection): 20 users,
	// hot count 2.
	if HotCount(20) != 2 || HotCount(5) != 1 || HotCount(0) != 1 {
		t.Fatal("hot count is max(N/10, 1)")
	}
	for _, tc := range []struct {
		sc   keycast.Scenario
		n    uint64
		seed uint64
		want int
	}{
		{keycast.ScenarioColdStart, 0, 0, 0},
		{keycast.ScenarioColdStart, 0, 7, 7},
		{keycast.ScenarioMixed, 0, 7, 1},
		// Beyond upstream's three: the rest of the rule.
		{keycast.ScenarioWarmCache, 12345, 99, 0},
		{keycast.ScenarioColdStart, 25, 0, 5},
		{keycast.ScenarioMixed, 5, 0, 2 + 5%18},   // r%5 == 0: the cold 90%
		{keycast.ScenarioMixed, 10, 0, 2 + 10%18}, // r%5 == 0
		{keycast.ScenarioMixed, 3, 0, 1},          // r%5 != 0: r % hot
		{keycast.ScenarioMixed, ^uint64(0), 1, 2}, // the seed add wraps to r = 0: r%5 == 0, hot + 0
	} {
		if got := SelectUser(tc.sc, 20, tc.n, tc.seed); got != tc.want {
			t.Errorf("SelectUser(%s, 20, n=%d, seed=%d) = %d, want %d", tc.sc, tc.n, tc.seed, got, tc.want)
		}
	}
	// With N <= hot count, mixed rotates through all users.
	if got := SelectUser(keycast.ScenarioMixed, 1, 17, 0); got != 0 {
		t.Fatalf("one user: %d", got)
	}
}

func TestMixedSendsEightyPercentToTheHotTenth(t *testing.T) {
	hot := 0
	for n := uint64(0); n < 1000; n++ {
		if SelectUser(keycast.ScenarioMixed, 100, n, 0) < HotCount(100) {
			hot++
		}
	}
	if hot != 800 {
		t.Fatalf("%d of 1000 requests went to the hot users, want 800", hot)
	}
}

func TestClassifyTable(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		class  Class
		cause  string
	}{
		{200, `{"result":"abc"}`, Success, ""},
		{200, ` { "result" : {"id":"x","tags":[["p","q"]]} } `, Success, ""},
		{200, `{"result":"x","error":null}`, Success, ""},
		{201, `{}`, Success, ""},
		{200, `{"error":"Operation denied by policy"}`, Other, "rpc_error"},
		{200, `{"result":"x","error":{"code":1}}`, Other, "rpc_error"},
		{200, `not json`, Other, "bad_response_body"},
		{200, ``, Other, "bad_response_body"},
		{200, `["error"]`, Other, "bad_response_body"},
		{200, `{"result":"x"} trailing`, Other, "bad_response_body"},
		{200, `{"result":"x"`, Other, "bad_response_body"},
		{401, `{"error":"Invalid or expired token. Please log in again."}`, Auth, "http_401"},
		{403, `{"error":"Account restricted"}`, Auth, "http_403"},
		{429, `{"error":"slow down","code":"rate_limited"}`, RateLimited, "http_429"},
		{429, ``, RateLimited, "http_429"},
		{503, `{"error":"server at capacity, retry shortly","code":"admission_rejected"}`, Intentional, "http_503_admission_rejected"},
		{503, `{"error":"admission_rejected"}`, Intentional, "http_503_admission_rejected"},
		{503, `{"code":"admission_rejected"}`, Intentional, "http_503_admission_rejected"},
		{503, `{"error":"Database temporarily unavailable"}`, Server, "http_503"},
		{503, `{"error":"x","code":"database_unavailable"}`, Server, "http_503"},
		{503, `admission_rejected`, Server, "http_503"},
		{429, `{"code":"admission_rejected"}`, RateLimited, "http_429"},
		{500, `{"error":"Database error"}`, Server, "http_500"},
		{504, `{"error":"RPC request timed out after 8s"}`, Server, "http_504"},
		{400, `{"error":"Missing event parameter"}`, Client, "http_400"},
		{404, ``, Client, "http_404"},
		{415, `Unsupported Media Type`, Client, "http_415"},
		{302, ``, Other, "http_302"},
	} {
		cl, cause := Classify(tc.status, []byte(tc.body))
		if cl != tc.class || cause != tc.cause {
			t.Errorf("Classify(%d, %q) = %s %q, want %s %q", tc.status, tc.body, cl, cause, tc.class, tc.cause)
		}
	}
}

func TestCountsOfEveryClass(t *testing.T) {
	var c keycastresult.Counts
	for cl := Success; cl <= Other; cl++ {
		addClass(&c, cl)
	}
	want := keycastresult.Counts{Total: 8, Success: 1, Failed: 7, Auth: 1, RateLimited: 1, Intentional: 1, Server: 1, Client: 1, Network: 1, Other: 1}
	if c != want {
		t.Fatalf("%+v", c)
	}
	// The 429 and 503 tests of upstream's metrics.rs, in the newest meaning.
	s := keycastresult.Summarize(keycastresult.Counts{Total: 1, Failed: 1, RateLimited: 1}, nil, 1)
	if s.ErrorRate != 1 || s.ErrorsClient != 0 || s.IntentionalRejectionRate != 0 || s.UnintentionalErrorRate != 1 {
		t.Fatalf("429: %+v", s)
	}
	s = keycastresult.Summarize(keycastresult.Counts{Total: 1, Failed: 1, Intentional: 1}, nil, 1)
	if s.ErrorRate != 1 || s.ErrorsServer != 0 || s.IntentionalRejectionRate != 1 || s.UnintentionalErrorRate != 0 {
		t.Fatalf("503 admission_rejected: %+v", s)
	}
}

func TestSetCookieParsing(t *testing.T) {
	for _, tc := range []struct {
		in, name, value string
		del, ok         bool
	}{
		{"GCLB=abc123; Path=/; HttpOnly", "GCLB", "abc123", false, true},
		{`keycast_session="q v"; Max-Age=86400`, "keycast_session", "q v", false, true},
		{"a=; Max-Age=0", "a", "", true, true},
		{"a=b; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "a", "b", true, true},
		{"=novalue", "", "", false, false},
		{"noequals", "", "", false, false},
		{"bad name=x", "", "", false, false},
	} {
		n, v, del, ok := parseSetCookie([]byte(tc.in))
		if n != tc.name || v != tc.value || del != tc.del || ok != tc.ok {
			t.Errorf("parseSetCookie(%q) = %q %q %v %v", tc.in, n, v, del, ok)
		}
	}
	u := newUserClient(&target{host: "h"}, "/api/nostr", "t")
	u.setCookie([]byte("a=1"))
	u.setCookie([]byte("b=2"))
	u.setCookie([]byte("a=3"))
	if got := string(*u.line.Load()); got != "Cookie: a=3; b=2\r\n" {
		t.Fatalf("cookie line %q", got)
	}
	u.setCookie([]byte("a=x; Max-Age=0"))
	u.setCookie([]byte("b=x; Max-Age=-1"))
	if u.line.Load() != nil {
		t.Fatal("deleted cookies still sent")
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct{ in, addr, host, prefix, err string }{
		{"http://localhost:3000", "localhost:3000", "localhost:3000", "", ""},
		{"http://127.0.0.1:3000/", "127.0.0.1:3000", "127.0.0.1:3000", "", ""},
		{"https://keycast.example/base/", "keycast.example:443", "keycast.example", "/base", ""},
		{"http://[::1]:8080", "[::1]:8080", "[::1]:8080", "", ""},
		{"http://example", "example:80", "example", "", ""},
		{"ftp://x", "", "", "", "http://"},
		{"http://", "", "", "", "no host"},
		{"http://u:p@x", "", "", "", "credentials"},
		{"http://x/?q=1", "", "", "", "query"},
	} {
		tg, err := parseTarget(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseTarget(%q) err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || tg.addr != tc.addr || tg.host != tc.host || tg.prefix != tc.prefix {
			t.Errorf("parseTarget(%q) = %+v, %v", tc.in, tg, err)
		}
	}
}

func TestChooseMode(t *testing.T) {
	for _, tc := range []struct{ mode, url, db, want, err string }{
		{"", "http://localhost:3000", "postgres://x", ModeDB, ""},
		{"", "http://127.0.0.1:3000", "/tmp/k.sqlite3", ModeDB, ""},
		{"", "http://localhost:3000", "", ModeHTTP, ""},
		{"", "https://keycast.example", "postgres://x", ModeHTTP, ""},
		{"http", "http://localhost:3000", "postgres://x", ModeHTTP, ""},
		{"db", "https://keycast.example", "postgres://x", ModeDB, ""},
		{"db", "http://localhost:3000", "", "", "--database-url"},
		{"sql", "http://localhost:3000", "", "", "want db or http"},
	} {
		got, err := ChooseMode(tc.mode, tc.url, tc.db)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ChooseMode(%q,%q,%q) err %v", tc.mode, tc.url, tc.db, err)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("ChooseMode(%q,%q,%q) = %q %v, want %q", tc.mode, tc.url, tc.db, got, err, tc.want)
		}
	}
}

func TestCacheBlock(t *testing.T) {
	before := keycastresult.ServerMetrics{HTTPRPCCacheHits: 100, HTTPRPCCacheMisses: 10}
	after := keycastresult.ServerMetrics{HTTPRPCCacheHits: 1090, HTTPRPCCacheMisses: 20, HTTPRPCCacheSize: 20}
	want := "\n=== Server-Side Cache Metrics ===\nCache hits:   990 (99.0%)\nCache misses: 10 (1.0%)\nCache size:   20\n"
	if got := CacheBlock(before, after); got != want {
		t.Fatalf("got %q", got)
	}
	// Counters that went backwards (a restarted server) saturate at zero, and 0/0 is 0%.
	if got := CacheBlock(after, before); !strings.Contains(got, "Cache hits:   0 (0.0%)\nCache misses: 0 (100.0%)") {
		t.Fatalf("got %q", got)
	}
}

func TestParseMetrics(t *testing.T) {
	page := keycast.AppendMetricsText(nil, func(name string) uint64 {
		switch name {
		case keycast.MetricHTTPRPCRequests:
			return 42
		case keycast.MetricHTTPRPCCacheSize:
			return 3
		case "keycast_logins_total":
			return 9
		}
		return 1
	})
	page = append(page, "\n# TYPE keycast_http_rpc_operation_duration_seconds histogram\nkeycast_http_rpc_operation_duration_seconds_bucket{method=\"x\",le=\"+Inf\"} 5\nkeycast_http_rpc_operation_duration_seconds_sum{method=\"x\"} 0.5\nkeycast_http_rpc_operation_duration_seconds_count{method=\"x\"} 5\n"...)
	sm, series, err := ParseMetrics(page)
	if err != nil {
		t.Fatal(err)
	}
	want := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 42, HTTPRPCCacheHits: 1, HTTPRPCCacheMisses: 1, HTTPRPCCacheSize: 3, HTTPRPCSuccess: 1, HTTPRPCAuthErrors: 1}
	if sm != want || series["keycast_logins_total"] != 9 || len(series) != len(keycast.MetricSeries) {
		t.Fatalf("metrics %+v series %v", sm, series)
	}
	for _, bad := range []string{"<html><body>Not found</body></html>", "", "# only a comment\n", "up 1\n"} {
		if _, _, err := ParseMetrics([]byte(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) accepted a page that is not Keycast's metrics", bad)
		}
	}
}

func TestFetchServerMetricsRefusesNonMetricsPages(t *testing.T) {
	// Upstream parses any page into zeros (docs/protocol-keycast.md, Quirks); we report no snapshot.
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{404, "not found", "HTTP 404"},
		{200, "<html>welcome</html>", "not Prometheus text"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		_, _, err := FetchServerMetrics(context.Background(), srv.URL+"/")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("status %d: err %v, want %q", tc.status, err, tc.want)
		}
	}
}

func TestSnapshotsDeltas(t *testing.T) {
	b := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 10, HTTPRPCCacheSize: 50, HTTPRPCSuccess: 12}
	a := keycastresult.ServerMetrics{HTTPRPCRequestsTotal: 25, HTTPRPCCacheSize: 40, HTTPRPCSuccess: 5}
	s := Snapshots(b, a, map[string]float64{"x": 1, "y": 2}, map[string]float64{"x": 4, "z": 1})
	if s.Scope != keycastresult.ServerMetricsScope || s.Deltas.HTTPRPCRequestsTotal != 15 || s.Deltas.HTTPRPCCacheSize != 40 ||
		s.Deltas.HTTPRPCSuccess != 0 || len(s.SeriesDeltas) != 1 || s.SeriesDeltas["x"] != 3 {
		t.Fatalf("%+v %+v", s, s.Deltas)
	}
}

func TestNetworkCause(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{io.EOF, "network_eof"},
		{io.ErrUnexpectedEOF, "network_eof"},
		{&httpwire.MalformedError{Msg: "x"}, "network_bad_response"},
		{fmt.Errorf("wrapped: %w", &httpwire.MalformedError{Msg: "x"}), "network_bad_response"},
		{textproto.ProtocolError("malformed MIME header line: x"), "network_bad_response"},
		{os.ErrDeadlineExceeded, "network_timeout"},
		{context.DeadlineExceeded, "network_timeout"},
		{errors.New("weird"), "network_other"},
	} {
		if got := NetworkCause(tc.err); got != tc.want {
			t.Errorf("NetworkCause(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// FuzzScanBody checks the body judge against encoding/json: wherever the single pass is sure,
// it judges exactly as scanBodyJSON does, and scanBody always does.
func FuzzScanBody(f *testing.F) {
	for _, s := range []string{`{"result":"x"}`, `{"error":"e"}`, `{"error":null}`, `{"a":[1,{"b":"}"}]}`, `{`, `[]`, `{"a":"\u00e9"}`,
		`{"code":"admission_rejected","error":"x"}`, `{"\u0065rror":"x"}`, `{"error":"admission\u005frejected"}`, `{"error":1,"error":null}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := scanBodyJSON(b)
		if fast, sure := scanBodyFast(b); sure && !sameInfo(fast, want) {
			t.Fatalf("%q: single pass %+v, encoding/json %+v", b, fast, want)
		}
		if got := scanBody(b); !sameInfo(got, want) {
			t.Fatalf("%q: scanBody %+v, encoding/json %+v", b, got, want)
		}
		for _, st := range []int{200, 503} {
			Classify(st, b)
		}
	})
}

func sameInfo(a, b bodyInfo) bool {
	return a.object == b.object && a.hasError == b.hasError && bytes.Equal(a.errText, b.errText) && bytes.Equal(a.code, b.code)
}

// FuzzParseMetrics feeds arbitrary pages to the Prometheus snapshot parser.
func FuzzParseMetrics(f *testing.F) {
	f.Add(keycast.AppendMetricsText(nil, func(string) uint64 { return 7 }))
	f.Add([]byte("keycast_http_rpc_requests_total 1.5\n"))
	f.Add([]byte("keycast_http_rpc_requests_total{a=\"b\"} 3\n"))
	f.Add([]byte("<html>"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sm, series, err := ParseMetrics(b)
		if err == nil && series == nil {
			t.Fatal("no series map on success")
		}
		_ = sm
	})
}

func TestWriteUsersFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.json")
	uf := &keycast.UsersFile{URL: "http://x", CreatedAt: "t", Users: testUsers(1)}
	if err := keycast.WriteUsersFile(path, uf); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
}
