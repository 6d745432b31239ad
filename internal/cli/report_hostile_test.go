package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReportRefusesHostileFiles (issue 27, finding 3): devices, symlinks to them and FIFOs are
// refused by name before anything is read, in every format; an evidence file whose results_file
// leaves the bundle is not followed.
func TestReportRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"report", "/dev/zero"}, "/dev/zero: is a character device, not a regular file"},
		{[]string{"report", zero}, "zero.json: is a character device"},
		{[]string{"report", zero, "--format", "html"}, "zero.json: is a character device"},
		{[]string{"report", fifo}, "fifo.json: is a named pipe (FIFO)"},
		{[]string{"report", fifo, "--format", "json"}, "is a named pipe (FIFO)"},
	} {
		env, _, errb := lkTestEnv()
		if code := Run(context.Background(), Loadproof, c.args, env); code != ExitUsage || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errb, c.msg)
		}
	}
}

// TestReportKeepsBundleMembersInside (issue 27, finding 3): results_file naming ../users.json,
// /etc/passwd or ../../../../dev/zero is refused, not read and described.
func TestReportKeepsBundleMembersInside(t *testing.T) {
	dir, plan := capacityFixture(t)
	out := filepath.Join(dir, "ev")
	if code, stdout, stderr := runCapacity(t, cannedRunner(-1, 0), "-p", plan, "-o", out); code != ExitFailure {
		t.Fatalf("capacity exit %d\n%s%s", code, stdout, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.json"), []byte(`{"users":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	evPath := filepath.Join(out, "evidence.json")
	orig, err := os.ReadFile(evPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ member, msg string }{
		{"../users.json", "is not a plain file name in the bundle"},
		{"/etc/passwd", "is not a plain file name in the bundle"},
		{"../../../../dev/zero", "is not a plain file name in the bundle"},
	} {
		var ev map[string]any
		if err := json.Unmarshal(orig, &ev); err != nil {
			t.Fatal(err)
		}
		phases := ev["phases"].([]any)
		phases[0].(map[string]any)["results_file"] = c.member
		b, _ := json.Marshal(ev)
		if err := os.WriteFile(evPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		env, stdout, stderr := lkTestEnv()
		Run(context.Background(), Loadproof, []string{"report", out}, env)
		all := stdout.String() + stderr.String()
		if !strings.Contains(all, c.msg) || strings.Contains(all, "root:") {
			t.Errorf("results_file %q: output lacks %q (or shows the file):\n%s", c.member, c.msg, all)
		}
	}
}

// TestReportEscapesTerminalControls (issue 27, finding 8): a result whose target and cause names
// carry escape sequences that would rewrite the line above as a green "Success Rate: 100.0%" is
// printed with the escapes visible, in text and csv, and no ESC byte reaches the terminal.
func TestReportEscapesTerminalControls(t *testing.T) {
	dir := t.TempDir()
	const forged = "\x1b[1A\x1b[2K\x1b[32mSuccess Rate: 100.0%"
	path := kcSegment(t, dir, "crafted.json", 10, 0)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["metadata"].(map[string]any)["url"] = "http://127.0.0.1:3000" + forged
	doc["metadata"].(map[string]any)["scenario"] = "WarmCache\r" + forged
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "csv"} {
		env, stdout, stderr := lkTestEnv()
		if code := Run(context.Background(), Loadproof, []string{"report", path, "--format", format}, env); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", format, code, stderr)
		}
		out := stdout.String() + stderr.String()
		if strings.ContainsAny(out, "\x1b\r") {
			t.Errorf("%s: a control byte reached the output:\n%q", format, out)
		}
		if !strings.Contains(out, `\x1b[1A\x1b[2K\x1b[32mSuccess Rate`) {
			t.Errorf("%s: the escapes are not shown:\n%q", format, out)
		}
	}
}

// TestReportRefusesImpossibleFigures (issue 27, finding 7): a total of 2^63-1 or a cause count of
// -5 is refused with the field named, in text and html, instead of drawn as 9.2e18 operations.
func TestReportRefusesImpossibleFigures(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		spoil func(doc map[string]any)
		msg   string
	}{
		{"total", func(doc map[string]any) {
			s := doc["summary"].(map[string]any)
			s["total_requests"], s["successful_requests"] = json.Number("9223372036854775807"), json.Number("9223372036854775807")
		}, "summary.total_requests is 9223372036854775807"},
		{"cause", func(doc map[string]any) { doc["causes"] = map[string]any{"http_500": -5} }, `causes["http_500"] is negative (-5)`},
	} {
		path := kcSegment(t, dir, c.name+".json", 10, 0)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		c.spoil(doc)
		b, _ = json.Marshal(doc)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"text", "html"} {
			env, stdout, stderr := lkTestEnv()
			code := Run(context.Background(), Loadproof, []string{"report", path, "--format", format, "-o", filepath.Join(dir, c.name+".html")}, env)
			if code == ExitOK || !strings.Contains(stderr.String(), c.msg) {
				t.Errorf("%s, %s: exit %d, stderr %q (want %q)\n%s", c.name, format, code, stderr, c.msg, stdout.String()[:min(stdout.Len(), 300)])
			}
		}
	}
}
