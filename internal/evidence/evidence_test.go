package evidence

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeBundle(t *testing.T, priv ed25519.PrivateKey) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		EvidenceFile:         `{"schema_version":1,"evidence_scope":"synthetic","passed":true,"phases":[{"name":"ramp","passed":true,"results_file":"phase-01-ramp.json"}]}`,
		"phase-01-ramp.json": `{"summary":{}}`,
	}
	var names []string
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := Seal(dir, names, time.Unix(0, 0), priv); err != nil {
		t.Fatal(err)
	}
	return dir
}

func problems(f *Findings) string { return strings.Join(f.Problems, "\n") }

func TestVerifyBundle(t *testing.T) {
	pub, priv, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := GenerateKey(nil)
	for _, tc := range []struct {
		name   string
		signed bool
		key    ed25519.PublicKey
		change func(dir string)
		want   string // "" means it verifies
	}{
		{"unsigned", false, nil, nil, ""},
		{"signed, no key", true, nil, nil, ""},
		{"signed, right key", true, pub, nil, ""},
		{"signed, other key", true, other, nil, "not by the given key"},
		{"unsigned, key given", false, pub, nil, "is not signed"},
		{"member changed", true, pub, func(dir string) {
			os.WriteFile(filepath.Join(dir, "phase-01-ramp.json"), []byte(`{"summary":{"x":1}}`), 0o644)
		}, "phase-01-ramp.json has"},
		{"member added", false, nil, func(dir string) { os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644) }, "does not list"},
		{"manifest rewritten", true, nil, func(dir string) {
			os.WriteFile(filepath.Join(dir, "phase-01-ramp.json"), []byte(`{}`), 0o644)
			WriteManifest(dir, []string{EvidenceFile, "phase-01-ramp.json"}, time.Unix(0, 0))
		}, "changed after it was signed"},
		{"signature bytes flipped", true, nil, func(dir string) {
			p := filepath.Join(dir, SignatureFile)
			b, _ := os.ReadFile(p)
			s, _ := ParseSignature(b, p)
			sig := []byte(s.Signature)
			if sig[0] == 'A' {
				sig[0] = 'B'
			} else {
				sig[0] = 'A'
			}
			s.Signature = string(sig)
			os.WriteFile(p, s.Encode(), 0o644)
		}, "does not verify with key"},
		{"signature garbage", true, nil, func(dir string) { os.WriteFile(filepath.Join(dir, SignatureFile), []byte("{"), 0o644) }, "not a signature file"},
		{"manifest gone", false, nil, func(dir string) { os.Remove(filepath.Join(dir, ManifestFile)) }, "has no manifest.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k ed25519.PrivateKey
			if tc.signed {
				k = priv
			}
			dir := writeBundle(t, k)
			if tc.change != nil {
				tc.change(dir)
			}
			f := Verify(dir, VerifyOptions{Key: tc.key})
			if tc.want == "" {
				if !f.OK() {
					t.Fatalf("problems: %s", problems(f))
				}
				return
			}
			if f.OK() || !strings.Contains(problems(f), tc.want) {
				t.Fatalf("problems %q, want one containing %q", problems(f), tc.want)
			}
		})
	}
}

func TestVerifyRecomputeIsReported(t *testing.T) {
	dir := writeBundle(t, nil)
	f := Verify(filepath.Join(dir, EvidenceFile), VerifyOptions{Recompute: func(*Bundle) []string { return []string{"phase x says passed"} }})
	if f.OK() || !strings.Contains(problems(f), "recomputed: phase x says passed") || !f.Bundle {
		t.Fatalf("%+v", f)
	}
}

func TestSignedResultFile(t *testing.T) {
	pub, priv, _ := GenerateKey(nil)
	p := filepath.Join(t.TempDir(), "results.json")
	os.WriteFile(p, []byte(`{"format":"x"}`), 0o644)
	if err := SignFile(p, priv); err != nil {
		t.Fatal(err)
	}
	if f := Verify(p, VerifyOptions{Key: pub}); !f.OK() || f.Bundle {
		t.Fatalf("%+v", f)
	}
	os.WriteFile(p, []byte(`{"format":"y"}`), 0o644)
	if f := Verify(p, VerifyOptions{Key: pub}); f.OK() || !strings.Contains(problems(f), "changed after it was signed") {
		t.Fatalf("%+v", f)
	}
	// A signature of another file does not pass for this one.
	q := filepath.Join(filepath.Dir(p), "other.json")
	os.WriteFile(q, []byte(`{"format":"y"}`), 0o644)
	sb, _ := os.ReadFile(p + SignatureSuffix)
	os.WriteFile(q+SignatureSuffix, sb, 0o644)
	if f := Verify(q, VerifyOptions{}); f.OK() || !strings.Contains(problems(f), "not of \"other.json\"") {
		t.Fatalf("%+v", f)
	}
}

func TestKeyFiles(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "k")
	fp, err := WriteKeyPair(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(prefix + ".key")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, %v", fi.Mode(), err)
	}
	priv, err := ReadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ReadPublicKey(prefix + ".pub")
	if err != nil || !pub.Equal(priv.Public()) || Fingerprint(pub) != fp || len(fp) != 64 {
		t.Fatalf("public key %v %v", err, fp)
	}
	if _, err := WriteKeyPair(prefix, nil); err == nil || !strings.Contains(err.Error(), "never replaces") {
		t.Fatalf("replaced a key: %v", err)
	}
	// The public key is not a private key, and vice versa.
	pb, _ := os.ReadFile(prefix + ".pub")
	if _, err := ParsePrivateKey(pb, "k.pub"); err == nil || !strings.Contains(err.Error(), `"PUBLIC KEY"`) {
		t.Fatalf("public as private: %v", err)
	}
	if _, err := ReadPublicKey("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("/dev/zero: %v", err)
	}
}

func TestPhaseVerdict(t *testing.T) {
	msg := "x"
	for _, tc := range []struct {
		p    Phase
		want Verdict
	}{
		{Phase{Passed: true}, VerdictPassed},
		{Phase{}, VerdictFailed},
		{Phase{StopBreached: true}, VerdictStopped},
		{Phase{Error: &msg, StopBreached: true}, VerdictError},
		{Phase{Error: &msg, Interrupted: true}, VerdictInterrupted},
	} {
		if got := tc.p.Verdict(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestParseRefusesEscapingResultsFile(t *testing.T) {
	_, err := Parse([]byte(`{"schema_version":1,"evidence_scope":"s","phases":[{"name":"a","results_file":"../../../../dev/zero"}]}`))
	if err == nil || !strings.Contains(err.Error(), "not a plain file name") {
		t.Fatalf("error %v", err)
	}
	b := &Bundle{Dir: t.TempDir()}
	if _, err := b.ReadMember("../x", 10); err == nil {
		t.Fatal("read outside the bundle")
	}
}

func FuzzParseSignature(f *testing.F) {
	_, priv, _ := GenerateKey(bytes.NewReader(make([]byte, 64)))
	f.Add(Sign(priv, "manifest.json", []byte("m")).Encode())
	f.Add([]byte(`{"format":"loadproof.signature/v1"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSignature(b, "fuzz.sig")
		if err != nil {
			return
		}
		// A parsed signature is well formed: checking it never panics.
		_ = s.Check("manifest.json", []byte("m"), nil)
	})
}

func FuzzParsePublicKey(f *testing.F) {
	pub, priv, _ := GenerateKey(bytes.NewReader(make([]byte, 64)))
	pb, _ := EncodePublicKey(pub)
	kb, _ := EncodePrivateKey(priv)
	f.Add(pb)
	f.Add(kb)
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := ParsePublicKey(b, "fuzz.pub"); err == nil && len(k) != ed25519.PublicKeySize {
			t.Fatalf("key of %d bytes", len(k))
		}
		if k, err := ParsePrivateKey(b, "fuzz.key"); err == nil && len(k) != ed25519.PrivateKeySize {
			t.Fatalf("key of %d bytes", len(k))
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"algorithm":"sha256","files":[{"path":"evidence.json","sha256":"00","bytes":1}]}`))
	f.Add([]byte(`{"algorithm":"md5"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err == nil && (m.Algorithm != "sha256" || len(m.Files) > MaxManifestEntries) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

func FuzzParseEvidence(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"evidence_scope":"s","phases":[]}`))
	f.Add([]byte(`{"schema_version":1,"evidence_scope":"s","phases":[{"results_file":"../x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Parse(b)
		if err != nil {
			return
		}
		for _, ph := range e.Phases {
			if ph.ResultsFile != "" && !ValidMemberName(ph.ResultsFile) {
				t.Fatalf("accepted results_file %q", ph.ResultsFile)
			}
			_ = ph.Verdict()
		}
	})
}
