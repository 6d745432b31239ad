package launch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sh returns Options that run script under /bin/sh, its log in a test directory.
func sh(t *testing.T, script string) Options {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh on this system")
	}
	return Options{Executable: "/bin/sh", Args: []string{"-c", script}, Log: filepath.Join(t.TempDir(), "server.log"), Wait: 10 * time.Second}
}

func exitedWithin(t *testing.T, p *Process, d time.Duration) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(d):
		t.Fatalf("the child (pid %d) has not exited within %s", p.PID(), d)
	}
}

func TestReadyLineThenStop(t *testing.T) {
	opt := sh(t, `printf "server listening on 127.0.0.1:1\nmore output\n"; exec sleep 30`)
	opt.ReadyLine = "server listening on "
	p, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-p.Exited():
		t.Fatalf("the child exited right after it was ready: %v", p.Err())
	default:
	}
	began := time.Now()
	err = p.Stop()
	if err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Stop = %v, want the child ended by SIGTERM", err)
	}
	if el := time.Since(began); el > DefaultGrace/2 {
		t.Errorf("Stop took %s: SIGTERM should end sleep at once", el)
	}
	exitedWithin(t, p, time.Second)
	if err2 := p.Stop(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Stop = %v, want the same %v", err2, err)
	}
	b, rerr := os.ReadFile(p.Log)
	if rerr != nil || !strings.Contains(string(b), "server listening on 127.0.0.1:1\nmore output\n") {
		t.Errorf("log %q (%v): want the child's whole output, ready line included", b, rerr)
	}
}

func TestInfoFileReady(t *testing.T) {
	info := filepath.Join(t.TempDir(), "info.json")
	opt := sh(t, `sleep 0.2; : > "$INFO.tmp"; printf '{"port":1}' > "$INFO.tmp"; mv "$INFO.tmp" "$INFO"; exec sleep 30`)
	opt.Env = append(os.Environ(), "INFO="+info)
	opt.InfoFile = info
	opt.Poll = 20 * time.Millisecond
	p, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Stop()
	if fi, err := os.Stat(info); err != nil || fi.Size() == 0 {
		t.Fatalf("Start returned before the info file was written: %v", err)
	}
}

func TestDiedBeforeReady(t *testing.T) {
	for _, tc := range []struct{ name, script, line, info string }{
		{"ready line", `echo "bad flag --x" >&2; exit 3`, "listening", ""},
		{"info file", `echo "bad flag --x" >&2; exit 3`, "", "info.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := sh(t, tc.script)
			opt.ReadyLine = tc.line
			if tc.info != "" {
				opt.InfoFile = filepath.Join(t.TempDir(), tc.info)
			}
			began := time.Now()
			p, err := Start(context.Background(), opt)
			if p != nil || !errors.Is(err, ErrExited) {
				t.Fatalf("Start = %v, %v; want ErrExited", p, err)
			}
			if !strings.Contains(err.Error(), opt.Log) || !strings.Contains(err.Error(), "exit status 3") {
				t.Errorf("error %q: want the log %s and the exit status named", err, opt.Log)
			}
			if el := time.Since(began); el >= opt.Wait {
				t.Errorf("Start took %s: it should end when the child exits, not at the deadline", el)
			}
			if b, _ := os.ReadFile(opt.Log); !strings.Contains(string(b), "bad flag --x") {
				t.Errorf("log %q: want the child's stderr", b)
			}
		})
	}
}

func TestReadyLineWrong(t *testing.T) {
	opt := sh(t, `echo "usage: server [flags]"; exec sleep 30`)
	opt.ReadyLine = "server listening on "
	p, err := Start(context.Background(), opt)
	if p != nil || !errors.Is(err, ErrReadyLine) || !strings.Contains(err.Error(), `"usage: server [flags]"`) {
		t.Fatalf("Start = %v, %v; want ErrReadyLine quoting the line", p, err)
	}
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct{ name, line, info string }{
		{"ready line", "listening", ""},
		{"info file", "", "info.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := sh(t, `echo "still starting" >&2; exec sleep 30`)
			opt.ReadyLine = tc.line
			if tc.info != "" {
				opt.InfoFile = filepath.Join(t.TempDir(), tc.info)
			}
			opt.Wait = 300 * time.Millisecond
			began := time.Now()
			p, err := Start(context.Background(), opt)
			if p != nil || !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), opt.Log) {
				t.Fatalf("Start = %v, %v; want ErrDeadline naming the log", p, err)
			}
			// The child was stopped: sleep 30 ends at SIGTERM, well before its 30 s.
			if el := time.Since(began); el > 10*time.Second {
				t.Errorf("Start took %s after a deadline of %s", el, opt.Wait)
			}
		})
	}
}

func TestContextEnds(t *testing.T) {
	opt := sh(t, `exec sleep 30`)
	opt.ReadyLine = "listening"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := Start(ctx, opt); p != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, %v; want context.Canceled", p, err)
	}
}

// TestStopKillsAfterGrace: a child that ignores SIGTERM is killed once the grace has passed.
func TestStopKillsAfterGrace(t *testing.T) {
	// An ignored signal stays ignored across exec, so sleep ignores SIGTERM too.
	opt := sh(t, `trap '' TERM; echo ready; exec sleep 30`)
	opt.ReadyLine = "ready"
	opt.Grace = 200 * time.Millisecond
	p, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	began := time.Now()
	err = p.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop = %v, want the child killed", err)
	}
	if el := time.Since(began); el < opt.Grace || el > 10*time.Second {
		t.Errorf("Stop took %s, want the grace (%s) then a kill", el, opt.Grace)
	}
}

// TestStopSignal: Options.StopSignal is what Stop sends.
func TestStopSignal(t *testing.T) {
	opt := sh(t, `trap 'echo got INT; exit 0' INT; echo ready; while :; do sleep 0.05; done`)
	opt.ReadyLine = "ready"
	opt.StopSignal = os.Interrupt
	p, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop = %v, want exit status 0 from the INT trap", err)
	}
	if b, _ := os.ReadFile(p.Log); !strings.Contains(string(b), "got INT") {
		t.Errorf("log %q: want the trap's line", b)
	}
}

func TestNoLog(t *testing.T) {
	if _, err := Start(context.Background(), Options{Executable: "/bin/true"}); err == nil {
		t.Fatal("Start without a log: want an error")
	}
}

// TestServeStop: an in-process server is shut down and waited for; one whose shutdown fails is closed.
func TestServeStop(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	s := Serve(func() error { return hs.Serve(ln) }, hs.Shutdown, hs.Close, time.Second)
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatalf("GET the in-process server: %v", err)
	}
	resp.Body.Close()
	if err := s.Stop(); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Stop = %v, want http.ErrServerClosed", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is open after Stop")
	}
	if _, err := http.Get("http://" + ln.Addr().String()); err == nil {
		t.Error("the server still answers after Stop")
	}

	closed := make(chan struct{})
	block := make(chan struct{})
	s = Serve(func() error { <-block; return nil },
		func(context.Context) error { return errors.New("shutdown failed") },
		func() error { close(closed); close(block); return nil }, time.Second)
	if err := s.Stop(); err != nil {
		t.Errorf("Stop = %v", err)
	}
	select {
	case <-closed:
	default:
		t.Error("close was not called after a failed shutdown")
	}
}

// FuzzFirstLine: whatever a child prints, in whatever chunks, the first line kept is the output up
// to its first newline (bounded by maxReadyLine), and every byte reaches the log.
func FuzzFirstLine(f *testing.F) {
	f.Add([]byte("keycast server listening on 127.0.0.1:1\nmore\n"), uint8(3))
	f.Add([]byte("no newline at all"), uint8(1))
	f.Add([]byte("\r\n"), uint8(0))
	f.Add([]byte("crlf line\r\nnext"), uint8(7))
	f.Add([]byte(strings.Repeat("a", maxReadyLine+5)+"\n"), uint8(255))
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		var log strings.Builder
		fl := &firstLine{w: &log, done: make(chan struct{})}
		step := int(chunk) + 1
		for i := 0; i < len(out); i += step {
			if _, err := fl.Write(out[i:min(i+step, len(out))]); err != nil {
				t.Fatal(err)
			}
		}
		if log.String() != string(out) {
			t.Fatalf("log %q, want %q", log.String(), out)
		}
		want, _, found := strings.Cut(string(out), "\n")
		if len(want) >= maxReadyLine {
			want, found = want[:maxReadyLine], true
		}
		if fl.seen() != found {
			t.Fatalf("seen = %v, want %v", fl.seen(), found)
		}
		if found && fl.line() != strings.TrimSuffix(want, "\r") {
			t.Fatalf("line %q, want %q", fl.line(), want)
		}
	})
}

func TestFreeAddrIsBindableLoopback(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("FreeAddr() = %q; want 127.0.0.1 and a port", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("binding %s: %v", addr, err)
	}
	ln.Close()
}
