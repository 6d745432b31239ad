package linkkeysload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

const upstreamLine = `METRICS {"label":"running","elapsed_secs":5.001,"accepted_connections":12017,"open_connections":3,"established_connections":2,"handshakes_in_progress":1,"handshake_timeouts":0,"handshake_rejections":23,"shed_connection_limit":0,"shed_handshake_per_source":0,"shed_handshake_overflow":1955,"shed_handshake_global":8963,"frames_processed":7,"frame_buffer_bytes":0,"process_rss_bytes":28311552}`

func TestParseMetricsLineUpstream(t *testing.T) {
	s, err := linkkeys.ParseMetricsLine(upstreamLine + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Label != "running" || s.ElapsedSecs != 5.001 || s.AcceptedConnections != 12017 || s.ShedHandshakeGlobal != 8963 ||
		s.ShedHandshakeOverflow != 1955 || s.HandshakeRejections != 23 || s.ProcessRSSBytes == nil || *s.ProcessRSSBytes != 28311552 {
		t.Fatalf("parsed %+v", s)
	}
	if s.Admitted() != 12017-1955-8963 {
		t.Fatalf("admitted %d", s.Admitted())
	}
	if _, ok := s.HandshakesCompleted(); ok {
		t.Fatal("upstream line has no cumulative handshake count")
	}
}

func TestParseMetricsLineAppendedFieldsAndNull(t *testing.T) {
	line := strings.Replace(upstreamLine, `"process_rss_bytes":28311552}`, `"process_rss_bytes":null,"established_total":1099,"parked_connections":2,"note":"x"}`, 1)
	s, err := linkkeys.ParseMetricsLine(line)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProcessRSSBytes != nil {
		t.Fatal("null rss must parse as nil")
	}
	if n, ok := s.HandshakesCompleted(); !ok || n != 1099 {
		t.Fatalf("established_total: %d %v", n, ok)
	}
	if _, ok := s.Extra["note"]; ok {
		t.Fatal("non-numeric extra field must be left out")
	}
}

func TestReadMetricsLogSkipsOtherLines(t *testing.T) {
	log := "config: max_connections=200000\nlistening on 127.0.0.1:1 pid=1 (info written to x)\n" + upstreamLine + "\n" +
		strings.Replace(upstreamLine, "running", "final", 1) + "\n"
	snaps, err := ReadMetricsLog(strings.NewReader(log))
	if err != nil || len(snaps) != 2 || snaps[1].Label != "final" {
		t.Fatalf("%v %v", snaps, err)
	}
	if _, err := ReadMetricsLog(strings.NewReader("METRICS {broken\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("broken line: %v", err)
	}
}

const promText = `# HELP linkkeys_server_accepted_connections_total Every accept().
# TYPE linkkeys_server_accepted_connections_total counter
linkkeys_server_accepted_connections_total 500
# TYPE linkkeys_server_open_connections gauge
linkkeys_server_open_connections 2
# TYPE linkkeys_server_handshakes_in_progress gauge
linkkeys_server_handshakes_in_progress 0
# TYPE linkkeys_server_shed_connections_total counter
linkkeys_server_shed_connections_total{reason="connection_limit"} 1
linkkeys_server_shed_connections_total{reason="handshake_per_source"} 2
linkkeys_server_shed_connections_total{reason="handshake_overflow"} 3
linkkeys_server_shed_connections_total{reason="handshake_global"} 7
# TYPE linkkeys_server_established_total counter
linkkeys_server_established_total 487
# TYPE linkkeys_server_limiter_checks_total counter
linkkeys_server_limiter_checks_total{limiter="handshake",result="allow"} 9
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2e+07
`

func TestParsePrometheus(t *testing.T) {
	s, err := ParsePrometheus(strings.NewReader(promText))
	if err != nil {
		t.Fatal(err)
	}
	if s.AcceptedConnections != 500 || s.OpenConnections != 2 || s.ShedHandshakeGlobal != 7 || s.ShedConnectionLimit != 1 ||
		s.ShedHandshakePerSource != 2 || s.ShedHandshakeOverflow != 3 || s.ProcessRSSBytes == nil || *s.ProcessRSSBytes != 12e6 {
		t.Fatalf("%+v", s)
	}
	if n, ok := s.HandshakesCompleted(); !ok || n != 487 {
		t.Fatalf("established_total %d %v", n, ok)
	}
	if _, err := ParsePrometheus(strings.NewReader("# TYPE foo counter\nfoo 1\n")); err == nil {
		t.Fatal("metrics without accepted_connections accepted")
	}
	if _, err := ParsePrometheus(strings.NewReader("garbage{{{\n")); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestMetricsSourceFileSettles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.log")
	if err := os.WriteFile(path, []byte("listening\n"+upstreamLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := MetricsSource{Location: path}
	before, err := src.Latest(context.Background())
	if err != nil || before.AcceptedConnections != 12017 {
		t.Fatalf("%+v %v", before, err)
	}
	mark, err := src.Mark()
	if err != nil {
		t.Fatal(err)
	}
	// No line after the mark: the wait gives up with ErrNoReading.
	if _, err := src.Settled(context.Background(), mark, 150*time.Millisecond); err != ErrNoReading {
		t.Fatalf("want ErrNoReading, got %v", err)
	}
	// Only a busy line after the mark: ErrNoQuietReading with that reading.
	os.WriteFile(path, []byte("listening\n"+upstreamLine+"\n"+upstreamLine+"\n"), 0o644)
	if s, err := src.Settled(context.Background(), mark, 150*time.Millisecond); err != ErrNoQuietReading || s.AcceptedConnections != 12017 {
		t.Fatalf("want ErrNoQuietReading, got %v", err)
	}
	os.WriteFile(path, []byte("listening\n"+upstreamLine+"\n"), 0o644)
	// A busy line, then a quiet one: Settled returns the quiet one.
	busy := strings.Replace(upstreamLine, `"accepted_connections":12017`, `"accepted_connections":12500`, 1)
	quiet := strings.Replace(strings.Replace(busy, `"handshakes_in_progress":1`, `"handshakes_in_progress":0`, 1), `12500`, `12600`, 1)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(busy + "\n" + quiet + "\n" + "METRICS {half")
	f.Close()
	after, err := src.Settled(context.Background(), mark, 5*time.Second)
	if err != nil || after.AcceptedConnections != 12600 {
		t.Fatalf("%+v %v", after, err)
	}
}

func TestMetricsSourceURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(promText))
	}))
	defer srv.Close()
	src := MetricsSource{Location: srv.URL + "/metrics"}
	s, err := src.Latest(context.Background())
	if err != nil || s.AcceptedConnections != 500 {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = src.Settled(context.Background(), Mark{}, time.Second)
	if err != nil || s.AcceptedConnections != 500 {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestServerAccountingChecks(t *testing.T) {
	before, _ := linkkeys.ParseMetricsLine(strings.Replace(upstreamLine, `28311552}`, `28311552,"established_total":100}`, 1))
	after := before
	after.AcceptedConnections += 12000
	after.ShedHandshakeGlobal += 8963
	after.ShedHandshakeOverflow += 1938
	after.EstablishedTotal = 100 + 1099
	a := NewServerAccounting("log", before, after, 12000, 1099, 10901, true)
	if a.Mismatch() || len(a.Checks) != 4 {
		t.Fatalf("%+v", a.Checks)
	}
	b := NewServerAccounting("log", before, after, 12001, 1100, 10901, true)
	if !b.Mismatch() {
		t.Fatal("a missing attempt must be flagged")
	}
	var sb strings.Builder
	WriteAccounting(&sb, b)
	if !strings.Contains(sb.String(), "MISMATCH (difference +1)") || !strings.Contains(sb.String(), "WARNING") {
		t.Fatal(sb.String())
	}
}

func FuzzParsePrometheus(f *testing.F) {
	f.Add(promText)
	f.Add("linkkeys_server_accepted_connections_total 1\n")
	f.Add("# TYPE x counter\nx{a=\"b\"} NaN\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParsePrometheus(strings.NewReader(text))
		if err != nil {
			return
		}
		if s.Label != "scrape" {
			t.Fatalf("label %q", s.Label)
		}
	})
}
