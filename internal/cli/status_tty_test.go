package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// ttyScreen is a tmux session on a private server: a real pseudo-terminal of a fixed size whose
// screen can be read back as a person sees it.
type ttyScreen struct {
	t      *testing.T
	socket string
	frames []string // every distinct screen seen, in order
}

// newTTYScreen starts a detached tmux session of 160×12 running command (through sh) and, after
// it, "EXIT=<status>"; the session stays open after the command ends, so its last screen can be
// read. It skips the test where tmux is not installed.
func newTTYScreen(t *testing.T, command string) *ttyScreen {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the status line is tested on its pseudo-terminal")
	}
	s := &ttyScreen{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	script := command + `; echo "EXIT=$?"; exec sleep 600`
	if out, err := s.tmux("new-session", "-d", "-x", "160", "-y", "12", "sh", "-c", script); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = s.tmux("kill-server") })
	return s
}

func (s *ttyScreen) tmux(args ...string) ([]byte, error) {
	cmd := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null"}, args...)...)
	return cmd.CombinedOutput()
}

// capture returns the screen now, trailing blank lines removed, and keeps it when it is new.
func (s *ttyScreen) capture() string {
	out, err := s.tmux("capture-pane", "-p")
	if err != nil {
		s.t.Fatalf("tmux capture-pane: %v\n%s", err, out)
	}
	screen := strings.TrimRight(string(out), "\n")
	if n := len(s.frames); n == 0 || s.frames[n-1] != screen {
		s.frames = append(s.frames, screen)
	}
	return screen
}

// waitFor captures the screen until match accepts it or the deadline passes (then it fails,
// showing the last screen).
func (s *ttyScreen) waitFor(what string, within time.Duration, match func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	for {
		screen := s.capture()
		if match(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			s.save()
			s.t.Fatalf("no %s on the terminal within %v; the screen:\n%s", what, within, screen)
		}
		<-tick.C
	}
}

// save writes every distinct screen seen to the test's artifact directory (go test -artifacts
// -outputdir DIR keeps it).
func (s *ttyScreen) save() {
	var b strings.Builder
	for i, f := range s.frames {
		fmt.Fprintf(&b, "── screen %d ──\n%s\n", i+1, f)
	}
	path := filepath.Join(s.t.ArtifactDir(), "screens.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		s.t.Error(err)
	}
	s.t.Logf("%d screens: %s", len(s.frames), path)
}

// statusLineOf returns the screen's status line of label (the last line that starts with it), or "".
func statusLineOf(screen, label string) string {
	lines := strings.Split(screen, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], label+"  ") {
			return lines[i]
		}
	}
	return ""
}

var (
	statusFigures = regexp.MustCompile(`^handshake-bench  \d+s/4s  [\d,.]+ ok/s  p99 [\d.]+(µs|ms|s)  errors ([\d,]+)  refused ([\d,]+)$`)
	statusHold    = regexp.MustCompile(`^connections  holding ([\d,]+) connections: (\d+)s left$`)
)

// clientCommand is the shell command that runs this test binary as linkkeys-loadtest with args,
// with the status line allowed.
func clientCommand(t *testing.T, args ...string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q := []string{"env", "-u", termstatus.DisableEnv, childTreeEnv + "=linkkeys", strconv.Quote(exe)}
	for _, a := range args {
		q = append(q, strconv.Quote(a))
	}
	return strings.Join(q, " ")
}

// TestStatusLineOnATerminal runs the clients on a real pseudo-terminal (tmux) against a server
// whose per-source handshake burst is 5, from 4 source addresses, so its limiter refuses most
// attempts: handshake-bench's line shows the current rate, p99 and errors and refusals apart,
// counting up to the planned time; the connections hold counts down; the line is gone once the
// command ends, and stdout redirected to a file holds the seed's progress lines without a byte of
// the line. Every screen seen is kept as the test's artifact.
func TestStatusLineOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and runs clients on a pseudo-terminal")
	}
	info, _ := startLinkKeysServer(t, map[string]string{"TCP_HANDSHAKE_BURST": "5"}, "--metrics-addr", "127.0.0.1:0")

	t.Run("handshake-bench", func(t *testing.T) {
		s := newTTYScreen(t, clientCommand(t, "handshake-bench", "--info-file", info, "--duration", "4", "--concurrency", "4",
			"--client-ip-count", "4", "--workers", "1"))
		defer s.save()
		// The server's counters are sampled once an interval, so its refusals reach the line up to
		// an interval after the client counted them as failures; within the run they outnumber them.
		s.waitFor("handshake-bench line with more refused than errors", 20*time.Second, func(screen string) bool {
			m := statusFigures.FindStringSubmatch(statusLineOf(screen, "handshake-bench"))
			if m == nil {
				return false
			}
			errs, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
			refused, _ := strconv.ParseInt(strings.ReplaceAll(m[3], ",", ""), 10, 64)
			return refused > errs
		})
		end := s.waitFor("exit", 30*time.Second, func(screen string) bool { return strings.Contains(screen, "EXIT=") })
		if l := statusLineOf(end, "handshake-bench"); l != "" {
			t.Errorf("the status line is still on the screen after the command ended: %q", l)
		}
		for _, f := range s.frames {
			if strings.Contains(f, "handshake-bench: DONE") && statusLineOf(f, "handshake-bench") != "" {
				t.Errorf("the status line drawn again below the summary:\n%s", f)
			}
		}
	})

	t.Run("connections", func(t *testing.T) {
		stdout := filepath.Join(t.TempDir(), "stdout.txt")
		s := newTTYScreen(t, clientCommand(t, "connections", "--info-file", info, "--count", "60", "--concurrency", "8",
			"--client-ip-count", "4", "--hold", "3", "--progress-every", "10", "--workers", "1")+" >"+strconv.Quote(stdout))
		defer s.save()
		var left []int
		s.waitFor("hold countdown to 1s", 30*time.Second, func(screen string) bool {
			if m := statusHold.FindStringSubmatch(statusLineOf(screen, "connections")); m != nil {
				n, _ := strconv.Atoi(m[2])
				if len(left) == 0 || left[len(left)-1] != n {
					left = append(left, n)
				}
				return n <= 1
			}
			return false
		})
		if len(left) < 2 || left[0] < 2 {
			t.Errorf("countdown seen %v: want it to count down from the 3 s hold", left)
		}
		end := s.waitFor("exit", 30*time.Second, func(screen string) bool { return strings.Contains(screen, "EXIT=") })
		if l := statusLineOf(end, "connections"); l != "" {
			t.Errorf("the status line is still on the screen after the command ended: %q", l)
		}
		b, err := os.ReadFile(stdout)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.ContainsAny(b, "\r\x1b") {
			t.Errorf("stdout (a file) holds terminal control bytes:\n%q", b)
		}
		if !bytes.Contains(b, []byte("connections: target=60 concurrency=8")) || !bytes.Contains(b, []byte("  progress: attempted=10 success=")) {
			t.Errorf("stdout lacks the seed's header and progress lines:\n%s", b)
		}
	})
}

// TestKeycastRunStatusLineOnATerminal: keycast run on a real pseudo-terminal (tmux) against a
// server whose per-authorization rate limit turns away most requests: the line counts up to the
// planned time with the current rate, p99, and the 429s as refused, apart from errors; upstream's
// Progress lines print above it whole; the line is gone once the command ends.
func TestKeycastRunStatusLineOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and runs a client on a pseudo-terminal")
	}
	srv := kctest.Start(t, keycastserver.Config{RPCRatePerSecond: 20})
	users := filepath.Join(t.TempDir(), "users.json")
	if code, _, errs := kcRun(t, "setup", "--url", srv.URL, "--users", "2", "-c", "2", "-o", users); code != ExitOK {
		t.Fatalf("setup exit %d: %s", code, errs)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"env", "-u", termstatus.DisableEnv, mainEnv + "=1", exe, "keycast", "run", "--url", srv.URL, "--users-file", users,
		"-m", "get-public-key", "-d", "4", "--ramp-up", "0", "-c", "4", "--report-interval", "1", "-o", filepath.Join(t.TempDir(), "results.json")}
	for i, a := range args {
		args[i] = strconv.Quote(a)
	}
	s := newTTYScreen(t, strings.Join(args, " "))
	defer s.save()
	line := regexp.MustCompile(`^keycast run  \d+s/4s  [\d,.]+ ok/s  p99 [\d.]+(µs|ms|s)  errors ([\d,]+)  refused ([\d,]+)$`)
	s.waitFor("keycast run line with refusals", 20*time.Second, func(screen string) bool {
		m := line.FindStringSubmatch(statusLineOf(screen, "keycast run"))
		if m == nil {
			return false
		}
		errs, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		refused, _ := strconv.ParseInt(strings.ReplaceAll(m[3], ",", ""), 10, 64)
		return refused > 0 && errs == 0
	})
	end := s.waitFor("exit", 30*time.Second, func(screen string) bool { return strings.Contains(screen, "EXIT=") })
	if l := statusLineOf(end, "keycast run"); l != "" {
		t.Errorf("the status line is still on the screen after the command ended: %q", l)
	}
	for _, f := range s.frames {
		if strings.Contains(f, "Keycast Load Test Results") && statusLineOf(f, "keycast run") != "" {
			t.Errorf("the status line drawn again below the results:\n%s", f)
		}
		for _, l := range strings.Split(f, "\n") {
			if strings.Contains(l, "Progress: ") && !strings.HasPrefix(strings.TrimSpace(l), "Progress: ") && !strings.Contains(l, "INFO") {
				t.Errorf("a Progress line written over: %q", l)
			}
		}
	}
}

// TestStatusLineOffOnAPipe: with stderr a pipe, a command wrapped by attachStatus runs with its
// environment untouched (the same writers and logger) and no status line in its context, so its
// output is byte for byte what it is without the wrapper; TERM=dumb and LOADPROOF_NO_STATUS turn
// it off on a terminal too.
func TestStatusLineOffOnAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	env, _, _ := lkTestEnv()
	env.Stdout, env.Stderr = w, w
	env.Getenv = func(k string) string { return map[string]string{"TERM": "xterm-256color"}[k] }
	before := *env
	ran := false
	c := &cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
		ran = true
		if statusFrom(cmd.Context()) != nil {
			t.Error("a status line on a pipe")
		}
		if env.Stdout != before.Stdout || env.Stderr != before.Stderr || env.Logger != before.Logger {
			t.Error("the environment's writers or logger were replaced on a pipe")
		}
		return nil
	}}
	attachStatus(c, env, fixedStatus(termstatus.Options{Label: "x"}))
	c.SetArgs(nil)
	if err := c.ExecuteContext(context.Background()); err != nil || !ran {
		t.Fatalf("ran %v, err %v", ran, err)
	}
	if termstatus.Enabled(w, env.Getenv) {
		t.Error("Enabled on a pipe")
	}
}
