package keycastresult

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
)

func sample(n int, failed uint64) *Results {
	h := hist.New()
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	c := Counts{Total: uint64(n), Success: uint64(n) - failed, Failed: failed, Server: failed}
	return &Results{Metadata: Metadata{URL: "http://x", Concurrency: 2}, Summary: Summarize(c, h, 2*time.Second), Envelope: NewEnvelope("http://x", h, nil, nil), Timeline: []TimelinePoint{}}
}

func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "r.json")
	r := sample(100, 3)
	if err := Write(path, r); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Summary != r.Summary || back.Latency().Count() != 100 {
		t.Fatalf("%+v", back.Summary)
	}
}

func TestParseRejectsInconsistentFiles(t *testing.T) {
	r := sample(3, 1)
	r.Summary.SuccessfulRequests = 1
	b, _ := json.Marshal(r)
	inconsistent := string(b)
	for _, tc := range []struct{ body, want string }{
		{`{`, "not a Keycast results file"},
		{`[]`, "not a Keycast results file"},
		{inconsistent, "successful 1 + failed 1 != total 3"},
	} {
		if _, err := Parse([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) err %v, want %q", tc.body, err, tc.want)
		}
	}
	b, _ = os.ReadFile(filepath.Join("..", "report", "testdata", "upstream-a8d40c9.json"))
	if len(b) > 0 {
		if _, err := Parse(b); err != nil {
			t.Fatalf("upstream file: %v", err)
		}
	}
}

func TestMergeIsExact(t *testing.T) {
	a, b := sample(100, 1), sample(50, 2)
	m, err := Merge([]*Results{a, b})
	if err != nil {
		t.Fatal(err)
	}
	whole := hist.New()
	whole.Merge(a.Latency())
	whole.Merge(b.Latency())
	if m.Summary.TotalRequests != 150 || m.Summary.FailedRequests != 3 || m.Summary.LatencyP99Ms != whole.Summary().P99Ms || m.Metadata.Concurrency != 4 {
		t.Fatalf("%+v", m.Summary)
	}
	if _, err := Merge([]*Results{{}}); err != ErrNoHistogram {
		t.Fatalf("merge of an upstream file: %v", err)
	}
}

// FuzzParse feeds arbitrary bytes to the results parser: it must never panic, and whatever it
// accepts is consistent.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "report", "testdata", "upstream-a8d40c9.json")); err == nil {
		f.Add(b)
	}
	if b, err := os.ReadFile(filepath.Join("..", "report", "testdata", "ours.json.golden")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"summary":{"total_requests":1,"successful_requests":1},"latency_histogram":{"hdr":"x"}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"users":[]}`))
	f.Add([]byte(`{"metadata":{},"summary":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if CheckShape(b) != nil {
			t.Fatal("accepted a file CheckShape refuses")
		}
		s := r.Summary
		if s.SuccessfulRequests+s.FailedRequests != s.TotalRequests {
			t.Fatal("accepted inconsistent counts")
		}
		if r.Latency() != nil && uint64(r.Latency().Count()) != s.TotalRequests {
			t.Fatal("accepted a histogram that disagrees with the counts")
		}
	})
}

// TestParseOldUpstreamForm reads a pre-980a13ae upstream file: no seed, rates or server_metrics;
// they default to zero and null, as serde's defaults do.
func TestParseOldUpstreamForm(t *testing.T) {
	old := `{"metadata":{"url":"u","scenario":"WarmCache","method":"GetPublicKey","concurrency":1,"duration_secs":5,"user_count":1,"timestamp":"t"},
	"summary":{"duration_secs":5.0,"requests_per_second":1.0,"total_requests":5,"successful_requests":5,"failed_requests":0,"latency_min_ms":1.0,"latency_p50_ms":1.0,"latency_p95_ms":1.0,"latency_p99_ms":1.0,"latency_max_ms":1.0,"cache_hit_ratio":1.0,"error_rate":0.0,"errors_auth":0,"errors_server":0,"errors_client":0,"errors_network":0},
	"timeline":[]}`
	r, err := Parse([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if r.Metadata.Seed != 0 || r.ServerMetrics != nil || r.Summary.UnintentionalErrorRate != 0 || r.Latency() != nil {
		t.Fatalf("defaults %+v", r)
	}
	if _, err := Parse([]byte(`{"summary":{"total_requests":"x"}}`)); err == nil {
		t.Fatal("wrong type accepted")
	}
	if _, err := Parse([]byte(`{`)); err == nil {
		t.Fatal("syntax error accepted")
	}
}

// TestParseRejectsFilesThatAreNotResults is issue 13 item 2: Parse accepted any JSON object, so
// `report` printed {} as a run with a 100.0% success rate. Each file the tools write, and an unknown
// object, is refused with what it appears to be.
func TestParseRejectsFilesThatAreNotResults(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{}`, `is an unknown JSON object missing "metadata" and "summary" (no keys at all)`},
		{`{"hello":1,"summary":{}}`, `missing "metadata" (top-level keys "hello", "summary")`},
		{`{"url":"x","created_at":"t","users":[]}`, "is a users file written by setup"},
		{`{"schema_version":1,"evidence_scope":"x","phases":[],"passed":false}`, "is a capacity evidence file"},
		{`{"schema_version":1,"algorithm":"sha256","files":[]}`, "is a capacity bundle manifest"},
		{`{"profile_name":"p","phases":[]}`, "is a capacity plan"},
		{`{"format":"loadproof-linkkeys-result/v1","command":"connections"}`, "is a LinkKeys client result"},
		{`{"metadata":{},"summary":{}}`, "lacks metadata.url, metadata.scenario"},
		{`{"metadata":[],"summary":{}}`, `has a "metadata" that is not a JSON object`},
		{`{"metadata":null,"summary":{}}`, `has a "metadata" that is not a JSON object`},
		{`[]`, "is JSON but not an object"},
		{`"x"`, "is JSON but not an object"},
		{`null`, "is JSON null"},
		{``, "is empty"},
		{`{`, "is not valid JSON"},
	} {
		_, err := Parse([]byte(tc.body))
		if err == nil || !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want ErrNotResults with %q", tc.body, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "users.json")
	os.WriteFile(path, []byte(`{"users":[]}`), 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path+" is a users file") {
		t.Fatalf("Read: %v", err)
	}
}

// TestConnectFailuresAreAttemptsNotRequests: connect failures stay out of the request count,
// throughput and latency, but count as failed attempts in the error rates (issue 13 item 3), and
// merge exactly.
func TestConnectFailuresAreAttemptsNotRequests(t *testing.T) {
	h := hist.New()
	for i := 1; i <= 10; i++ {
		h.Record(time.Millisecond)
	}
	c := Counts{Total: 10, Success: 8, Failed: 2, Server: 1, Intentional: 1, ConnectFailures: 30}
	s := Summarize(c, h, 2*time.Second)
	if s.TotalRequests != 10 || s.RequestsPerSecond != 5 || s.ConnectFailures != 30 {
		t.Fatalf("requests %d rps %v connect %d", s.TotalRequests, s.RequestsPerSecond, s.ConnectFailures)
	}
	if s.ErrorRate != 32.0/40 || s.UnintentionalErrorRate != 31.0/40 || s.IntentionalRejectionRate != 1.0/40 {
		t.Fatalf("rates %v %v %v", s.ErrorRate, s.UnintentionalErrorRate, s.IntentionalRejectionRate)
	}
	if none := Summarize(Counts{ConnectFailures: 5}, hist.New(), time.Second); none.ErrorRate != 1 || none.RequestsPerSecond != 0 {
		t.Fatalf("only connect failures: %+v", none)
	}
	a := &Results{Summary: s, Envelope: NewEnvelope("http://x", h, nil, nil), ConnectFailureCauses: map[string]int64{"network_econnrefused": 30}}
	m, err := Merge([]*Results{a, a})
	if err != nil {
		t.Fatal(err)
	}
	if m.Summary.ConnectFailures != 60 || m.ConnectFailureCauses["network_econnrefused"] != 60 || m.Summary.ErrorRate != s.ErrorRate {
		t.Fatalf("merged %+v causes %v", m.Summary, m.ConnectFailureCauses)
	}
}

func TestFailureBreakdown(t *testing.T) {
	for _, c := range []struct {
		s    Summary
		want string
	}{
		{Summary{TotalRequests: 20, FailedRequests: 20, ErrorsAuth: 20}, "20 requests, 20 failed: 20 auth; 0 connect failures"},
		{Summary{TotalRequests: 5}, "5 requests, 0 failed; 0 connect failures"},
		{Summary{TotalRequests: 9, FailedRequests: 9, ErrorsServer: 2, RateLimitedRequests: 3, IntentionalRejections: 4, ConnectFailures: 7},
			"9 requests, 9 failed: 2 server, 3 rate-limited, 4 shed; 7 connect failures"},
	} {
		if got := c.s.FailureBreakdown(); got != c.want {
			t.Errorf("FailureBreakdown() = %q; want %q", got, c.want)
		}
	}
}
