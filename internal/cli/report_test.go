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
)

func kcSegment(t *testing.T, dir, name string, n int, failed uint64) string {
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
	path := filepath.Join(dir, name)
	if err := keycastresult.Write(path, r); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReportMergesSegmentsExactly(t *testing.T) {
	dir := t.TempDir()
	a := kcSegment(t, dir, "a.json", 100, 3)
	b := kcSegment(t, dir, "b.json", 50, 1)
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
		{[]string{"report", kc, "--format", "csv"}, "must be text or json"},
	} {
		env, _, errb := lkTestEnv()
		if code := Run(context.Background(), Loadproof, c.args, env); code != ExitUsage || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errb, c.msg)
		}
	}
}

func FuzzResultKind(f *testing.F) {
	for _, s := range []string{`{"command":"ddos"}`, `{"metadata":{},"summary":{}}`, `{}`, `[]`, `nul`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := resultKind(b)
		if (err == nil) != (k == "linkkeys" || k == "keycast") {
			t.Fatalf("kind %q with error %v", k, err)
		}
	})
}
