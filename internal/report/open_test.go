package report

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/keycastresult"
	lkr "github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/search"
)

// openFixtures writes one file of every kind Open reads into dir and returns their paths by name.
func openFixtures(t testing.TB, dir string) map[string]string {
	t.Helper()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := lkr.NewAttempts()
	for range 4 {
		a.Add("", "", time.Millisecond)
	}
	lk := lkr.Result{Attempts: a}
	lk.Command, lk.Target = lkr.CmdDDoS, "127.0.0.1:4000"
	lk.Flags = map[string]string{"sources": "4", "concurrency": "2"}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lk.StartedAt, lk.EndedAt = t0, t0.Add(time.Second)
	env := handshakeEnvelope(3, 1, 10, 0)
	env.Harness = "other"
	res := runSearch(t, search.Config{Vary: "rate", From: 100, To: 800, Growth: 2, Resolution: 0.25, Trials: 1, Integer: true,
		SLO: mustSLO(t, "p99<20ms"), Resamples: 10, Seed: 1}, stepServer{knee: 300})
	sb, err := res.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ev := []byte(`{"schema_version":1,"evidence_scope":"rehearsal","phases":[]}`)
	return map[string]string{
		"linkkeys":        write("lk.json", encode(t, lk)),
		"keycast":         write("kc.json", encode(t, synthResults(3, 20))),
		"keycast-up":      write("upstream.json", mustRead(t, "testdata/upstream-dec2025.json")),
		"envelope":        write("other.json", encode(t, env)),
		"evidence-file":   write("bundle/evidence.json", ev),
		"evidence-dir":    filepath.Join(dir, "bundle"),
		"evidence-named":  write("ev-copy.json", ev),
		"search-file":     write("search/search.json", sb),
		"search-dir":      filepath.Join(dir, "search"),
		"search-renamed":  write("knee.json", sb),
		"not-a-bundle":    filepath.Join(dir, "empty-dir"),
		"missing":         filepath.Join(dir, "missing.json"),
		"users":           write("users.json", []byte(`{"users":[{"pubkey":"aa","ucan_token":"t"}]}`)),
		"array":           write("array.json", []byte(`[1,2,3]`)),
		"null":            write("null.json", []byte(`null`)),
		"empty":           write("empty.json", nil),
		"binary":          write("binary.json", []byte("\x00\x01\x02\xff{")),
		"garbage":         write("garbage.txt", []byte("hello, world\n")),
		"lk-truncated":    write("lk-cut.json", encode(t, lk)[:200]),
		"kc-truncated":    write("kc-cut.json", encode(t, synthResults(3, 20))[:300]),
		"ev-truncated":    write("ev-cut/evidence.json", ev[:30]),
		"search-trunc":    write("search-cut.json", sb[:len(sb)/2]),
		"kc-inconsistent": write("kc-bad.json", []byte(strings.Replace(string(mustRead(t, "testdata/upstream-dec2025.json")), `"total_requests": `, `"total_requests": 1`, 1))),
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenReadsEveryKind: each kind of file loadproof reads opens into its one model, a bundle's
// directory standing for its record, and a bundle's directory is kept for its members.
func TestOpenReadsEveryKind(t *testing.T) {
	dir := t.TempDir()
	p := openFixtures(t, dir)
	for _, c := range []struct {
		name string
		kind Kind
		ok   func(f *File) bool
	}{
		{"linkkeys", KindLinkKeys, func(f *File) bool { return f.LinkKeys != nil && f.Envelope != nil && f.IsResult() }},
		{"keycast", KindKeycast, func(f *File) bool { return f.Keycast != nil && f.Envelope != nil && f.IsResult() }},
		{"keycast-up", KindKeycast, func(f *File) bool { return f.Keycast != nil && f.Envelope == nil && f.IsResult() }},
		{"envelope", KindEnvelope, func(f *File) bool { return f.Envelope != nil && f.LinkKeys == nil && !f.IsResult() }},
		{"evidence-file", KindEvidence, func(f *File) bool { return f.Evidence != nil && f.Dir == filepath.Join(dir, "bundle") }},
		{"evidence-dir", KindEvidence, func(f *File) bool {
			return f.Evidence != nil && f.Path == filepath.Join(dir, "bundle", "evidence.json") && f.Dir == filepath.Join(dir, "bundle")
		}},
		{"evidence-named", KindEvidence, func(f *File) bool { return f.Evidence != nil }},
		{"search-file", KindSearch, func(f *File) bool { return f.Search != nil && f.Dir == filepath.Join(dir, "search") }},
		{"search-dir", KindSearch, func(f *File) bool { return f.Search != nil && f.Path == filepath.Join(dir, "search", "search.json") }},
		{"search-renamed", KindSearch, func(f *File) bool { return f.Search != nil }},
	} {
		f, err := Open(p[c.name])
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if f.Kind != c.kind || !c.ok(f) || len(f.Data) == 0 {
			t.Errorf("%s: kind %v (want %v), model %+v", c.name, f.Kind, c.kind, f)
		}
	}
}

// TestOpenRefusesWithTheFileAndTheProblem: truncated, hostile and foreign files, the exports
// loadproof writes but does not read back, and files over their cap are refused with a message
// that names the file and says what is wrong.
func TestOpenRefusesWithTheFileAndTheProblem(t *testing.T) {
	dir := t.TempDir()
	p := openFixtures(t, dir)
	kc := synthResults(3, 20)
	page, err := HTML([]Source{{Name: "kc.json", Data: encode(t, kc)}}, HTMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hgrm, err := HGRM([]Source{{Name: "kc.json", Data: encode(t, kc)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	text, err := Render(kc, "text")
	if err != nil {
		t.Fatal(err)
	}
	compareText, _ := os.ReadFile("testdata/compare.golden")
	exports := map[string][]byte{
		"run.html": page, "run.hgrm": hgrm, "run.txt": []byte(text + "\n"), "compare.txt": compareText,
		"run.csv": []byte(CSV(kc) + "\n"), "lk.csv": []byte(LinkKeysCSV(&lkr.Result{}) + "\n"),
		"ev.csv":    []byte(EvidenceCSV(&evidence.Evidence{}) + "\n"),
		"ev.txt":    []byte("Capacity evidence (keycast harness): x\n"),
		"bom.html":  append([]byte("\xef\xbb\xbf\n  "), page...),
		"crlf.hgrm": []byte(strings.ReplaceAll(string(hgrm), "\n", "\r\n")),
	}
	for name, b := range exports {
		p["export "+name] = filepath.Join(dir, name)
		if err := os.WriteFile(p["export "+name], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p["not-a-bundle"], 0o755); err != nil {
		t.Fatal(err)
	}
	// Files over their cap, sparse: nothing is read, the size alone refuses them.
	huge := filepath.Join(dir, "huge.json")
	bigEvidence := filepath.Join(dir, "big", "evidence.json")
	if err := os.MkdirAll(filepath.Dir(bigEvidence), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, size := range map[string]int64{huge: boundedfile.Result.Max + 1, bigEvidence: boundedfile.Evidence.Max + 1} {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	cases := []struct {
		path, want string
		kind       Kind
	}{
		{p["export run.html"], "is an HTML page", KindExportHTML},
		{p["export bom.html"], "is an HTML page", KindExportHTML},
		{p["export run.hgrm"], "is an HdrHistogram distribution", KindExportHGRM},
		{p["export crlf.hgrm"], "is an HdrHistogram distribution", KindExportHGRM},
		{p["export run.txt"], "is a text report", KindExportText},
		{p["export compare.txt"], "is a text report", KindExportText},
		{p["export ev.txt"], "is a text report", KindExportText},
		{p["export run.csv"], "is a CSV export", KindExportCSV},
		{p["export lk.csv"], "is a CSV export", KindExportCSV},
		{p["export ev.csv"], "is a CSV export", KindExportCSV},
		{p["not-a-bundle"], "is a directory holding neither a capacity evidence bundle", KindUnknown},
		{p["missing"], "no such file", KindUnknown},
		{fifo, "is a named pipe (FIFO), not a regular file", KindUnknown},
		{"/dev/zero", "is a character device, not a regular file", KindUnknown},
		{huge, "larger than the 512 MiB cap on result files", KindUnknown},
		{bigEvidence, "larger than the 64 MiB cap on evidence files", KindUnknown},
		{p["users"], "is a users file", KindUnknown},
		{p["array"], "is JSON but not an object", KindUnknown},
		{p["null"], "is JSON null", KindUnknown},
		{p["empty"], "is empty", KindUnknown},
		{p["binary"], "is not valid JSON", KindUnknown},
		{p["garbage"], "is not valid JSON", KindUnknown},
		{p["lk-truncated"], "ends after 200 bytes in the middle of a value", KindUnknown},
		{p["kc-truncated"], "ends after 300 bytes in the middle of a value", KindUnknown},
		{p["ev-truncated"], "ends after 30 bytes", KindUnknown},
		{p["search-trunc"], "in the middle of a value (cut short", KindUnknown},
		{p["kc-inconsistent"], "inconsistent results", KindKeycast},
	}
	for _, c := range cases {
		f, err := Open(c.path)
		if err == nil {
			t.Errorf("%s: opened as %v", c.path, f.Kind)
			continue
		}
		if f != nil {
			t.Errorf("%s: a file beside the error %v", c.path, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.path) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q; want the path and %q", c.path, msg, c.want)
		}
		var oe *OpenError
		if errors.As(err, &oe) && oe.Kind != c.kind {
			t.Errorf("%s: told %v, want %v", c.path, oe.Kind, c.kind)
		}
		if c.kind >= KindExportText {
			if !errors.Is(err, ErrExport) || !strings.Contains(msg, "loadproof reads result files (.json)") {
				t.Errorf("%s: an export refused without saying what to give: %q", c.path, msg)
			}
		}
	}
}

// TestParseAgreesWithSniff: Parse tells every JSON kind as Sniff does, and a refusal is never a
// NotResultsError without the file's name.
func TestParseAgreesWithSniff(t *testing.T) {
	p := openFixtures(t, t.TempDir())
	for name, path := range p {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // directories, the missing file
		}
		f, perr := Parse("x/"+name, b)
		k, _ := Sniff(b)
		if perr == nil && f.Kind != k {
			t.Errorf("%s: Parse says %v, Sniff %v", name, f.Kind, k)
		}
		var ne *keycastresult.NotResultsError
		if errors.As(perr, &ne) && ne.Path != "x/"+name {
			t.Errorf("%s: %v does not name the file", name, perr)
		}
	}
}

// FuzzOpen: whatever a file holds, Open either reads it into exactly the model of its kind or
// refuses it with a message naming the file; it never panics.
func FuzzOpen(f *testing.F) {
	// The small fixtures only: the fuzzer minimizes every new input it finds, and minimizing a
	// large one costs minutes.
	for _, path := range openFixtures(f, f.TempDir()) {
		if b, err := os.ReadFile(path); err == nil && len(b) < 4<<10 {
			f.Add(b)
		}
	}
	for _, s := range []string{`{"harness":"linkkeys"}`, `{"metadata":{},"summary":{}}`, `{"schema_version":1,"phases":[]}`,
		`{"format":"loadproof.search/v1"}`, `{"format":"loadproof.result/v2","harness":"x"}`, "<!DOCTYPE html><p>", "Comparison\n",
		"       Value     Percentile TotalCount 1/(1-Percentile)\n", "url,scenario,method,\n", "\xef\xbb\xbf<html", "[]", `"x"`, ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "in.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := Open(path)
		if err != nil {
			if file != nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("refusal %q (file %v) does not name %s", err, file, path)
			}
			return
		}
		models := 0
		for _, set := range []bool{file.LinkKeys != nil, file.Keycast != nil, file.Evidence != nil, file.Search != nil,
			file.Kind == KindEnvelope && file.Envelope != nil} {
			if set {
				models++
			}
		}
		if models != 1 || file.Kind == KindUnknown || file.Kind >= KindExportText {
			t.Fatalf("kind %v with %d models: %q", file.Kind, models, b)
		}
		_ = json.Valid(file.Data)
	})
}

// TestParseHoldsKindsToTheirCap: a file told to be a search by its content, whatever its name, is
// held to the search file's cap.
func TestParseHoldsKindsToTheirCap(t *testing.T) {
	b := []byte(`{"format":"` + search.Format + `","pad":"` + strings.Repeat("a", search.MaxSearchBytes) + `"}`)
	_, err := Parse("big.json", b)
	if err == nil || !strings.Contains(err.Error(), "big.json is ") || !strings.Contains(err.Error(), "cap on search files") {
		t.Errorf("an oversized search file: %v", err)
	}
}
