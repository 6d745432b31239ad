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
		EstablishedTotal: uint64(held + 10)}
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
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// Two streams with failures: the server's sheds cannot be split between them.
	r := lkResult(100)
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
	// An unreadable environment leaves the config: line as the only verification, and says so.
	rec = &ServerRecord{EnvironmentProfile: "p", ExpectedConfigLine: line}
	if err := verify(context.Background(), srv, rec, func(uint32) (map[string]string, error) { return nil, os.ErrPermission }); err != nil ||
		rec.EnvironmentVerified || !strings.Contains(rec.EnvironmentNote, "only its config: line was verified") {
		t.Fatalf("%v %+v", err, rec)
	}
}
