package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

func readBundle(t *testing.T, out string) *evidence.Bundle {
	t.Helper()
	b, err := evidence.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every bundle the executor writes recomputes to itself: the recomputation applies the same rules.
func TestRecomputeAgreesWithExecute(t *testing.T) {
	live := results(100, 0, 0, time.Millisecond)
	live.Stop = &keycastresult.StopEvent{Reason: "stop-condition", Metric: "latency_p95_ms", Observed: 1500, Limit: 1000, WindowSecs: 5, ElapsedSecs: 0.8, At: "2025-12-10T12:00:00.8Z"}
	for _, tc := range []struct {
		name string
		r    *fakeRunner
	}{
		{"all pass", &fakeRunner{}},
		{"ordinary miss", &fakeRunner{results: map[int]*keycastresult.Results{0: results(100, 0, 0, 700*time.Millisecond)}}},
		{"stop breach", &fakeRunner{results: map[int]*keycastresult.Results{2: results(100, 30, 0, time.Millisecond)}}},
		{"live stop", &fakeRunner{results: map[int]*keycastresult.Results{1: live}}},
		{"phase error", &fakeRunner{errs: map[int]error{2: errors.New("boom")}}},
		{"results file not written", &fakeRunner{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out := setup(t)
			if tc.name == "results file not written" {
				failOn(t, PhaseFileName(1, p.Phases[1].Name))
			}
			_, _ = Execute(context.Background(), p, opts(out, tc.r))
			b := readBundle(t, out)
			if tc.name == "results file not written" && (len(b.Evidence.Phases) != 2 || b.Evidence.Phases[1].Error == nil || b.Evidence.Phases[1].ResultsFile != "") {
				t.Fatalf("the write failure did not happen: %+v", b.Evidence.Phases)
			}
			if d := Recompute(b); len(d) > 0 {
				t.Fatalf("recomputation differs from the executor's own bundle:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// rewriteEvidence edits evidence.json as a forger would and rewrites the manifest to match, so
// only the recomputation (or a signature) can catch it.
func rewriteEvidence(t *testing.T, out string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(out, EvidenceFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.MarshalIndent(m, "", "  ")
	must(t, os.WriteFile(path, b, 0o644))
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		if e.Name() != ManifestFile {
			names = append(names, e.Name())
		}
	}
	must(t, evidence.WriteManifest(out, names, fixedClock()))
}

// A bundle whose evidence.json claims a pass that its figures deny verifies against its manifest
// (the forger rewrote it) but not against the recomputation.
func TestRecomputeCatchesAClaimedPass(t *testing.T) {
	p, out := setup(t)
	r := &fakeRunner{results: map[int]*keycastresult.Results{0: results(100, 0, 0, 700*time.Millisecond)}}
	if _, err := Execute(context.Background(), p, opts(out, r)); !errors.Is(err, ErrLimitsExceeded) {
		t.Fatalf("error %v", err)
	}
	rewriteEvidence(t, out, func(m map[string]any) {
		m["passed"], m["certification_ready"], m["certification_blockers"] = true, true, []any{}
		ph := m["phases"].([]any)[0].(map[string]any)
		ph["passed"] = true
		for _, c := range ph["checks"].([]any) {
			c.(map[string]any)["outcome"] = "passed"
		}
	})
	if err := VerifyBundle(out); err != nil {
		t.Fatalf("the forger's manifest should match: %v", err)
	}
	d := Recompute(readBundle(t, out))
	joined := strings.Join(d, "\n")
	if !strings.Contains(joined, "latency_p95_ms says passed") || !strings.Contains(joined, `phase "ramp" says passed true`) {
		t.Fatalf("recomputation missed the forged pass:\n%s", joined)
	}
	f := evidence.Verify(out, evidence.VerifyOptions{Recompute: Recompute})
	if f.OK() {
		t.Fatal("verify passed a forged bundle")
	}
}

// Figures embedded in evidence.json that differ from the phase's results file are found.
func TestRecomputeCatchesEmbeddedResultsEdit(t *testing.T) {
	p, out := setup(t)
	if _, err := Execute(context.Background(), p, opts(out, &fakeRunner{})); err != nil {
		t.Fatal(err)
	}
	rewriteEvidence(t, out, func(m map[string]any) {
		s := m["phases"].([]any)[1].(map[string]any)["results"].(map[string]any)["summary"].(map[string]any)
		s["total_requests"] = 9e9
	})
	if d := strings.Join(Recompute(readBundle(t, out)), "\n"); !strings.Contains(d, "differ from its results file") {
		t.Fatalf("embedded edit not found: %q", d)
	}
}

// A signed bundle verifies with its key, and not with another; a bundle file changed after
// writing fails both the manifest and the signature.
func TestSignedBundleVerifies(t *testing.T) {
	p, out := setup(t)
	pub, priv, err := evidence.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	o := opts(out, &fakeRunner{})
	o.SignKey = priv
	if _, err := Execute(context.Background(), p, o); err != nil {
		t.Fatal(err)
	}
	if f := evidence.Verify(out, evidence.VerifyOptions{Key: pub, Recompute: Recompute}); !f.OK() {
		t.Fatalf("signed bundle: %q", f.Problems)
	}
	other, _, _ := evidence.GenerateKey(nil)
	if f := evidence.Verify(out, evidence.VerifyOptions{Key: other, Recompute: Recompute}); f.OK() ||
		!strings.Contains(strings.Join(f.Problems, "\n"), "not by the given key") {
		t.Fatalf("another key: %q", f.Problems)
	}
	// The forger rewrites evidence and manifest: the signature of the manifest no longer holds.
	rewriteEvidence(t, out, func(m map[string]any) { m["evidence_scope"] = "production certification" })
	f := evidence.Verify(out, evidence.VerifyOptions{Key: pub, Recompute: Recompute})
	if f.OK() || !strings.Contains(strings.Join(f.Problems, "\n"), "changed after it was signed") {
		t.Fatalf("re-manifested bundle: %q", f.Problems)
	}
}

func TestRecomputeLinkKeys(t *testing.T) {
	p := lkTestPlan(t)
	p.Phases = []LinkKeysPhase{p.Phases[0], p.Phases[3], p.Phases[4]}
	p.Phases[2].Checks = p.Phases[2].Checks[:2]
	p.Phases[2].Workload.Handshakes, p.Phases[2].Workload.Requests = nil, nil
	out := filepath.Join(t.TempDir(), "ev")
	if _, err := ExecuteLinkKeys(context.Background(), p, lkOpts(out, func(_ context.Context, run LinkKeysPhaseRun) (*linkkeysresult.Result, []byte, error) {
		run.Server.ConfigLine = run.Server.ExpectedConfigLine
		return lkResult(2000), []byte("config: max_connections=1\n"), nil
	})); err != nil {
		t.Fatal(err)
	}
	if d := Recompute(readBundle(t, out)); len(d) > 0 {
		t.Fatalf("recomputation differs:\n%s", strings.Join(d, "\n"))
	}
	// A phase results file edited (and re-manifested) so a check now fails is caught.
	name := filepath.Join(out, "phase-01-established.json")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	nb := bytes.Replace(b, []byte(`"established": 2000`), []byte(`"established": 1`), 1)
	if bytes.Equal(nb, b) {
		t.Skip("the canned result has no established count to edit")
	}
	must(t, os.WriteFile(name, nb, 0o644))
	if d := Recompute(readBundle(t, out)); len(d) == 0 {
		t.Fatal("an edited results file recomputed to the recorded checks")
	}
}

// failOn makes the bundle writer fail on the file named name, as a full disk would.
func failOn(t *testing.T, name string) {
	t.Helper()
	writeFile = func(path string, data []byte, mode os.FileMode) error {
		if filepath.Base(path) == name {
			return errors.New("no space left on device")
		}
		return realWriteFile(path, data, mode)
	}
	t.Cleanup(func() { writeFile = realWriteFile })
}

// A phase whose load ran more than twice its planned duration is recorded as overran, blocks
// certification in plain words, and the recomputation agrees; a forged overran is found.
func TestOverranPhaseBlocksCertification(t *testing.T) {
	p, out := setup(t)
	slow := results(100, 0, 0, time.Millisecond)
	slow.Summary.DurationSecs = 2*float64(p.Phases[2].DurationSeconds) + 0.5
	ev, err := Execute(context.Background(), p, opts(out, &fakeRunner{results: map[int]*keycastresult.Results{2: slow}}))
	if err != nil {
		t.Fatalf("an overran phase still passes its checks: %v %v", err, ev.CertificationBlockers)
	}
	ph := ev.Phases[2]
	if !ph.Overran || ph.PlannedSecs != float64(p.Phases[2].DurationSeconds) || ph.ElapsedSecs != slow.Summary.DurationSecs {
		t.Fatalf("phase 2: overran %v planned %v elapsed %v", ph.Overran, ph.PlannedSecs, ph.ElapsedSecs)
	}
	if ev.Phases[0].Overran || ev.CertificationReady {
		t.Fatalf("phase 0 overran %v; certification_ready %v", ev.Phases[0].Overran, ev.CertificationReady)
	}
	if b := strings.Join(ev.CertificationBlockers, "\n"); !strings.Contains(b, `phase "soak" ran 2.5 s, more than 2 times its planned 1 s`) {
		t.Fatalf("blockers do not name the overrun: %s", b)
	}
	raw, _ := os.ReadFile(filepath.Join(out, EvidenceFile))
	for _, k := range []string{`"planned_secs": 1`, `"elapsed_secs": 2.5`, `"overran": true`} {
		if !strings.Contains(string(raw), k) {
			t.Fatalf("evidence.json lacks %s", k)
		}
	}
	if d := Recompute(readBundle(t, out)); len(d) > 0 {
		t.Fatalf("recomputation differs:\n%s", strings.Join(d, "\n"))
	}
	rewriteEvidence(t, out, func(m map[string]any) {
		m["phases"].([]any)[2].(map[string]any)["overran"] = false
	})
	if d := strings.Join(Recompute(readBundle(t, out)), "\n"); !strings.Contains(d, `phase "soak": overran is false`) {
		t.Fatalf("forged overran not found: %q", d)
	}
}
