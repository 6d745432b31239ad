package capacity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/capacity/plan"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/result"
)

func u64(v uint64) *uint64 { return &v }

// lkResult builds a combined result: a held population of held (all surviving) and a ddos wave of
// 50 attempts of which the server shed 30 through the overflow bucket and 10 through the global one.
func lkResult(held int64) *linkkeysresult.Result {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	heldA := linkkeysresult.NewAttempts()
	for range held {
		heldA.Add("", "", time.Millisecond)
	}
	ddosA := linkkeysresult.NewAttempts()
	for range 10 {
		ddosA.Add("", "", time.Millisecond)
	}
	for range 40 {
		ddosA.Add(linkkeysresult.ClassTLS, linkkeysresult.ClassTLS+":EOF", time.Millisecond)
	}
	mk := func(cmd string, a *linkkeysresult.Attempts) *linkkeysresult.Result {
		r := &linkkeysresult.Result{Attempts: a}
		r.Command, r.StartedAt, r.EndedAt = cmd, t0, t0.Add(2*time.Second)
		r.Envelope.Totals = map[string]int64{}
		return r
	}
	res := &linkkeysresult.Result{Combined: &linkkeysresult.Combined{Attribution: "none", Streams: []linkkeysresult.Stream{
		{Name: "held", Kind: linkkeysresult.CmdConnections, Result: mk(linkkeysresult.CmdConnections, heldA),
			Survival: &linkkeysresult.Survival{Established: held, StillOpen: held, Percent: 100}},
		{Name: "ddos", Kind: linkkeysresult.CmdDDoS, Result: mk(linkkeysresult.CmdDDoS, ddosA)},
	}}}
	res.Command, res.StartedAt, res.EndedAt = linkkeysresult.CmdCombined, t0, t0.Add(2*time.Second)
	res.Envelope.Totals = map[string]int64{"held/success": held}
	total := held + 50
	before := linkkeys.MetricsLine{ProcessRSSBytes: u64(10 << 20)}
	after := linkkeys.MetricsLine{AcceptedConnections: uint64(total), ShedHandshakeOverflow: 30, ShedHandshakeGlobal: 10, ProcessRSSBytes: u64(20 << 20),
		EstablishedTotal: uint64(held + 10), HostTCPListenOverflows: 2, HostTCPRetransSegs: 7}
	res.Server = linkkeysload.NewServerAccounting("server.log", before, after, total, held+10, 40, true)
	res.Intervals = []result.Interval{{T: 0, Secs: 1, Server: map[string]float64{"process_rss_bytes": 30 << 20, "frame_buffer_bytes": 512}}}
	res.Finish()
	return res
}

func TestLinkKeysPhaseMetrics(t *testing.T) {
	m := LinkKeysPhaseMetrics(lkResult(100))
	want := map[string]float64{
		"held.established": 100, "held.survival_percent": 100, "held.shed_overflow": 0, "held.accounting_gap": 0,
		"ddos.attempted": 50, "ddos.denied": 40, "ddos.shed_overflow": 30, "ddos.shed_global": 10, "ddos.admitted": 10, "ddos.accounting_gap": 0,
		"server.accepted": 150, "server.accounting_gap": 0, "server.rss_peak_bytes": 30 << 20, "server.rss_baseline_bytes": 10 << 20,
		"server.rss_bytes_per_connection": float64(20<<20) / 100, "server.frame_buffer_bytes_peak": 512, "server.frame_buffer_bytes_idle": 0,
		"server.host_tcp_listen_overflows": 2, "server.host_tcp_retrans_segs": 7, "server.host_tcp_listen_drops": 0,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// A server that does not report its host's counters (upstream, older): no such figures.
	r := lkResult(100)
	r.Server.Before = linkkeys.WithoutAppended(r.Server.Before)
	if v, ok := LinkKeysPhaseMetrics(r)["server.host_tcp_retrans_segs"]; ok {
		t.Errorf("host figure %v from a server that does not report it", v)
	}
	// Two streams with failures: the server's sheds cannot be split between them.
	r = lkResult(100)
	r.Combined.Streams[0].Result.Attempts.Failed = 1
	m = LinkKeysPhaseMetrics(r)
	if _, ok := m["ddos.shed_overflow"]; ok {
		t.Fatalf("attributed sheds to ddos although held saw failures too: %v", m)
	}
	// Per-prefix counters from the server win over elimination.
	r = lkResult(100)
	r.Combined.Streams[1].Server = &linkkeysresult.StreamServer{Prefix: "ddos", Delta: map[string]int64{"accepted": 50, "admitted": 10,
		"shed_handshake_overflow": 31, "shed_handshake_global": 9}, Checks: []linkkeysresult.Check{{Name: "x", Client: 50, Server: 50, OK: true}}}
	m = LinkKeysPhaseMetrics(r)
	if m["ddos.shed_overflow"] != 31 || m["ddos.shed"] != 40 || m["ddos.accounting_gap"] != 0 {
		t.Fatalf("per-prefix: %v", m)
	}
}

// Two streams with failures, each shed for its own reason: elimination leaves both unattributed,
// the server's per-prefix counters (as linkkeysload attributes them) give each its own figures.
func TestLinkKeysPhaseMetricsTwoFailingStreams(t *testing.T) {
	r := lkResult(100)
	held := &r.Combined.Streams[0]
	for range 5 {
		held.Result.Attempts.Add(linkkeysresult.ClassTLS, linkkeysresult.ClassTLS+":EOF", time.Millisecond)
	}
	// The server saw 5 more connections, from held's range, shed per source.
	after := r.Server.After
	after.AcceptedConnections += 5
	after.ShedHandshakePerSource += 5
	m := LinkKeysPhaseMetrics(r)
	for _, k := range []string{"held.shed_per_source", "ddos.shed_overflow", "held.accounting_gap", "ddos.accounting_gap"} {
		if _, ok := m[k]; ok {
			t.Errorf("elimination attributed %s with two failing streams", k)
		}
	}
	before := r.Server.Before
	before.Sources = []linkkeys.SourceCounters{{Name: "held"}, {Name: "ddos"}}
	after.Sources = []linkkeys.SourceCounters{
		{Name: "held", Accepted: 105, Admitted: 100, ShedHandshakePerSource: 5, Established: 100, ClosedByPeer: 3},
		{Name: "ddos", Accepted: 50, Admitted: 10, ShedHandshakeOverflow: 30, ShedHandshakeGlobal: 10, Established: 10, RateLimitedResponses: 2},
	}
	// linkkeysload's combined accounting: the whole run's, then each stream's from its prefix.
	r.Server = linkkeysload.NewServerAccounting("server.log", before, after, 155, 110, 45, true)
	if r.Server.Mismatch() {
		t.Fatalf("whole run %+v", r.Server.Checks)
	}
	for i := range r.Combined.Streams {
		s := &r.Combined.Streams[i]
		s.Server = linkkeysload.StreamAccounting(s, before, after)
	}
	m = LinkKeysPhaseMetrics(r)
	want := map[string]float64{
		"held.accepted": 105, "held.admitted": 100, "held.shed": 5, "held.shed_per_source": 5, "held.shed_overflow": 0, "held.handshakes_completed": 100,
		"held.server_closed": 3, "held.accounting_gap": 0,
		"ddos.accepted": 50, "ddos.admitted": 10, "ddos.shed": 40, "ddos.shed_overflow": 30, "ddos.shed_global": 10, "ddos.shed_per_source": 0,
		"ddos.server_rate_limited": 2, "ddos.accounting_gap": 0, "server.shed": 45,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

func lkTestPlan(t *testing.T) *LinkKeysPlan {
	t.Helper()
	p, err := ReadLinkKeysPlan("../../internal/cli/testdata/linkkeys-capacity-scaled.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lkOpts(out string, runner LinkKeysRunner) LinkKeysOptions {
	return LinkKeysOptions{OutputDir: out, Runner: runner, Machine: testMachine(), Now: fixedClock,
		Validate: LinkKeysValidateOptions{ServerConfigLine: func(map[string]string) (string, error) { return "config: max_connections=1", nil }}}
}

func TestExecuteLinkKeysWritesEvidence(t *testing.T) {
	p := lkTestPlan(t)
	p.Phases = []LinkKeysPhase{p.Phases[0], p.Phases[3], p.Phases[4]}
	p.Phases[2].Checks = p.Phases[2].Checks[:2] // the canned result has no handshake or request stream
	p.Phases[2].Workload.Handshakes, p.Phases[2].Workload.Requests = nil, nil
	out := filepath.Join(t.TempDir(), "ev")
	var runs []LinkKeysPhaseRun
	ev, err := ExecuteLinkKeys(context.Background(), p, lkOpts(out, func(_ context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		runs = append(runs, run)
		run.Server.ConfigLine = run.Server.ExpectedConfigLine
		return lkResult(2000), []byte("config: max_connections=1\nMETRICS {}\n"), nil
	}))
	if err != nil || ev == nil {
		t.Fatalf("error %v; blockers %q", err, ev.CertificationBlockers)
	}
	if len(runs) != 3 || runs[2].Config.DDoS[0].Name != "ddos" || runs[2].Config.Held.HoldSecs != 2 || runs[2].Profile.Variables["TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD"] != "1000" {
		t.Fatalf("runs %+v", runs)
	}
	// Each started server is told every stream's range under the stream's name, and must run it.
	const prefixes = "held=127.0.1.0/25,ddos=127.6.0.0-127.6.4.175"
	if v := runs[2].Profile.Variables[plan.SourcePrefixesVariable]; v != prefixes || runs[2].Server.Declared[plan.SourcePrefixesVariable] != prefixes ||
		runs[2].Server.SourcePrefixes != prefixes || runs[0].Profile.Variables[plan.SourcePrefixesVariable] != "held=127.0.1.0/28" {
		t.Fatalf("prefixes %q, server %+v", v, runs[2].Server)
	}
	if _, leaked := p.EnvironmentProfiles["combined-shedding"].Variables[plan.SourcePrefixesVariable]; leaked {
		t.Fatal("the plan's profile was changed")
	}
	if ev.Harness != plan.HarnessLinkKeys || len(ev.Phases) != 3 || !ev.Passed || !ev.CertificationReady || len(ev.CertificationBlockers) != 0 {
		t.Fatalf("evidence %+v", ev)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"phase-01-established.json", "phase-01-established.server.log", "phase-03-combined.server.log"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if ev.Phases[0].Server.Log != "phase-01-established.server.log" || ev.Phases[0].Metrics["held.established"] != 2000 || ev.Phases[1].Kind != "ddos" {
		t.Fatalf("phase 1 %+v", ev.Phases[0])
	}
	b, err := os.ReadFile(filepath.Join(out, EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadLinkKeysEvidence(b)
	if err != nil || len(back.Phases) != 3 || back.Phases[1].Checks[2].Metric != "ddos.shed_overflow" {
		t.Fatalf("%v %+v", err, back)
	}
}

// A figure that could not be measured fails its check: a missing stop figure breaches the stop.
func TestExecuteLinkKeysUnmeasuredFigureStops(t *testing.T) {
	p := lkTestPlan(t)
	out := filepath.Join(t.TempDir(), "ev")
	ev, err := ExecuteLinkKeys(context.Background(), p, lkOpts(out, func(context.Context, LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		return lkResult(2000), nil, nil
	}))
	if !errors.Is(err, ErrLimitsExceeded) || errors.Is(err, ErrIncomplete) || ev == nil || ev.StopReason != StopReasonStopCondition || len(ev.Phases) != 2 {
		t.Fatalf("%v %+v", err, ev)
	}
	blockers := strings.Join(ev.CertificationBlockers, "\n")
	for _, want := range []string{`phase "handshake rate" failed check handshakes.rate: observed NaN`, `phase "handshake rate" breached stop condition stop_handshake_failure_rate`,
		`3 of 5 planned phases did not run because a stop condition was breached`} {
		if !strings.Contains(blockers, want) {
			t.Errorf("blockers lack %q:\n%s", want, blockers)
		}
	}
}

func TestExecuteLinkKeysStopsAtAServerRunningOtherLimits(t *testing.T) {
	p := lkTestPlan(t)
	out := filepath.Join(t.TempDir(), "ev")
	ev, err := ExecuteLinkKeys(context.Background(), p, lkOpts(out, func(_ context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		if run.Index == 1 {
			run.Server.ConfigLine = "config: max_connections=2"
			run.Server.Mismatches = []string{"config: max_connections=2, declared max_connections=1"}
			return nil, []byte("config: max_connections=2\n"), &SafeError{Msg: "the server runs other limits than profile \"scale\" declares: config: max_connections=2, declared max_connections=1"}
		}
		return lkResult(2000), nil, nil
	}))
	if !errors.Is(err, ErrIncomplete) || ev == nil || ev.StopReason != StopReasonPhaseError || len(ev.Phases) != 2 {
		t.Fatalf("%v %+v", err, ev)
	}
	ph := ev.Phases[1]
	if ph.Error == nil || !strings.Contains(*ph.Error, "runs other limits than profile") || ph.Server == nil || len(ph.Server.Mismatches) != 1 || ph.Server.Log == "" {
		t.Fatalf("phase %+v server %+v", ph, ph.Server)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestExecuteLinKeysSignalWritesPartialEvidence(t *testing.T) {
	p := lkTestPlan(t)
	out := filepath.Join(t.TempDir(), "ev")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev, err := ExecuteLinkKeys(ctx, p, lkOpts(out, func(_ context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		r := lkResult(2000)
		if run.Index == 1 {
			cancel()
			r.Stop = &result.StopEvent{Reason: StopReasonSignal, ElapsedSecs: 0.5}
		}
		return r, nil, nil
	}))
	if !errors.Is(err, ErrIncomplete) || ev == nil || ev.StopReason != StopReasonSignal || len(ev.Phases) != 2 || !ev.Phases[1].Interrupted {
		t.Fatalf("%v %+v", err, ev)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestExecuteLinkKeysLiveStop(t *testing.T) {
	p := lkTestPlan(t)
	stop := liveStop(p.StopConditions)
	if stop(0, map[string]float64{"process_rss_bytes": 100}) != nil {
		t.Fatal("stopped under the limit")
	}
	ev := stop(0, map[string]float64{"process_rss_bytes": 5 << 30})
	if ev == nil || ev.Reason != StopReasonStopCondition || ev.Metric != MetricLiveServerRSS {
		t.Fatalf("%+v", ev)
	}
}

func TestVerifyServer(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "server.log")
	line := "config: max_connections=200000 handshake_global_capacity=1000"
	if err := os.WriteFile(log, []byte("starting\n"+line+"\nMETRICS {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &phaseServer{logPath: log, target: linkkeysload.Target{PID: 7}}
	ok := func(uint32) (map[string]string, error) {
		return map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000"}, nil
	}
	rec := &ServerRecord{EnvironmentProfile: "p", Declared: map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000"}, ExpectedConfigLine: line}
	if err := verify(context.Background(), srv, rec, ok); err != nil || !rec.EnvironmentVerified || rec.PID != 7 || rec.Limits["max_connections"] != "200000" {
		t.Fatalf("%v %+v", err, rec)
	}
	rec = &ServerRecord{EnvironmentProfile: "p", Declared: map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "200000", "TCP_MAX_CONNECTIONS": "5"},
		ExpectedConfigLine: "config: max_connections=200000 handshake_global_capacity=200000"}
	err := verify(context.Background(), srv, rec, ok)
	if err == nil {
		t.Fatal("accepted a server running other limits")
	}
	for _, want := range []string{"config: handshake_global_capacity=1000, declared handshake_global_capacity=200000",
		"environment: TCP_HANDSHAKE_GLOBAL_BURST=1000, declared 200000", "environment: TCP_MAX_CONNECTIONS is unset, but the profile declares 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// A started server must run the phase's source prefixes; a running one is read with whatever it
	// counts, and the record says how they compare.
	withPrefixes := line + " source_prefixes=held=127.0.1.0/28"
	rec = &ServerRecord{Mode: "started", EnvironmentProfile: "p", Declared: map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000",
		"TCP_SOURCE_PREFIXES": "held=127.0.1.0/28"}, ExpectedConfigLine: withPrefixes, SourcePrefixes: "held=127.0.1.0/28"}
	err = verify(context.Background(), srv, rec, ok)
	if err == nil || !strings.Contains(err.Error(), "config: source_prefixes=(none), declared source_prefixes=held=127.0.1.0/28") ||
		!strings.Contains(err.Error(), "environment: TCP_SOURCE_PREFIXES is unset, but the profile declares held=127.0.1.0/28") {
		t.Fatalf("started server without its prefixes: %v", err)
	}
	rec = &ServerRecord{Mode: "running", EnvironmentProfile: "p", Declared: map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000"},
		ExpectedConfigLine: line, SourcePrefixes: "held=127.0.1.0/28"}
	if err := verify(context.Background(), srv, rec, ok); err != nil || !strings.Contains(rec.SourcePrefixesNote, "counts no source prefix") {
		t.Fatalf("running server without prefixes: %v %+v", err, rec)
	}
	if err := os.WriteFile(log, []byte(line+" source_prefixes=other=127.9.0.0/16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec = &ServerRecord{Mode: "running", EnvironmentProfile: "p", Declared: map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000"},
		ExpectedConfigLine: line, SourcePrefixes: "held=127.0.1.0/28"}
	envWith := func(uint32) (map[string]string, error) {
		return map[string]string{"TCP_HANDSHAKE_GLOBAL_BURST": "1000", "TCP_SOURCE_PREFIXES": "other=127.9.0.0/16"}, nil
	}
	if err := verify(context.Background(), srv, rec, envWith); err != nil || !strings.Contains(rec.SourcePrefixesNote, "counts source prefixes other=127.9.0.0/16") {
		t.Fatalf("running server with other prefixes: %v %+v", err, rec)
	}
	if err := os.WriteFile(log, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An unreadable environment leaves the config: line as the only verification, and says so.
	rec = &ServerRecord{EnvironmentProfile: "p", ExpectedConfigLine: line}
	if err := verify(context.Background(), srv, rec, func(uint32) (map[string]string, error) { return nil, os.ErrPermission }); err != nil ||
		rec.EnvironmentVerified || !strings.Contains(rec.EnvironmentNote, "only its config: line was verified") {
		t.Fatalf("%v %+v", err, rec)
	}
}

// The phase summary names the server host's TCP counters when the server reports them.
func TestLinkKeysSummaryHostTCP(t *testing.T) {
	r := lkResult(100)
	got := linkKeysSummary(r, LinkKeysPhaseMetrics(r))
	if want := "server host 2 listen overflows, 0 listen drops, 7 retransmitted segments, 0 syncookies"; !strings.Contains(got, want) {
		t.Errorf("summary %q lacks %q", got, want)
	}
	r.Server.After = linkkeys.WithoutAppended(r.Server.After)
	if got := linkKeysSummary(r, LinkKeysPhaseMetrics(r)); strings.Contains(got, "server host") {
		t.Errorf("summary %q shows host counters the server did not report", got)
	}
}
