package linkkeysload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// combinedConfig is a small combined run: 200 held, 4 handshake loops and 4 request connections
// for 2 s, and a 300-source ddos wave half a second in.
func combinedConfig(t testing.TB, rs *realServer) linkkeysload.CombinedConfig {
	return linkkeysload.CombinedConfig{Target: rs.target, AttemptTimeout: 10 * time.Second,
		Held:       &linkkeysload.HeldStream{Count: 200, Concurrency: 32, HoldSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.31.0"), Count: 8}},
		Handshakes: &linkkeysload.HandshakeStream{Concurrency: 4, DurationSecs: 2, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.32.0"), Count: 8}},
		Requests: &linkkeysload.RequestStream{Connections: 4, Pipeline: 2, Op: linkkeysload.OpDomainKeys, DurationSecs: 2,
			Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.33.0"), Count: 4}},
		DDoS: []linkkeysload.DDoSWave{{StartSecs: 0.5, Sources: 300, Concurrency: 50, Base: ip(t, "127.34.0.0")}},
	}
}

func TestCombinedAgainstServer(t *testing.T) {
	rs := startReal(t, config(t, scaleProfile))
	cfg := combinedConfig(t, rs)
	var out bytes.Buffer
	var errOut bytes.Buffer
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Stderr: &errOut,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	c := res.Combined
	if c == nil || len(c.Streams) != 4 {
		t.Fatalf("%+v", c)
	}
	// A server that counts no source prefix: the whole run is checked, no stream is attributed, and
	// stderr says what would attribute them.
	if c.Attribution != "none" || c.Streams[0].Server != nil || !strings.Contains(errOut.String(),
		"start it with TCP_SOURCE_PREFIXES=held=127.0.31.0/29,handshakes=127.0.32.0/29,requests=127.0.33.0/30,ddos-1=127.34.0.0-127.34.1.43 for each stream's own") {
		t.Errorf("attribution %q, stderr:\n%s", c.Attribution, errOut.String())
	}
	held := c.Stream(linkkeysresult.StreamHeld)
	if held.Survival == nil || held.Survival.Established != 200 || held.Survival.StillOpen != 200 || held.Survival.Percent != 100 {
		t.Fatalf("survival %+v\n%s", held.Survival, out.String())
	}
	hs := c.Stream(linkkeysresult.StreamHandshakes).Result
	rq := c.Stream(linkkeysresult.StreamRequests).Result
	dd := c.Stream("ddos-1")
	if hs.Handshakes.Completed == 0 || hs.Handshakes.Failed != 0 || rq.Requests.Completed == 0 || dd.Result.Attempts.Attempted != 300 {
		t.Fatalf("handshakes %+v requests %+v ddos %+v", hs.Handshakes, rq.Requests, dd.Result.Attempts)
	}
	if dd.StartSecs != 0.5 || dd.SourceFirst != "127.34.0.0" || dd.SourceCount != 300 {
		t.Fatalf("ddos stream %+v", dd)
	}
	// Every stream's attempts together are the server's accepted connections, exactly.
	want := 200 + hs.Attempts.Attempted + 4 + 300
	if res.Attempts.Attempted != want || res.Server == nil || res.Server.Mismatch() || res.Server.Delta.Accepted != want {
		t.Fatalf("attempts %d (want %d), server %+v\n%s", res.Attempts.Attempted, want, res.Server, out.String())
	}
	// The envelope keeps the streams apart.
	if res.Envelope.Totals["held/success"] != 200 || res.Envelope.Totals["ddos-1/success"] != dd.Result.Attempts.Succeeded ||
		res.Histograms["requests/request"].Count() != rq.Requests.Completed {
		t.Fatalf("envelope totals %v", res.Envelope.Totals)
	}
	var sampled int
	for _, iv := range res.Intervals {
		if iv.Server != nil {
			sampled++
		}
	}
	if sampled < 2 {
		t.Fatalf("%d server samples in %d intervals", sampled, len(res.Intervals))
	}
	// The held stream's timeline goes on through its hold and its close: the gauge reads the 200
	// held, and each is counted as the client closes it.
	heldGauge, closedByClient := int64(0), int64(0)
	for _, iv := range res.Intervals {
		heldGauge = max(heldGauge, iv.Gauges[linkkeysresult.Prefixed(linkkeysresult.StreamHeld, linkkeysresult.GaugeHeld)])
		closedByClient += iv.Counters[linkkeysresult.Prefixed(linkkeysresult.StreamHeld, linkkeysresult.CounterClosedByClient)]
	}
	if heldGauge != 200 || closedByClient != 200 {
		t.Fatalf("held gauge peaks at %d, %d closed by the client; want 200 and 200", heldGauge, closedByClient)
	}
	for _, s := range []string{"combined: streams held=127.0.31.0+8 handshakes=127.0.32.0+8 requests=127.0.33.0+4 ddos-1=127.34.0.0+300",
		"[held] connections: DONE", "[held] survival: 200 of 200", "[handshakes] handshake-bench: DONE", "[requests] request-bench: DONE",
		"[ddos-1] ddos: DONE", "whole run, every stream's connection attempts together"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	// The file alone redraws the same lines.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	back, err := linkkeysresult.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	var redrawn bytes.Buffer
	if err := report.LinkKeysText(&redrawn, &back); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(redrawn.String(), "[held] survival: 200 of 200") || !strings.Contains(redrawn.String(), "[ddos-1] ddos: DONE") {
		t.Fatalf("redrawn:\n%s", redrawn.String())
	}
}

func TestCombinedReportsHeldConnectionsTheServerClosed(t *testing.T) {
	env := map[string]string{"TCP_IDLE_TIMEOUT_SECONDS": "1"}
	for k, v := range scaleProfile {
		env[k] = v
	}
	rs := startReal(t, config(t, env))
	cfg := linkkeysload.CombinedConfig{Target: rs.target, AttemptTimeout: 10 * time.Second,
		Held:       &linkkeysload.HeldStream{Count: 50, Concurrency: 16, HoldSecs: 3, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.35.0"), Count: 4}},
		Handshakes: &linkkeysload.HandshakeStream{Concurrency: 2, DurationSecs: 1, Rate: 200, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.36.0"), Count: 4}},
	}
	var out bytes.Buffer
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	sv := res.Combined.Stream(linkkeysresult.StreamHeld).Survival
	if sv.Established != 50 || sv.StillOpen != 0 || sv.Lost != 50 || sv.LostBy["EOF"]+sv.LostBy["ECONNRESET"] != 50 {
		t.Fatalf("survival %+v\n%s", sv, out.String())
	}
	var lost, ends int64
	for _, iv := range res.Intervals {
		lost += iv.Counters["held/lost"]
		for _, c := range []string{linkkeysresult.CounterClosedByServer, linkkeysresult.CounterClosedError, linkkeysresult.CounterClosedUnseen} {
			ends += iv.Counters[linkkeysresult.Prefixed(linkkeysresult.StreamHeld, c)]
		}
	}
	if lost != 50 || ends != 50 {
		t.Fatalf("timeline shows %d lost, %d held connections ended by the server", lost, ends)
	}
	h := res.Combined.Stream(linkkeysresult.StreamHandshakes).Result
	if h.Handshakes.Completed == 0 || h.Histograms[linkkeysresult.KindUncorrected] == nil {
		t.Fatalf("paced handshakes %+v", h.Handshakes)
	}
}

func TestCombinedRefusesOverlappingSources(t *testing.T) {
	cfg := linkkeysload.CombinedConfig{
		Held:       &linkkeysload.HeldStream{Count: 10, Concurrency: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.1.0"), Count: 64}},
		Handshakes: &linkkeysload.HandshakeStream{Concurrency: 1, DurationSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.1.32"), Count: 8}},
		DDoS:       []linkkeysload.DDoSWave{{Sources: 100, Concurrency: 0, Base: ip(t, "127.255.255.200")}},
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, s := range []string{"streams held (127.0.1.0–127.0.1.63) and handshakes (127.0.1.32–127.0.1.39) share source addresses",
		"stream ddos-1: 100 sources from 127.255.255.200 run past 127.255.255.255", "stream ddos-1: sources 100 and concurrency 0 must be at least 1"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q:\n%v", s, err)
		}
	}
}

func TestCombinedFansOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rs := startReal(t, config(t, scaleProfile))
	cfg := combinedConfig(t, rs)
	var out bytes.Buffer
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Workers: 2,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second,
		Launcher: workerLauncher(t)})
	if err != nil {
		t.Fatal(err)
	}
	held := res.Combined.Stream(linkkeysresult.StreamHeld)
	if held.Survival.Established != 200 || held.Result.Attempts.Succeeded != 200 || len(res.Segments) != 2 || len(held.Result.Segments) != 2 {
		t.Fatalf("held %+v segments %v\n%s", held.Survival, res.Segments, out.String())
	}
	if res.Server.Mismatch() || res.Combined.Stream("ddos-1").Result.Attempts.Attempted != 300 {
		t.Fatalf("server %+v\n%s", res.Server, out.String())
	}
}

// With StreamProcesses the request stream runs in a process of its own, apart from the handshake
// loops (which starve it in a shared process), the results merge as a fanned-out run's, and the held
// population is still held until the request stream, which ends last, has ended.
func TestCombinedStreamProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rs := startReal(t, config(t, scaleProfile))
	cfg := combinedConfig(t, rs)
	cfg.Requests.StartSecs = 1 // ends a second after the handshakes, in another process
	var out bytes.Buffer
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Stdout: &out, StreamProcesses: true,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second,
		Launcher: workerLauncher(t)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Combined.Streams {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"held", "handshakes", "requests", "ddos-1"}) || len(res.Segments) != 1 {
		t.Fatalf("streams %v, segments %v\n%s", names, res.Segments, out.String())
	}
	hs, rq, held := res.Combined.Stream("handshakes"), res.Combined.Stream("requests"), res.Combined.Stream("held")
	if len(hs.PIDs) != 1 || len(rq.PIDs) != 1 || hs.PIDs[0] == rq.PIDs[0] || hs.PIDs[0] == os.Getpid() || rq.PIDs[0] == os.Getpid() ||
		!slices.Equal(held.PIDs, hs.PIDs) {
		t.Fatalf("pids: handshakes %v, requests %v, held %v (this process %d)", hs.PIDs, rq.PIDs, held.PIDs, os.Getpid())
	}
	if held.Survival.Established != 200 || rq.Result.Requests.Completed == 0 || res.Server.Mismatch() {
		t.Fatalf("held %+v, requests %+v, server %+v\n%s", held.Survival, rq.Result.Requests, res.Server, out.String())
	}
	if held.Result.EndedAt.Before(rq.Result.EndedAt) {
		t.Fatalf("the held population ended at %v, before the request stream at %v", held.Result.EndedAt, rq.Result.EndedAt)
	}
}

// A live stop condition judged on the server's samples ends every stream at once and is the
// result's stop.
func TestCombinedLiveStop(t *testing.T) {
	rs := startReal(t, config(t, scaleProfile))
	cfg := linkkeysload.CombinedConfig{Target: rs.target, AttemptTimeout: 10 * time.Second,
		Held:     &linkkeysload.HeldStream{Count: 20, Concurrency: 4, HoldSecs: 60, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.37.0"), Count: 2}},
		Requests: &linkkeysload.RequestStream{Connections: 2, Op: linkkeysload.OpHello, DurationSecs: 60, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.38.0"), Count: 2}},
	}
	began := time.Now()
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Metrics: &linkkeysload.MetricsSource{Location: rs.log},
		Stop: func(elapsed time.Duration, m map[string]float64) *result.StopEvent {
			if m["established_connections"] >= 1 && elapsed >= time.Second {
				return &result.StopEvent{Reason: "stop-condition", Metric: "server.rss_bytes", Observed: m["process_rss_bytes"], Limit: 1}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop == nil || res.Stop.Reason != "stop-condition" || res.Stop.Metric != "server.rss_bytes" || time.Since(began) > 30*time.Second {
		t.Fatalf("stop %+v after %v", res.Stop, time.Since(began))
	}
	if q := res.Combined.Stream(linkkeysresult.StreamRequests).Result.Requests; q.Completed == 0 {
		t.Fatalf("requests %+v", q)
	}
}

func TestCombinedSourcePrefixes(t *testing.T) {
	cfg := linkkeysload.CombinedConfig{
		Held:       &linkkeysload.HeldStream{Count: 10, Concurrency: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.1.0"), Count: 32}},
		Handshakes: &linkkeysload.HandshakeStream{Concurrency: 1, DurationSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.2.7")}},
		Requests:   &linkkeysload.RequestStream{Connections: 1, Op: linkkeysload.OpHello, DurationSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.3.4"), Count: 4}},
		DDoS:       []linkkeysload.DDoSWave{{Sources: 300, Concurrency: 1, Base: ip(t, "127.34.0.0")}, {Name: "w2", Sources: 256, Concurrency: 1, Base: ip(t, "127.35.0.128")}},
	}
	want := "held=127.0.1.0/27,handshakes=127.0.2.7/32,requests=127.0.3.4/30,ddos-1=127.34.0.0-127.34.1.43,w2=127.35.0.128-127.35.1.127"
	if got := cfg.SourcePrefixes(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestCombinedAttributesEveryStreamBySourcePrefix: with the server counting each stream's range
// under the stream's name, two streams that both see failures (the handshake stream shed per
// source, the ddos wave through the overflow bucket) each get their own exact server accounting,
// which elimination from the whole run's counters cannot give.
func TestCombinedAttributesEveryStreamBySourcePrefix(t *testing.T) {
	cfg := linkkeysload.CombinedConfig{AttemptTimeout: 10 * time.Second,
		Held:       &linkkeysload.HeldStream{Count: 40, Concurrency: 8, HoldSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.41.0"), Count: 4}},
		Handshakes: &linkkeysload.HandshakeStream{Concurrency: 2, DurationSecs: 1, Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.42.9")}},
		Requests: &linkkeysload.RequestStream{Connections: 2, Op: linkkeysload.OpHello, DurationSecs: 1,
			Sources: linkkeysload.SourceAddrs{Base: ip(t, "127.0.43.0"), Count: 2}},
		DDoS: []linkkeysload.DDoSWave{{StartSecs: 0.3, Sources: 200, Concurrency: 20, Base: ip(t, "127.44.0.0")}},
	}
	env := map[string]string{
		"TCP_HANDSHAKE_BURST": "20", "TCP_HANDSHAKE_RATE_PER_MINUTE": "1",
		"TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD": "100", "TCP_HANDSHAKE_OVERFLOW_BURST": "10", "TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND": "0.001",
		"TCP_HANDSHAKE_GLOBAL_BURST": "100000", "TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "100000",
		linkkeysload.SourcePrefixesVar: cfg.SourcePrefixes(),
	}
	for k, v := range unlimitedReads {
		env[k] = v
	}
	rs := startReal(t, config(t, env))
	cfg.Target = rs.target
	var out, errOut bytes.Buffer
	res, err := linkkeysload.Combined(context.Background(), cfg, linkkeysload.Run{Stdout: &out, Stderr: &errOut,
		Metrics: &linkkeysload.MetricsSource{Location: rs.log}, SettleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Combined
	if c.Attribution != "source-prefix" || strings.Contains(errOut.String(), "not attributed") {
		t.Fatalf("attribution %q\n%s", c.Attribution, errOut.String())
	}
	var shed, accepted int64
	for _, s := range c.Streams {
		a := s.Result.Attempts
		ss := s.Server
		if ss == nil || ss.Prefix != s.Name || ss.Mismatch() || len(ss.Checks) != 4 {
			t.Fatalf("stream %s: server %+v\n%s", s.Name, ss, out.String())
		}
		if ss.Delta["accepted"] != a.Attempted || ss.Delta["admitted"]+ss.Shed() != a.Attempted || ss.Delta["established"] != a.Succeeded {
			t.Errorf("stream %s: attempts %d succeeded %d, server %v", s.Name, a.Attempted, a.Succeeded, ss.Delta)
		}
		shed += ss.Shed()
		accepted += ss.Delta["accepted"]
	}
	hs, dd := c.Stream(linkkeysresult.StreamHandshakes), c.Stream("ddos-1")
	if hs.Server.Delta["shed_handshake_per_source"] == 0 || hs.Result.Attempts.Failed != hs.Server.Shed() || hs.Server.Delta["shed_handshake_overflow"] != 0 {
		t.Errorf("handshakes: %d failed, server %v", hs.Result.Attempts.Failed, hs.Server.Delta)
	}
	if dd.Server.Delta["shed_handshake_overflow"] == 0 || dd.Result.Attempts.Failed != dd.Server.Shed() || dd.Server.Delta["shed_handshake_per_source"] != 0 {
		t.Errorf("ddos: %d failed, server %v", dd.Result.Attempts.Failed, dd.Server.Delta)
	}
	if held := c.Stream(linkkeysresult.StreamHeld); held.Server.Shed() != 0 || held.Survival.Percent != 100 {
		t.Errorf("held: %+v %+v", held.Server, held.Survival)
	}
	// The streams' prefixes together are the whole run: nothing else reached the server.
	if d := res.Server.Delta; d.Shed() != shed || d.Accepted != accepted || res.Server.Mismatch() {
		t.Errorf("whole run %+v; streams shed %d accepted %d", d, shed, accepted)
	}
}
