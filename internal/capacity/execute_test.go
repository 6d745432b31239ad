package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

var update = flag.Bool("update", false, "rewrite golden files")

// setup writes a users file into a temporary working area and returns the plan pointing at it and
// the output directory to use.
func setup(t *testing.T) (*Plan, string) {
	t.Helper()
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	writeUsers(t, users, 3)
	p := testPlan()
	p.UsersFile = users
	return p, filepath.Join(dir, "evidence")
}

func opts(out string, r *fakeRunner) Options {
	return Options{OutputDir: out, Runner: r.run, Machine: testMachine(), Now: fixedClock}
}

func readEvidence(t *testing.T, out string) (*Evidence, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ReadEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return ev, raw
}

func TestExecuteAllPhasesPass(t *testing.T) {
	p, out := setup(t)
	r := &fakeRunner{}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Passed || !ev.CertificationReady || ev.StoppedAfterPhase != nil || ev.StopReason != "" || len(ev.CertificationBlockers) != 0 {
		t.Fatalf("evidence: passed %v ready %v stopped %v reason %q blockers %q", ev.Passed, ev.CertificationReady, ev.StoppedAfterPhase, ev.StopReason, ev.CertificationBlockers)
	}
	if len(r.runs) != 6 {
		t.Fatalf("%d phases run", len(r.runs))
	}
	for i, run := range r.runs {
		if run.Index != i || run.Seed != 371 || run.URL != p.TargetURL || len(run.Users) != 3 || run.UsersFile != p.UsersFile {
			t.Errorf("run %d: %+v", i, run)
		}
		if run.ReportInterval != time.Second {
			t.Errorf("run %d: report interval %v, want clamp(1 s, 1, 5) = 1 s", i, run.ReportInterval)
		}
		want := LiveStop{MaxUnintentionalErrorRate: 0.05, MaxLatencyP95Ms: 1000, Window: DefaultStopWindow}
		if run.Stop != want {
			t.Errorf("run %d: stop %+v, want %+v", i, run.Stop, want)
		}
	}
	_, raw := readEvidence(t, out)
	for _, k := range []string{"schema_version", "evidence_scope", "generated_at", "execution_environment", "plan", "passed", "certification_ready", "stopped_after_phase", "phases", "certification_blockers", "machine"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("evidence lacks %q", k)
		}
	}
	if raw["stopped_after_phase"] != nil || raw["execution_environment"] != "local" || raw["evidence_scope"] != EvidenceScope {
		t.Errorf("evidence header: %v %v %v", raw["stopped_after_phase"], raw["execution_environment"], raw["evidence_scope"])
	}
	ph0 := raw["phases"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "kind", "passed", "checks", "stop_breached", "stop_checks", "results", "error"} {
		if _, ok := ph0[k]; !ok {
			t.Errorf("phase entry lacks %q", k)
		}
	}
	if ph0["error"] != nil {
		t.Errorf("phase error %v", ph0["error"])
	}
	for i, ph := range p.Phases {
		name := PhaseFileName(i, ph.Name)
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keycastresult.Parse(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if ev.Phases[i].ResultsFile != name {
			t.Errorf("phase %d results_file %q", i, ev.Phases[i].ResultsFile)
		}
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
	if ev.Machine == nil || ev.Machine.Target != p.TargetURL {
		t.Fatalf("machine record %+v", ev.Machine)
	}
}

// TestPhaseSetupErrorStillWritesPartialEvidence is upstream's test: a missing users file and a
// spike without shedding still give an evidence file, with the phase error recorded.
func TestPhaseSetupErrorStillWritesPartialEvidence(t *testing.T) {
	p, out := setup(t)
	p.UsersFile = filepath.Join(filepath.Dir(out), "missing-users.json")
	p.Phases[1].IntentionalShedding = nil
	r := &fakeRunner{}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if err == nil || !strings.Contains(err.Error(), "exceeded their predeclared limits") {
		t.Fatalf("error %v", err)
	}
	if !errors.Is(err, ErrLimitsExceeded) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v is not ErrLimitsExceeded+ErrIncomplete", err)
	}
	if ev == nil || len(r.runs) != 0 {
		t.Fatalf("evidence %v, runs %d", ev, len(r.runs))
	}
	_, raw := readEvidence(t, out)
	if raw["passed"] != false || raw["certification_ready"] != false {
		t.Fatalf("passed %v certification_ready %v", raw["passed"], raw["certification_ready"])
	}
	phases := raw["phases"].([]any)
	ph0 := phases[0].(map[string]any)
	if len(phases) != 1 || ph0["passed"] != false || ph0["results"] != nil || ph0["stop_breached"] != false {
		t.Fatalf("phases %v", phases)
	}
	msg, _ := ph0["error"].(string)
	if msg == "" || !strings.Contains(msg, "missing-users.json") || !strings.Contains(msg, "does not exist") {
		t.Fatalf("phase error %q", msg)
	}
	if len(ph0["checks"].([]any)) != 0 || len(ph0["stop_checks"].([]any)) != 0 {
		t.Fatal("a phase that could not run has checks")
	}
	if raw["stopped_after_phase"] != "ramp" || raw["stop_reason"] != StopReasonPhaseError {
		t.Fatalf("stopped_after_phase %v, stop_reason %v", raw["stopped_after_phase"], raw["stop_reason"])
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerErrorKeepsCompletedPhases(t *testing.T) {
	p, out := setup(t)
	boom := &SafeError{Msg: "the target cannot be reached", Err: errors.New(`upstream said: {"error":"Database error: relation users"}`)}
	r := &fakeRunner{errs: map[int]error{2: boom}}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, ErrLimitsExceeded) {
		t.Fatalf("error %v", err)
	}
	if len(ev.Phases) != 3 || ev.Phases[0].Results == nil || ev.Phases[1].Results == nil || ev.Phases[2].Results != nil {
		t.Fatalf("phases %+v", ev.Phases)
	}
	if got := *ev.Phases[2].Error; got != `capacity: phase "soak" could not run: the target cannot be reached` {
		t.Fatalf("error %q: the raw cause must not reach the evidence", got)
	}
	if *ev.StoppedAfterPhase != "soak" || ev.StopReason != StopReasonPhaseError || ev.Passed || ev.CertificationReady {
		t.Fatalf("stopped %v reason %q", *ev.StoppedAfterPhase, ev.StopReason)
	}
	if _, err := os.Stat(filepath.Join(out, PhaseFileName(2, "soak"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("results file written for the failed phase: %v", err)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestOrdinaryMissContinuesToTheEnd(t *testing.T) {
	p, out := setup(t)
	// Phase 0 misses its own p95 (500 ms) but stays under the stop limit (1000 ms).
	r := &fakeRunner{results: map[int]*keycastresult.Results{0: results(100, 0, 0, 700*time.Millisecond)}}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if !errors.Is(err, ErrLimitsExceeded) || errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v: want checks-failed only", err)
	}
	if len(r.runs) != 6 || len(ev.Phases) != 6 || ev.StoppedAfterPhase != nil || ev.StopReason != "" {
		t.Fatalf("ran %d phases, stopped %v", len(r.runs), ev.StoppedAfterPhase)
	}
	if ev.Phases[0].Passed || ev.Phases[0].StopBreached || !ev.Phases[1].Passed {
		t.Fatalf("phase outcomes %+v %+v", ev.Phases[0], ev.Phases[1])
	}
	if len(ev.CertificationBlockers) != 2 {
		t.Fatalf("blockers %q", ev.CertificationBlockers)
	}
}

func TestStopBreachStopsTheRun(t *testing.T) {
	p, out := setup(t)
	r := &fakeRunner{results: map[int]*keycastresult.Results{2: results(100, 30, 0, time.Millisecond)}}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if !errors.Is(err, ErrLimitsExceeded) || errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	if len(r.runs) != 3 || len(ev.Phases) != 3 || !ev.Phases[2].StopBreached || *ev.StoppedAfterPhase != "soak" || ev.StopReason != StopReasonStopCondition {
		t.Fatalf("ran %d, phases %d, stopped %v", len(r.runs), len(ev.Phases), ev.StoppedAfterPhase)
	}
}

func TestLiveStopConditionStopsTheRun(t *testing.T) {
	p, out := setup(t)
	// Totals inside every limit, but the engine's window breached: the breach stands.
	res := results(100, 0, 0, time.Millisecond)
	res.Stop = &keycastresult.StopEvent{Reason: "stop-condition", Metric: "latency_p95_ms", Observed: 1500, Limit: 1000, WindowSecs: 5, ElapsedSecs: 0.8, At: "2025-12-10T12:00:00.8Z"}
	r := &fakeRunner{results: map[int]*keycastresult.Results{1: res}}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if !errors.Is(err, ErrLimitsExceeded) || errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	ph := ev.Phases[1]
	if len(ev.Phases) != 2 || ph.Passed || !ph.StopBreached || ph.LiveStop == nil || ph.LiveStop.Observed != 1500 {
		t.Fatalf("phase %+v", ph)
	}
	for _, c := range ph.StopChecks {
		if c.Outcome != Passed {
			t.Fatalf("stop checks on totals changed: %+v", ph.StopChecks)
		}
	}
	if *ev.StoppedAfterPhase != "spike" || ev.StopReason != StopReasonStopCondition {
		t.Fatalf("stopped %v reason %q", ev.StoppedAfterPhase, ev.StopReason)
	}
	_, raw := readEvidence(t, out)
	live := raw["phases"].([]any)[1].(map[string]any)["live_stop"].(map[string]any)
	if live["metric"] != "latency_p95_ms" || live["elapsed_secs"] != 0.8 || live["at"] == "" {
		t.Fatalf("live_stop %v", live)
	}
}

func TestSignalDuringAPhaseWritesPartialEvidence(t *testing.T) {
	p, out := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	partial := results(40, 0, 0, time.Millisecond)
	partial.Summary.DurationSecs = 0.4
	partial.Stop = &keycastresult.StopEvent{Reason: "signal", ElapsedSecs: 0.4, At: "2025-12-10T12:00:00.4Z"}
	r := &fakeRunner{
		results: map[int]*keycastresult.Results{1: partial},
		hook: func(_ context.Context, run PhaseRun) {
			if run.Index == 1 {
				cancel()
			}
		},
	}
	ev, err := Execute(ctx, p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	ph := ev.Phases[1]
	if len(ev.Phases) != 2 || !ph.Interrupted || ph.Passed || ph.Results == nil || ph.Error == nil ||
		*ph.Error != `capacity: phase "spike" was interrupted by a signal after 0.4 s of its 1 s` {
		t.Fatalf("phase %+v (error %v)", ph, ph.Error)
	}
	if ev.StopReason != StopReasonSignal || *ev.StoppedAfterPhase != "spike" || ev.Passed {
		t.Fatalf("reason %q stopped %v", ev.StopReason, ev.StoppedAfterPhase)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestSignalBetweenPhases(t *testing.T) {
	p, out := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &fakeRunner{hook: func(_ context.Context, run PhaseRun) {
		if run.Index == 0 {
			cancel() // arrives as phase 0 completes
		}
	}}
	ev, err := Execute(ctx, p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	if len(r.runs) != 1 || len(ev.Phases) != 1 || ev.StopReason != StopReasonSignal || *ev.StoppedAfterPhase != "ramp" {
		t.Fatalf("runs %d phases %d reason %q", len(r.runs), len(ev.Phases), ev.StopReason)
	}
	if !ev.Phases[0].Interrupted {
		t.Fatal("a phase that ended with the context cancelled is not marked interrupted")
	}
}

func TestSignalBeforeTheFirstPhase(t *testing.T) {
	p, out := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &fakeRunner{}
	ev, err := Execute(ctx, p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) || ev == nil || len(r.runs) != 0 || len(ev.Phases) != 0 || ev.StoppedAfterPhase != nil || ev.StopReason != StopReasonSignal {
		t.Fatalf("err %v evidence %+v", err, ev)
	}
	if err := VerifyBundle(out); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerErrorAfterSignalIsAnInterruption(t *testing.T) {
	p, out := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &fakeRunner{errs: map[int]error{0: context.Canceled}, hook: func(context.Context, PhaseRun) { cancel() }}
	ev, err := Execute(ctx, p, opts(out, r))
	if !errors.Is(err, ErrIncomplete) || ev.StopReason != StopReasonSignal || !ev.Phases[0].Interrupted {
		t.Fatalf("err %v reason %q", err, ev.StopReason)
	}
}

func TestValidationHappensBeforeTheOutputDirectory(t *testing.T) {
	p, out := setup(t)
	p.ProfileName = ""
	p.Phases[0].Concurrency = 0
	r := &fakeRunner{}
	ev, err := Execute(context.Background(), p, opts(out, r))
	if ev != nil || !errors.Is(err, ErrInvalidPlan) || len(Problems(err)) != 2 {
		t.Fatalf("evidence %v error %v", ev, err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("output directory created for an invalid plan: %v", err)
	}
}

func TestOutputDirectoryMustBeEmpty(t *testing.T) {
	p, out := setup(t)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// An existing empty directory is fine.
	if _, err := Execute(context.Background(), p, opts(out, &fakeRunner{})); err != nil {
		t.Fatal(err)
	}
	// A second run into the same directory would mix two bundles.
	_, err := Execute(context.Background(), p, opts(out, &fakeRunner{}))
	if !errors.Is(err, ErrOutputNotEmpty) {
		t.Fatalf("error %v", err)
	}
}

func TestNoSecretsInEvidence(t *testing.T) {
	p, out := setup(t)
	users := readUsers(t, p.UsersFile)
	tok := users[0].UcanToken
	// A misbehaving engine puts a token and a server body where names belong, and fails a phase
	// with an error quoting a token and a password.
	res := results(1000, 10, 0, time.Millisecond)
	res.Causes = map[string]int64{"http_500": 5, "Bearer " + tok: 3, `{"error":"Database error: password=hunter2"}`: 2}
	res.ServerMetrics = &keycastresult.ServerMetricsSnapshots{Scope: keycastresult.ServerMetricsScope, SeriesDeltas: map[string]float64{"keycast_http_rpc_requests_total": 100, "bad name " + tok: 1}}
	r := &fakeRunner{
		results: map[int]*keycastresult.Results{0: res},
		errs:    map[int]error{1: errors.New("server answered 500: token " + tok + " password hunter2")},
	}
	_, err := Execute(context.Background(), p, opts(out, r))
	if err == nil {
		t.Fatal("want a failure")
	}
	scanBundle(t, out, users)
	b, _ := os.ReadFile(filepath.Join(out, EvidenceFile))
	if !bytes.Contains(b, []byte(`"other_unclassified": 5`)) || !bytes.Contains(b, []byte(`"http_500": 5`)) {
		t.Fatal("failure causes were not kept as counts")
	}
	if !bytes.Contains(b, []byte(withheld)) {
		t.Fatal("the unsafe error was not replaced")
	}
	if !bytes.Contains(b, []byte(`"KEYCAST_TEST_DATABASE_URL": "(redacted)"`)) || !bytes.Contains(b, []byte(`"KEYCAST_CPU_SLOTS": "1"`)) {
		t.Fatal("machine settings not redacted as expected")
	}
}

func TestManifestDetectsTampering(t *testing.T) {
	p, out := setup(t)
	if _, err := Execute(context.Background(), p, opts(out, &fakeRunner{})); err != nil {
		t.Fatal(err)
	}
	var m evidence.Manifest
	b, _ := os.ReadFile(filepath.Join(out, ManifestFile))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Path)
	}
	want := []string{EvidenceFile}
	for i, ph := range p.Phases {
		want = append(want, PhaseFileName(i, ph.Name))
	}
	if len(names) != len(want) {
		t.Fatalf("manifest lists %q, want %q", names, want)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != len(want)+1 {
		t.Fatalf("bundle holds %d files, want %d", len(entries), len(want)+1)
	}

	ev := filepath.Join(out, EvidenceFile)
	orig, _ := os.ReadFile(ev)
	tampered := bytes.Replace(orig, []byte(`"passed": true`), []byte(`"passed": fals`), 1)
	must(t, os.WriteFile(ev, tampered, 0o644))
	if err := VerifyBundle(out); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("tampered evidence: %v", err)
	}
	must(t, os.WriteFile(ev, orig, 0o644))
	must(t, os.WriteFile(filepath.Join(out, "extra.json"), []byte("{}"), 0o644))
	if err := VerifyBundle(out); err == nil || !strings.Contains(err.Error(), "extra.json") {
		t.Fatalf("extra file: %v", err)
	}
	must(t, os.Remove(filepath.Join(out, "extra.json")))
	must(t, os.Remove(filepath.Join(out, PhaseFileName(0, "ramp"))))
	if err := VerifyBundle(out); err == nil {
		t.Fatal("missing file not detected")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEvidenceGolden pins evidence.json byte for byte for a deterministic run (fixed clock, machine
// record and results). Run with -update to rewrite testdata/evidence.golden.json.
func TestEvidenceGolden(t *testing.T) {
	p, out := setup(t)
	p.UsersFile = "users.json" // keep the golden file free of temporary paths
	wd, _ := os.Getwd()
	must(t, os.Chdir(filepath.Dir(out)))
	t.Cleanup(func() { os.Chdir(wd) })
	p.Phases[1].IntentionalShedding = nil
	r := &fakeRunner{results: map[int]*keycastresult.Results{3: results(10, 1, 0, 600*time.Millisecond)}}
	_, err := Execute(context.Background(), p, opts("evidence", r))
	if !errors.Is(err, ErrLimitsExceeded) {
		t.Fatalf("error %v", err)
	}
	got, err := os.ReadFile(filepath.Join(filepath.Dir(out), "evidence", EvidenceFile))
	must(t, err)
	golden := filepath.Join(wd, "testdata", "evidence.golden.json")
	if *update {
		must(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("evidence.json differs from %s (run with -update if the change is intended):\n%s", golden, got)
	}
}

func TestScrubError(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{errors.New("HTTP 500: {\"error\":\"secret\"}"), withheld},
		{&SafeError{Msg: "users file \"u.json\" does not exist", Err: &os.PathError{Op: "open", Path: "u.json", Err: os.ErrNotExist}}, `users file "u.json" does not exist: open u.json: does not exist`},
		{&SafeError{Msg: "the target cannot be reached", Err: errors.Join(context.DeadlineExceeded, statusErr(503))}, "the target cannot be reached: deadline exceeded: HTTP 503"},
		{context.Canceled, "canceled"},
	}
	for _, c := range cases {
		if got := ScrubError(c.err); got != c.want {
			t.Errorf("ScrubError(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

type statusErr int

func (s statusErr) Error() string   { return "status with body text" }
func (s statusErr) StatusCode() int { return int(s) }

func TestReadEvidenceKeepsFields(t *testing.T) {
	p, out := setup(t)
	ev, err := Execute(context.Background(), p, opts(out, &fakeRunner{}))
	if err != nil {
		t.Fatal(err)
	}
	back, _ := readEvidence(t, out)
	if !reflect.DeepEqual(back.Plan, ev.Plan) || back.Passed != ev.Passed || len(back.Phases) != len(ev.Phases) {
		t.Fatal("evidence does not read back")
	}
}
