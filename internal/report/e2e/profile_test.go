//go:build e2e

package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildTool builds a command of this module into dir.
func buildTool(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/loadproof/loadproof/cmd/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

// TestProfileFlameGraphAndSkipSetup runs `keycast-loadtest profile` in its default mode (it starts
// the reference server itself) twice: the second run with --skip-setup reuses the users, and
// their tokens still work because the server keeps its data (and key) between runs. A third run
// whose server data is gone gets 401 for every request and fails. The flame graph page it writes
// opens in the browser with the network cut off.
func TestProfileFlameGraphAndSkipSetup(t *testing.T) {
	b := needBrowser(t)
	dir := t.TempDir()
	bin := buildTool(t, dir, "keycast-loadtest")
	out := filepath.Join(dir, "prof")
	run := func(extra ...string) (string, string, error) {
		args := append([]string{"profile", "--users", "2", "--concurrency", "2", "--duration", "2", "--output", out}, extra...)
		c := exec.Command(bin, args...)
		var so, se strings.Builder
		c.Stdout, c.Stderr = &so, &se
		err := c.Run()
		return so.String(), se.String(), err
	}
	if so, se, err := run(); err != nil {
		t.Fatalf("first profile: %v\n%s\n%s", err, so, se)
	}
	so, se, err := run("--skip-setup")
	if err != nil {
		t.Fatalf("--skip-setup profile: %v\n%s\n%s", err, so, se)
	}
	if !strings.Contains(se, "Reusing 2 users") || !strings.Contains(so, "Success Rate:  100.0%") {
		t.Errorf("--skip-setup did not reuse working users:\n%s\n%s", so, se)
	}
	pages, _ := filepath.Glob(filepath.Join(out, "keycast-cpu-*.flame.html"))
	heaps, _ := filepath.Glob(filepath.Join(out, "keycast-heap-*.flame.html"))
	if len(pages) != 2 || len(heaps) != 2 {
		t.Fatalf("flame graphs: cpu %v heap %v", pages, heaps)
	}
	if err := os.RemoveAll(filepath.Join(out, "server-data")); err != nil {
		t.Fatal(err)
	}
	_, se, err = run("--skip-setup")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(se, "failed authentication (401)") {
		t.Errorf("a --skip-setup run against a server with new keys: %v\n%s", err, se)
	}

	p, err := b.Open(fileURL(pages[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// pprof's flame graph draws its boxes into #stack-chart.
	if err := p.Wait(`document.querySelectorAll('#stack-chart div').length > 5`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
	if reqs := p.Requests(); len(reqs) > 0 {
		t.Errorf("the flame graph requested %q", reqs)
	}
	shot := filepath.Join(t.ArtifactDir(), "flame-cpu.png")
	if err := p.Screenshot(shot); err != nil {
		t.Error(err)
	}
	t.Logf("screenshot: %s", shot)
}

// TestLinkKeysProfile runs `linkkeys-loadtest profile` around handshake-bench: the server runs in
// the profiling process, the bench in a child; the CPU flame graph page opens offline.
func TestLinkKeysProfile(t *testing.T) {
	b := needBrowser(t)
	dir := t.TempDir()
	bin := buildTool(t, dir, "linkkeys-loadtest")
	out := filepath.Join(dir, "prof")
	c := exec.Command(bin, "profile", "--bench", "handshake-bench", "--duration-secs", "2", "--output", out, "--", "--concurrency", "4")
	var so, se strings.Builder
	c.Stdout, c.Stderr = &so, &se
	if err := c.Run(); err != nil {
		t.Fatalf("profile: %v\n%s\n%s", err, so.String(), se.String())
	}
	for _, pattern := range []string{"linkkeys-cpu-*.pprof", "linkkeys-heap-*.pprof", "linkkeys-cpu-*.flame.html", "linkkeys-heap-*.flame.html", "bench-*.json"} {
		if m, _ := filepath.Glob(filepath.Join(out, pattern)); len(m) != 1 {
			t.Fatalf("%s: %v\n%s", pattern, m, so.String())
		}
	}
	pages, _ := filepath.Glob(filepath.Join(out, "linkkeys-cpu-*.flame.html"))
	p, err := b.Open(fileURL(pages[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Wait(`document.querySelectorAll('#stack-chart div').length > 5`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	if errs, reqs := p.Errors(), p.Requests(); len(errs) > 0 || len(reqs) > 0 {
		t.Errorf("console errors %q, requests %q", errs, reqs)
	}
	if err := p.Screenshot(filepath.Join(t.ArtifactDir(), "flame-linkkeys-cpu.png")); err != nil {
		t.Error(err)
	}
}
