package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/result"
)

func loadproof(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env, out, errb := kcToolEnv()
	code := Run(context.Background(), Loadproof, args, env)
	return code, out.String(), errb.String()
}

// A signed bundle verifies with its key; once one of its files changes, verify fails and report
// shows TAMPERED at the top in every format and exits 1.
func TestVerifySignedBundleAndTamperedReport(t *testing.T) {
	dir, plan := capacityFixture(t)
	prefix := filepath.Join(dir, "k")
	if code, out, errs := loadproof(t, "keygen", "--out", prefix); code != ExitOK || !strings.Contains(out, "fingerprint ") {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errs)
	}
	out := filepath.Join(dir, "ev")
	if code, stdout, stderr := runCapacity(t, cannedRunner(-1, -1), "-p", plan, "-o", out, "--sign-key", prefix+".key"); code != ExitOK {
		t.Fatalf("capacity exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, evidence.SignatureFile)); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := loadproof(t, "verify", "--key", prefix+".pub", out); code != ExitOK || !strings.Contains(stdout, "VERIFIED") ||
		!strings.Contains(stdout, "by the given key") {
		t.Fatalf("verify: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := loadproof(t, "report", out); code != ExitOK || strings.Contains(stdout, "TAMPERED") {
		t.Fatalf("report of a good bundle: exit %d\n%s", code, stdout)
	}
	// Another key is refused.
	if code, _, _ := loadproof(t, "keygen", "--out", filepath.Join(dir, "other")); code != ExitOK {
		t.Fatal("keygen")
	}
	if code, stdout, _ := loadproof(t, "verify", "--key", filepath.Join(dir, "other.pub"), out); code != ExitFailure || !strings.Contains(stdout, "not by the given key") {
		t.Fatalf("verify with another key: exit %d\n%s", code, stdout)
	}

	// Change a phase's results file after writing.
	phase := filepath.Join(out, "phase-01-warm-up-ramp.json")
	b, err := os.ReadFile(phase)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(phase, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := loadproof(t, "verify", out); code != ExitFailure || !strings.Contains(stdout, "TAMPERED") || !strings.Contains(stdout, "phase-01-warm-up-ramp.json has") {
		t.Fatalf("verify of a changed bundle: exit %d\n%s", code, stdout)
	}
	for _, format := range []string{"text", "json", "html", "csv"} {
		code, stdout, stderr := loadproof(t, "report", "--format", format, out)
		if code != ExitFailure {
			t.Errorf("report --format %s of a changed bundle: exit %d, want %d", format, code, ExitFailure)
		}
		var ok bool
		switch format {
		case "text":
			ok = strings.HasPrefix(stdout, "TAMPERED")
		case "json":
			var v struct{ Verification string }
			ok = json.Unmarshal([]byte(stdout), &v) == nil && v.Verification == "TAMPERED" && strings.Index(stdout, "TAMPERED") < strings.Index(stdout, "evidence_scope")
		case "html":
			i := strings.Index(stdout, "<body>")
			ok = i >= 0 && strings.HasPrefix(stdout[i+len("<body>\n"):], `<div role="alert" id="lp-tampered"`)
		case "csv":
			ok = strings.HasPrefix(stderr, "TAMPERED")
		}
		if !ok {
			t.Errorf("report --format %s does not show TAMPERED at the top:\n%.600s\n%s", format, stdout, stderr)
		}
	}
}

// A bundle whose evidence.json claims passed while a phase's figures fail a check, with a manifest
// rewritten to match, is caught by the recomputation.
func TestVerifyRecomputesTheVerdict(t *testing.T) {
	dir, plan := capacityFixture(t)
	out := filepath.Join(dir, "ev")
	if code, stdout, stderr := runCapacity(t, cannedRunner(-1, 0), "-p", plan, "-o", out); code != ExitFailure {
		t.Fatalf("capacity exit %d\n%s%s", code, stdout, stderr)
	}
	path := filepath.Join(out, evidence.EvidenceFile)
	b, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["passed"] = true
	ph := m["phases"].([]any)[0].(map[string]any)
	ph["passed"] = true
	for _, c := range ph["checks"].([]any) {
		c.(map[string]any)["outcome"] = "passed"
	}
	b, _ = json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		if e.Name() != evidence.ManifestFile {
			names = append(names, e.Name())
		}
	}
	if err := evidence.WriteManifest(out, names, time.Now()); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := loadproof(t, "verify", out)
	if code != ExitFailure || !strings.Contains(stdout, "recomputed: ") || !strings.Contains(stdout, "says passed true") {
		t.Fatalf("verify of a forged pass: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := loadproof(t, "report", out); code != ExitFailure || !strings.HasPrefix(stdout, "TAMPERED") {
		t.Fatalf("report of a forged pass: exit %d\n%s", code, stdout)
	}
}

// A signed result file verifies; its signature file, damaged, fails with a clear message.
func TestVerifyResultSignature(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "k")
	if code, _, errs := loadproof(t, "keygen", "--out", prefix); code != ExitOK {
		t.Fatal(errs)
	}
	if code, _, errs := loadproof(t, "keygen", "--out", prefix); code != ExitFailure || !strings.Contains(errs, "never replaces") {
		t.Fatalf("keygen over a key: exit %d %s", code, errs)
	}
	p := kcSegment(t, dir, "r.json", 10, 0)
	priv, err := evidence.ReadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.SignFile(p, priv); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := loadproof(t, "verify", "--key", prefix+".pub", p); code != ExitOK || !strings.Contains(stdout, "result ") {
		t.Fatalf("verify: exit %d\n%s", code, stdout)
	}
	if err := os.WriteFile(p+".sig", []byte(`{"format":"loadproof.signature/v1","algorithm":"rsa"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := loadproof(t, "verify", p); code != ExitFailure || !strings.Contains(stdout, `algorithm "rsa" is not ed25519`) {
		t.Fatalf("verify of a bad signature: exit %d\n%s", code, stdout)
	}
	if code, _, errs := loadproof(t, "verify", "--key", p, p); code != ExitUsage || !strings.Contains(errs, "not a PEM file") {
		t.Fatalf("verify with a non-key: exit %d %s", code, errs)
	}
}

// report merges only the segments of one run, each once; a missing segment makes the merge
// partial and the report says so at the top.
func TestReportMergesOneRunOnly(t *testing.T) {
	dir := t.TempDir()
	const other = "fedcba9876543210fedcba9876543210"
	a := kcPart(t, dir, "a.json", 100, 0, testRunID, result.Segment{Index: 0, Count: 3})
	b := kcPart(t, dir, "b.json", 100, 0, testRunID, result.Segment{Index: 1, Count: 3})
	c := kcPart(t, dir, "c.json", 100, 0, other, result.Segment{Index: 2, Count: 3})
	d := kcPart(t, dir, "d.json", 100, 0, testRunID, result.Segment{Index: 1, Count: 2})
	whole := kcSegment(t, dir, "whole.json", 100, 0)
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"the same file twice", []string{whole, whole}, "each segment merges once"},
		{"the same segment twice", []string{a, b, b}, "b.json is given twice"},
		{"a copy of a segment", []string{a, b, copyFile(t, b)}, "segment 2/3 is in both"},
		{"different runs", []string{a, b, c}, "--compare"},
		{"mixed segment counts", []string{a, d}, "split the same way"},
	} {
		for _, format := range []string{"text", "html"} {
			code, _, errs := loadproof(t, append([]string{"report", "--format", format}, tc.files...)...)
			if code != ExitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("%s (%s): exit %d, want %d with %q:\n%s", tc.name, format, code, ExitUsage, tc.want, errs)
			}
		}
	}
	code, stdout, errs := loadproof(t, "report", a, b)
	if code != ExitOK || !strings.HasPrefix(stdout, "PARTIAL RESULT: segments 3/3 of run "+testRunID) {
		t.Fatalf("partial merge: exit %d\n%s%s", code, stdout, errs)
	}
	code, stdout, _ = loadproof(t, "report", "--format", "json", a, b)
	var r struct {
		Partial bool             `json:"partial"`
		Missing []result.Segment `json:"missing_segments"`
		RunID   string           `json:"run_id"`
	}
	if code != ExitOK || json.Unmarshal([]byte(stdout), &r) != nil || !r.Partial || len(r.Missing) != 1 || r.Missing[0].Index != 2 || r.RunID != testRunID {
		t.Fatalf("partial json: exit %d %+v", code, r)
	}
}

func copyFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	q := p + ".copy.json"
	if err := os.WriteFile(q, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return q
}
