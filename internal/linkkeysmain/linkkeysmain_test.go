package linkkeysmain

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

func testEnv(stdout, stderr *bytes.Buffer, vars map[string]string) Env {
	return Env{Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return vars[k] },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestRunUsage: the lean binary's command line fails the way the command tree's does (exit 2, the
// problem named) and --help lists the shared flags.
func TestRunUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		vars map[string]string
		code int
		want string
	}{
		{[]string{"--help"}, nil, 0, "--release-idle-memory"},
		{[]string{"--bogus"}, nil, ExitUsage, "unknown flag: --bogus"},
		{[]string{"extra"}, nil, ExitUsage, `takes no arguments, got ["extra"]`},
		{[]string{"--processes", "0"}, nil, ExitUsage, "--processes must be at least 1, got 0"},
		{[]string{"--duration-secs", "1"}, map[string]string{"TCP_MAX_CONNECTIONS": "many"}, ExitUsage, "TCP_MAX_CONNECTIONS"},
	} {
		var out, errb bytes.Buffer
		dir := t.TempDir()
		args := append(c.args, "--db-path", filepath.Join(dir, "db"), "--info-file", filepath.Join(dir, "info.json"))
		if c.args[0] == "extra" {
			args = c.args
		}
		if got := run(context.Background(), testEnv(&out, &errb, c.vars), args); got != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, got, errb.String(), c.code, c.want)
		}
	}
}

// TestRunServes: one short run of the server prints its config line, listening line and METRICS
// lines that parse, with the RSS split on Linux.
func TestRunServes(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	code := run(context.Background(), testEnv(&out, &errb, nil), []string{"--db-path", filepath.Join(dir, "db"),
		"--info-file", filepath.Join(dir, "info.json"), "--metrics-interval-secs", "1", "--duration-secs", "1"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var final linkkeys.MetricsLine
	for _, l := range strings.Split(out.String(), "\n") {
		if m, err := linkkeys.ParseMetricsLine(l); err == nil {
			final = m
		}
	}
	if final.Label != "final" || !strings.Contains(out.String(), "listening on 127.0.0.1:") {
		t.Fatalf("output:\n%s", out.String())
	}
	if runtime.GOOS == "linux" && (final.ProcessRSSBytes == nil || final.ProcessRSSAnonBytes == 0 ||
		final.ProcessRSSAnonBytes+final.ProcessRSSFileBytes+final.ProcessRSSShmemBytes != *final.ProcessRSSBytes) {
		t.Errorf("RSS split %+v does not add up to process_rss_bytes", final)
	}
}
