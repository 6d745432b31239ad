package linkkeysserver

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestPrometheusEndpoint(t *testing.T) {
	s := sampleSnapshot()
	s.HandshakeLimiter.RejectedGlobal = 21
	s.PublicReadLimiter.Accepted = 22
	s.SnapshotCache.Hits = 23
	calls := 0
	reg := NewPrometheusRegistry(func() Snapshot { calls++; return s }, true)
	srv := httptest.NewServer(PrometheusHandler(reg))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"linkkeys_server_accepted_connections_total 1\n",
		"linkkeys_server_open_connections 2\n",
		"linkkeys_server_established_connections 3\n",
		"linkkeys_server_handshakes_in_progress 4\n",
		"linkkeys_server_handshake_timeouts_total 5\n",
		"linkkeys_server_handshake_rejections_total 6\n",
		`linkkeys_server_shed_connections_total{reason="connection_limit"} 7` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_per_source"} 8` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_overflow"} 9` + "\n",
		`linkkeys_server_shed_connections_total{reason="handshake_global"} 10` + "\n",
		"linkkeys_server_frames_processed_total 11\n",
		"linkkeys_server_frame_buffer_bytes 12\n",
		"linkkeys_server_process_rss_bytes 13\n",
		"linkkeys_server_established_total 14\n",
		"linkkeys_server_parked_connections 15\n",
		"linkkeys_server_rate_limited_responses_total 16\n",
		`linkkeys_server_closed_connections_total{reason="peer"} 17` + "\n",
		`linkkeys_server_closed_connections_total{reason="oversized_frame"} 18` + "\n",
		`linkkeys_server_closed_connections_total{reason="malformed_request"} 19` + "\n",
		`linkkeys_server_closed_connections_total{reason="idle_timeout"} 20` + "\n",
		`linkkeys_server_closed_connections_total{reason="io_timeout"} 21` + "\n",
		`linkkeys_server_closed_connections_total{reason="slow_frame_body"} 22` + "\n",
		`linkkeys_server_closed_connections_total{reason="frame_budget"} 23` + "\n",
		`linkkeys_server_closed_connections_total{reason="oversized_response"} 24` + "\n",
		`linkkeys_server_closed_connections_total{reason="shutdown"} 25` + "\n",
		"# TYPE linkkeys_server_closed_connections_total counter\n",
		"# TYPE linkkeys_server_frame_buffer_bytes gauge\n",
		`linkkeys_server_limiter_checks_total{limiter="handshake",result="global"} 21` + "\n",
		`linkkeys_server_limiter_checks_total{limiter="public_read",result="allow"} 22` + "\n",
		"linkkeys_server_snapshot_cache_hits_total 23\n",
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", strings.TrimSpace(want))
		}
	}
	if calls != 1 {
		t.Errorf("one scrape took %d snapshots, want 1", calls)
	}
	// Without process collectors (the --processes parent), no Go or process
	// metrics of the parent itself.
	reg = NewPrometheusRegistry(func() Snapshot { return s }, false)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "go_") || strings.HasPrefix(mf.GetName(), "process_") {
			t.Errorf("parent registry has %s", mf.GetName())
		}
	}
}

// TestPrometheusScrapesReadAfresh: a scrape right after another must show what changed between
// them (a client brackets a run of a few milliseconds with two scrapes).
func TestPrometheusScrapesReadAfresh(t *testing.T) {
	var mu sync.Mutex
	s := sampleSnapshot()
	reg := NewPrometheusRegistry(func() Snapshot { mu.Lock(); defer mu.Unlock(); return s }, false)
	srv := httptest.NewServer(PrometheusHandler(reg))
	defer srv.Close()
	scrape := func() string {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if !strings.Contains(scrape(), "linkkeys_server_accepted_connections_total 1\n") {
		t.Fatal("first scrape")
	}
	mu.Lock()
	s.AcceptedConnections = 99
	mu.Unlock()
	if text := scrape(); !strings.Contains(text, "linkkeys_server_accepted_connections_total 99\n") {
		t.Fatalf("second scrape does not show the change:\n%s", text)
	}
}
