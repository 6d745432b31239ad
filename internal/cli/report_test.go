package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/result"
)

// testRunID is the run ID of the test segments kcSegment writes.
const testRunID = "0123456789abcdef0123456789abcdef"

// kcSegment writes a whole-run Keycast result of n requests.
func kcSegment(t *testing.T, dir, name string, n int, failed uint64) string {
	t.Helper()
	return kcPart(t, dir, name, n, failed, "", result.Segment{})
}

// kcPart writes segment seg of run runID, a Keycast result of n requests.
func kcPart(t *testing.T, dir, name string, n int, failed uint64, runID string, seg result.Segment) string {
	t.Helper()
	h := hist.New()
	for i := 0; i < n; i++ {
		h.Record(time.Duration(i+1) * time.Millisecond)
	}
	c := keycastresult.Counts{Total: uint64(n), Success: uint64(n) - failed, Failed: failed, Server: failed}
	r := &keycastresult.Results{
		Metadata: keycastresult.Metadata{URL: "http://127.0.0.1:3000", Scenario: "WarmCache", Method: "GetPublicKey", Concurrency: 2, DurationSecs: 1},
		Summary:  keycastresult.Summarize(c, h, time.Second),
		Timeline: []keycastresult.TimelinePoint{},
		Envelope: keycastresult.NewEnvelope("http://127.0.0.1:3000", h, nil, nil),
	}
	r.Envelope.RunID = runID
	if seg.Count > 0 {
		r.Envelope.Segments = []result.Segment{seg}
	}
	path := filepath.Join(dir, name)
	if err := keycastresult.Write(path, r); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReportMergesSegmentsExactly(t *testing.T) {
	dir := t.TempDir()
	a := kcPart(t, dir, "a.json", 100, 3, testRunID, result.Segment{Index: 0, Count: 2})
	b := kcPart(t, dir, "b.json", 50, 1, testRunID, result.Segment{Index: 1, Count: 2})
	merged := filepath.Join(dir, "merged.json")
	env, out, errb := lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", a, b, "--output", merged}, env); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"Requests:      150\n", "Concurrency:   4\n", "Server:  4\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("merged report lacks %q:\n%s", want, out)
		}
	}
	r, err := keycastresult.Read(merged)
	if err != nil {
		t.Fatal(err)
	}
	if r.Latency().Count() != 150 || r.Summary.FailedRequests != 4 {
		t.Fatalf("merged file: %d samples, %d failed", r.Latency().Count(), r.Summary.FailedRequests)
	}
}

func TestReportRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	kc := kcSegment(t, dir, "kc.json", 10, 0)
	lk := filepath.Join(dir, "lk.json")
	b, _ := json.Marshal(map[string]any{"format": "x", "command": "ddos"})
	if err := os.WriteFile(lk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.json")
	if err := os.WriteFile(junk, []byte(`{"hello":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(users, &keycast.UsersFile{Users: []keycast.TestUser{{Pubkey: strings.Repeat("a", 64), UcanToken: "t"}}}); err != nil {
		t.Fatal(err)
	}
	export := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hollow := filepath.Join(dir, "hollow.json")
	if err := os.WriteFile(hollow, []byte(`{"metadata":{},"summary":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"report", kc, lk}, "merge files of one kind"},
		{[]string{"report", junk}, "neither a LinkKeys client result"},
		// issue 13 item 2: say what the file is; refuse an object with empty metadata and summary.
		{[]string{"report", users}, "users.json is a users file written by setup"},
		{[]string{"report", hollow}, "lacks metadata.url"},
		{[]string{"report", kc, hollow}, "lacks metadata.url"},
		{[]string{"report", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"report", kc, "--format", "xml"}, "must be text, json, csv, html or hgrm"},
		// issue 29 item 3: the exports loadproof writes are named, with what to give instead.
		{[]string{"report", export("run.csv", "url,scenario,method,concurrency\nx,y,z,1\n")}, "run.csv is a CSV export (report --format csv); loadproof reads result files (.json)"},
		{[]string{"report", export("run.html", "<!DOCTYPE html>\n<html>"), "--format", "html"}, "run.html is an HTML page"},
		{[]string{"compare", kc, "--vs", export("run.hgrm", "       Value     Percentile TotalCount 1/(1-Percentile)\n")}, "run.hgrm is an HdrHistogram distribution"},
		{[]string{"report", dir}, "is a directory holding neither a capacity evidence bundle"},
	} {
		env, _, errb := lkTestEnv()
		if code := Run(context.Background(), Loadproof, c.args, env); code != ExitUsage || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errb, c.msg)
		}
	}
}

// TestReportReadsAKeycastBundle reports a Keycast evidence bundle from its files alone: the
// directory or its evidence.json, as text (verdict, checks, manifest, each phase's results), csv
// (one row per check) and json (the evidence as written).
func TestReportReadsAKeycastBundle(t *testing.T) {
	dir, plan := capacityFixture(t)
	out := filepath.Join(dir, "ev")
	if code, stdout, stderr := runCapacity(t, cannedRunner(-1, 0), "-p", plan, "-o", out); code != ExitFailure {
		t.Fatalf("capacity exit %d\n%s%s", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"report", out}, []string{"Capacity evidence (keycast harness)", "phase 1 warm-up-ramp (ramp): failed",
			"failed     latency_p95_ms", "verified: every file of", "Keycast Load Test Results", "passed: false  certification_ready: false"}},
		{[]string{"report", filepath.Join(out, "evidence.json"), "--format", "csv"}, []string{
			"harness,phase,kind,phase_passed,check,metric,comparison,observed,limit,outcome\n", "keycast,warm-up-ramp,ramp,false,check,latency_p95_ms,at-most,"}},
		{[]string{"report", out, "--format", "json"}, []string{`"evidence_scope": "synthetic non-production capacity rehearsal"`}},
	} {
		env, stdout, stderr := lkTestEnv()
		if code := Run(context.Background(), Loadproof, c.args, env); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, stdout)
			}
		}
	}
	// A tampered bundle is reported as such, at the top, and the report fails.
	if err := os.WriteFile(filepath.Join(out, "evidence.json.extra"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, stdout, _ := lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", out}, env); code != ExitFailure ||
		!strings.HasPrefix(stdout.String(), "TAMPERED") || !strings.Contains(stdout.String(), "DOES NOT MATCH") {
		t.Fatalf("tampered bundle: exit %d\n%s", code, stdout)
	}
	if err := os.Remove(filepath.Join(out, "evidence.json.extra")); err != nil {
		t.Fatal(err)
	}
	// Bundles do not merge.
	env, _, errb := lkTestEnv()
	if code := Run(context.Background(), Loadproof, []string{"report", out, out}, env); code != ExitUsage || !strings.Contains(errb.String(), "one bundle at a time") {
		t.Fatalf("two bundles: exit %d %s", code, errb)
	}
}
