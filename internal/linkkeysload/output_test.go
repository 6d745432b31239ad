package linkkeysload

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func mustIP(s string) IPv4 {
	a, err := ParseIPv4("x", s)
	if err != nil {
		panic(err)
	}
	return a
}

// latencies gives a histogram with fixed samples.
func latencies(us ...int64) *hist.Histogram {
	h := hist.New()
	for _, v := range us {
		h.RecordMicros(v)
	}
	return h
}

func TestGoldenConnections(t *testing.T) {
	cfg := ConnectionsConfig{Count: 200000, Concurrency: 3000, HoldSecs: 20, AttemptTimeout: 20 * time.Second,
		Sources: SourceAddrs{Base: mustIP("127.0.1.0"), Count: 64}, ProgressEvery: 5000}
	var b bytes.Buffer
	WriteConnectionsHeader(&b, cfg)
	p := &SeedProgress{W: &b, Every: 5000, OKName: "success", NoName: "failed"}
	for n := int64(1); n <= 10001; n++ {
		p.Update(n, n-n/1000, n/1000)
	}
	a := newAttempts()
	a.Attempted, a.Succeeded, a.Failed = 200000, 199977, 23
	a.Classes = map[string]int64{"attempt_timeout": 23}
	a.Reasons = map[string]int64{"attempt_timeout": 23}
	a.Latency = latencies(900, 1200, 2500, 40000)
	r := Result{Elapsed: Duration(34_612_345_678), Attempts: a,
		Hold: &Hold{HoldSecs: 20, Held: 199977, StillOpen: 199970, RampTime: Duration(14_612_000_000), RSSBaseline: 10 << 20, RSSHeld: 10<<20 + 199977*6000}}
	r.Finish()
	WriteConnectionsDone(&b, cfg, r)
	// Without failures there is no reasons line.
	a2 := newAttempts()
	a2.Attempted, a2.Succeeded = 500, 500
	WriteConnectionsDone(&b, ConnectionsConfig{Count: 500}, Result{Elapsed: Duration(1_270_000_000), Attempts: a2})
	// Several classes and detailed reasons, sorted.
	a3 := newAttempts()
	recordAttempt(a3, Failure{Stage: StageConnect, Detail: "EADDRNOTAVAIL"}, 0)
	recordAttempt(a3, Failure{Stage: StageTLS, Detail: "EOF"}, 0)
	recordAttempt(a3, Failure{Stage: StageTLS, Detail: "ECONNRESET"}, 0)
	recordAttempt(a3, Failure{Stage: StageTimeout}, 0)
	WriteConnectionsDone(&b, ConnectionsConfig{Count: 4}, Result{Elapsed: Duration(850_500_000), Attempts: a3})
	// A server that died mid-hold: every held connection lost, the server process gone; then one
	// whose losses were seen at one moment, and one where they were only counted at the end.
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lost := Result{Elapsed: Duration(9_100_000_000), Attempts: a2, TargetInfo: Target{PID: 4242},
		Hold: &Hold{HoldSecs: 20, Held: 500, StillOpen: 0, RampTime: Duration(1_000_000_000), Start: start, Lasted: Duration(7_250_000_000),
			Loss: &HoldLoss{Lost: 500, Reasons: map[string]int64{"closed_by_server": 498, "reset": 2},
				First: start.Add(7_201_400_000), Last: start.Add(7_248_000_000), ServerGone: true}}}
	WriteConnectionsDone(&b, ConnectionsConfig{Count: 500}, lost)
	lost.Hold.Loss = &HoldLoss{Lost: 3, Reasons: map[string]int64{"closed_by_server": 3}, First: start.Add(-2_000_000), Last: start.Add(-2_000_000)}
	lost.Hold.StillOpen, lost.Hold.Lasted = 497, Duration(20_000_000_000)
	WriteConnectionsDone(&b, ConnectionsConfig{Count: 500}, lost)
	lost.Hold.Loss = &HoldLoss{Lost: 3, Reasons: map[string]int64{"unknown": 3}}
	WriteConnectionsDone(&b, ConnectionsConfig{Count: 500}, lost)
	golden(t, "connections", b.Bytes())
}

func TestGoldenHandshakeBench(t *testing.T) {
	cfg := HandshakeConfig{DurationSecs: 15, Concurrency: 256, Sources: SourceAddrs{Base: mustIP("127.0.2.0"), Count: 128}}
	var b bytes.Buffer
	WriteHandshakeHeader(&b, cfg)
	a := newAttempts()
	a.Attempted, a.Succeeded = 284584, 284584
	a.Latency = latencies(3000, 3100, 9000)
	srv := Duration(82_000_000_000)
	WriteHandshakeDone(&b, cfg, Result{Attempts: a, Handshakes: &Handshakes{Completed: 284584, Full: 284584},
		ClientCPU: Duration(90_000_000_000), ServerCPU: &srv})
	cfg.Resume = true
	cfg.DurationSecs = 10
	a = newAttempts()
	recordAttempt(a, Failure{Stage: StageTLS, Detail: "EOF"}, 0)
	WriteHandshakeDone(&b, cfg, Result{Attempts: a, Handshakes: &Handshakes{Completed: 50010, Failed: 1, Full: 64, Resumed: 49946}})
	// Mostly refused by the per-source limit: per attempt and per handshake differ by 36x.
	cfg = HandshakeConfig{DurationSecs: 5, Concurrency: 32}
	WriteHandshakeDone(&b, cfg, Result{Handshakes: &Handshakes{Completed: 768, Failed: 27134, Full: 768},
		ClientCPU: Duration(5_000_000_000), ServerCPU: &srv})
	// A zero duration divides by zero as Rust does.
	cfg = HandshakeConfig{DurationSecs: 0, Concurrency: 1}
	WriteHandshakeDone(&b, cfg, Result{Handshakes: &Handshakes{}})
	golden(t, "handshake-bench", b.Bytes())
}

func TestGoldenRequestBench(t *testing.T) {
	cfg := RequestConfig{Connections: 64, DurationSecs: 20, Op: OpDomainKeys}
	var b bytes.Buffer
	WriteRequestHeader(&b, cfg)
	WriteRequestEstablished(&b, 64)
	WriteRequestDone(&b, cfg, Result{Requests: &Requests{Completed: 2_100_000, Sent: 2_100_064, Latency: latencies(300, 400, 700)}, ClientCPU: Duration(17_500_000_000)})
	cfg = RequestConfig{Connections: 16, DurationSecs: 5, Op: OpHello, Pipeline: 8}
	WriteRequestHeader(&b, cfg)
	WriteRequestEstablished(&b, 16)
	WriteRequestDone(&b, cfg, Result{Requests: &Requests{Completed: 1700, Errors: 120000, IOErrors: 1, DecodeErrors: 2,
		Statuses: map[string]int64{"Unavailable": 119997}, Latency: latencies(100)}})
	cfg = RequestConfig{Connections: 64, DurationSecs: 10, Op: OpDomainKeys, Rate: 50000}
	WriteRequestDone(&b, cfg, Result{Requests: &Requests{Completed: 500000, Sent: 500000, LateSends: 12, LateThreshold: Duration(LateThreshold),
		Latency: latencies(200, 300, 5000), Uncorrected: latencies(150, 250, 400)}})
	golden(t, "request-bench", b.Bytes())
}

func TestGoldenDDoS(t *testing.T) {
	cfg := DDoSConfig{Sources: 12000, Concurrency: 500, Base: mustIP("127.0.5.0"), ProgressEvery: 5000}
	var b bytes.Buffer
	WriteDDoSHeader(&b, cfg)
	p := &SeedProgress{W: &b, Every: 5000, OKName: "allowed", NoName: "denied"}
	for n := int64(1); n <= 12000; n++ {
		p.Update(n, min(n, 1099), max(n-1099, 0))
	}
	a := newAttempts()
	for range 1099 {
		recordAttempt(a, Failure{}, time.Millisecond)
	}
	for range 10901 {
		recordAttempt(a, Failure{Stage: StageTLS, Detail: "EOF"}, 0)
	}
	WriteDDoSDone(&b, cfg, Result{Elapsed: Duration(1_270_000_000), Attempts: a})
	before := linkkeys.MetricsLine{Label: "running", AcceptedConnections: 17, Extra: map[string]float64{"established_total": 17}}
	after := linkkeys.MetricsLine{Label: "running", AcceptedConnections: 12017, ShedHandshakeGlobal: 8963, ShedHandshakeOverflow: 1938,
		Extra: map[string]float64{"established_total": 17 + 1099}}
	rss := uint64(20 << 20)
	after.ProcessRSSBytes = &rss
	WriteAccounting(&b, NewServerAccounting("/tmp/server.log", before, after, 12000, 1099, 10901, true))
	after.ShedHandshakeOverflow = 1955 // the seed's unexplained 17 extra
	WriteAccounting(&b, NewServerAccounting("/tmp/server.log", before, after, 12000, 1099, 10901, false))
	golden(t, "ddos", b.Bytes())
}

func TestGoldenSmokeSummary(t *testing.T) {
	var b bytes.Buffer
	steps := []SmokeStep{
		{Name: "connections", OK: true, Detail: "established=500/500; server accounting matches every attempt"},
		{Name: "handshake-bench", OK: true, Detail: "completed=768 failed=27134 (failures are the default per-source handshake limit at work)"},
		{Name: "request-bench", OK: true, Detail: "completed=1728 errors=411118 (status-7 answers are the default public-read limit at work)"},
		{Name: "ddos", OK: true, Detail: "allowed=500 denied=0; server accounting matches every attempt"},
	}
	WriteSmokeSummary(&b, Summary{OK: true, Steps: steps})
	steps[3] = SmokeStep{Name: "ddos", Detail: "allowed=499 denied=1; server accounting does not match the client's attempts"}
	WriteSmokeSummary(&b, Summary{OK: false, Steps: steps})
	golden(t, "smoke", b.Bytes())
}

func TestGoldenResultJSON(t *testing.T) {
	a := newAttempts()
	recordAttempt(a, Failure{}, 1500*time.Microsecond)
	recordAttempt(a, Failure{}, 2500*time.Microsecond)
	recordAttempt(a, Failure{Stage: StageTLS, Detail: "EOF"}, 0)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := Result{Attempts: a}
	r.Command, r.Flags, r.Target = CmdDDoS, map[string]string{"sources": "3"}, "127.0.0.1:4000"
	r.StartedAt, r.EndedAt = t0, t0.Add(1270*time.Millisecond)
	r.Segments = []engine.Segment{{Index: 0, Count: 1}}
	r.Classes = linkkeysresult.AttemptClasses
	r.Envelope.Totals = map[string]int64{"success": 2, "tls_handshake_error_or_server_reject": 1}
	r.Causes = map[string]int64{"tls_handshake_error_or_server_reject:EOF": 1}
	r.Histograms = map[string]*hist.Histogram{linkkeysresult.KindConnectHandshake: a.Latency.Clone()}
	m := machine.Record{OS: "linux", Arch: "amd64", Cores: 2, GoVersion: "go1.26.8", LoadproofVersion: "devel", CollectedAt: t0}
	r.Machines = []machine.Record{m}
	r.Finish()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "result.json", append(b, '\n'))
}
