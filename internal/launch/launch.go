// Package launch starts a reference server for a run that needs its own, waits until it is ready
// and stops it: the one launcher of the smoke run, both profile commands, the demo and the
// capacity command's server phases.
//
// A server runs either as a child process (Start: this binary or another, tied to this process by
// procexec so it never outlives it) or in this process (Serve). A child is ready when it prints a
// ready line (the first line of its standard output must start with Options.ReadyLine) or when an
// info file appears (non-empty) at Options.InfoFile; the wait ends early, naming the child's log,
// when the child exits first, and with an error when Options.Wait passes or the context ends.
// Stop sends Options.StopSignal (SIGTERM unless told otherwise), kills the child when it lingers
// past Options.Grace, and waits for it.
//
// A failed wait is a *ReadyError wrapping ErrExited, ErrDeadline or ErrReadyLine, with what each
// caller needs to keep its own wording; its message names the log.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/procexec"
)

// The wait's failures, for errors.Is.
var (
	// ErrExited: the child exited before it was ready.
	ErrExited = errors.New("the server exited before it was ready")
	// ErrDeadline: the child was not ready within Options.Wait.
	ErrDeadline = errors.New("the server was not ready in time")
	// ErrReadyLine: the child's first line was not its ready line.
	ErrReadyLine = errors.New("the server's first line was not its ready line")
)

// Defaults of Options.
const (
	DefaultWait  = 60 * time.Second
	DefaultPoll  = 100 * time.Millisecond
	DefaultGrace = 15 * time.Second
	// maxReadyLine bounds the bytes kept while waiting for the first line.
	maxReadyLine = 64 << 10
)

// Options say what to start and how to tell it is ready.
type Options struct {
	// Executable is the program (empty: this binary); Args its arguments.
	Executable string
	Args       []string
	// Env, when non-nil, replaces the child's environment.
	Env []string
	// Log is the file the child's standard output and error go to; it is created (truncated).
	Log string
	// ReadyLine, when not empty, is the prefix the first line of the child's standard output must
	// have; the child is ready when it prints it.
	ReadyLine string
	// InfoFile, when not empty, is a file the child writes when it is ready; it is ready when the
	// file is there and not empty. With neither ReadyLine nor InfoFile the child is ready at once.
	InfoFile string
	// Wait bounds the wait for readiness (0: DefaultWait); Poll is how often InfoFile is looked at
	// (0: DefaultPoll).
	Wait time.Duration
	Poll time.Duration
	// StopSignal is what Stop sends first (nil: SIGTERM); Grace is how long Stop waits before it
	// kills the child (0: DefaultGrace).
	StopSignal os.Signal
	Grace      time.Duration
	// ParentDeath is what the child receives when this process dies (procexec.Options.Signal; 0:
	// SIGKILL).
	ParentDeath syscall.Signal
}

// Process is a started child.
type Process struct {
	// Cmd is the child's command; Cmd.Process.Pid its process id.
	Cmd *exec.Cmd
	// Log is the path of the child's log.
	Log string

	opt      Options
	logFile  *os.File
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
}

// Start starts the child and waits until it is ready. On any error the child is stopped (or was
// never started) and its log stays for the caller to show.
func Start(ctx context.Context, opt Options) (*Process, error) {
	if opt.Log == "" {
		return nil, errors.New("launch: no log file named for the server's output")
	}
	lf, err := os.Create(opt.Log)
	if err != nil {
		return nil, fmt.Errorf("creating the server log: %w", err)
	}
	cmd, err := procexec.Command(opt.Executable, opt.Args...)
	if err != nil {
		lf.Close()
		return nil, err
	}
	cmd.Env = opt.Env
	cmd.Stderr = lf
	var first *firstLine
	if opt.ReadyLine != "" {
		first = &firstLine{w: lf, done: make(chan struct{})}
		cmd.Stdout = first
		// Go copies a writer that is not a file in its own goroutine: bound the wait for it
		// after the child exits (a grandchild holding the pipe must not hang Stop).
		cmd.WaitDelay = time.Second
	} else {
		cmd.Stdout = lf
	}
	if err := procexec.Start(cmd, procexec.Options{Signal: opt.ParentDeath}); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s %s: %w", cmd.Path, strings.Join(opt.Args, " "), err)
	}
	p := &Process{Cmd: cmd, Log: opt.Log, opt: opt, logFile: lf, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		lf.Close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx, first); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Process) waitReady(ctx context.Context, first *firstLine) error {
	wait := p.opt.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var lineDone <-chan struct{}
	if first != nil {
		lineDone = first.done
	}
	var tick <-chan time.Time
	if p.opt.InfoFile != "" {
		poll := p.opt.Poll
		if poll <= 0 {
			poll = DefaultPoll
		}
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		if lineDone == nil && (p.opt.InfoFile == "" || nonEmpty(p.opt.InfoFile)) {
			return nil
		}
		select {
		case <-lineDone:
			lineDone = nil
			if err := p.checkLine(first); err != nil {
				return err
			}
		case <-p.exited:
			// A child that printed its ready line or wrote its info file just before it exited
			// was ready; one that did neither died.
			if lineDone != nil && first.seen() {
				lineDone = nil
				if err := p.checkLine(first); err != nil {
					return err
				}
			}
			if lineDone == nil && (p.opt.InfoFile == "" || nonEmpty(p.opt.InfoFile)) {
				return nil
			}
			return &ReadyError{Err: ErrExited, Exit: p.exitErr, Log: p.Log}
		case <-deadline.C:
			return &ReadyError{Err: ErrDeadline, Wait: wait, Log: p.Log}
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
		}
	}
}

func (p *Process) checkLine(first *firstLine) error {
	if l := first.line(); !strings.HasPrefix(l, p.opt.ReadyLine) {
		return &ReadyError{Err: ErrReadyLine, Line: l, Want: p.opt.ReadyLine, Log: p.Log}
	}
	return nil
}

// ReadyError is a failed wait for readiness: Err is ErrExited, ErrDeadline or ErrReadyLine.
type ReadyError struct {
	Err error
	// Exit is the child's exit error (ErrExited; nil for exit status 0).
	Exit error
	// Line is the first line the child printed and Want the ready line's prefix (ErrReadyLine).
	Line, Want string
	// Wait is the deadline that passed (ErrDeadline).
	Wait time.Duration
	// Log is the child's log.
	Log string
}

func (e *ReadyError) Error() string {
	switch e.Err {
	case ErrExited:
		return fmt.Sprintf("%v (%s); see its log %s", e.Err, exitText(e.Exit), e.Log)
	case ErrDeadline:
		return fmt.Sprintf("%v: not ready within %s; see its log %s", e.Err, e.Wait, e.Log)
	case ErrReadyLine:
		return fmt.Sprintf("%v: it said %q instead of a line starting %q; see its log %s", e.Err, e.Line, e.Want, e.Log)
	}
	return fmt.Sprintf("%v; see its log %s", e.Err, e.Log)
}

func (e *ReadyError) Unwrap() error { return e.Err }

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func nonEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// PID is the child's process id.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Exited is closed when the child has exited (and its log is closed).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the child's exit error (nil for exit status 0); valid once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.exitErr
}

// Stop sends the stop signal (a child that cannot be signalled, as on Windows, is killed), kills
// the child when it has not exited within the grace, and waits for it. It returns the child's exit
// error. Stop may be called more than once and after the child exited by itself.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		sig := p.opt.StopSignal
		if sig == nil {
			sig = syscall.SIGTERM
		}
		if err := p.Cmd.Process.Signal(sig); err != nil {
			_ = p.Cmd.Process.Kill()
		}
		grace := p.opt.Grace
		if grace <= 0 {
			grace = DefaultGrace
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
	})
	<-p.exited
	return p.exitErr
}

// firstLine passes the child's output to w and keeps its first line.
type firstLine struct {
	w    io.Writer
	mu   sync.Mutex
	buf  []byte
	got  bool
	done chan struct{}
}

func (f *firstLine) Write(b []byte) (int, error) {
	f.mu.Lock()
	if !f.got {
		rest := b
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[:i]
			f.got = true
		}
		if room := maxReadyLine - len(f.buf); room > 0 {
			f.buf = append(f.buf, rest[:min(len(rest), room)]...)
		}
		if len(f.buf) >= maxReadyLine {
			f.got = true
		}
		if f.got {
			close(f.done)
		}
	}
	f.mu.Unlock()
	return f.w.Write(b)
}

func (f *firstLine) seen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got
}

func (f *firstLine) line() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.TrimSuffix(string(f.buf), "\r")
}

// InProcess is a server running in this process (Serve).
type InProcess struct {
	shutdown func(context.Context) error
	close    func() error
	grace    time.Duration
	done     chan struct{}
	err      error
	once     sync.Once
}

// Serve runs serve (a server's accept loop, already listening) in a goroutine. Stop calls shutdown
// with a deadline of grace (0: 5 s), then closeFn when shutdown failed and closeFn is not nil, and
// waits for serve to return.
func Serve(serve func() error, shutdown func(context.Context) error, closeFn func() error, grace time.Duration) *InProcess {
	if grace <= 0 {
		grace = 5 * time.Second
	}
	s := &InProcess{shutdown: shutdown, close: closeFn, grace: grace, done: make(chan struct{})}
	go func() {
		s.err = serve()
		close(s.done)
	}()
	return s
}

// Done is closed when serve has returned.
func (s *InProcess) Done() <-chan struct{} { return s.done }

// Stop shuts the server down and waits for serve to return; it returns serve's error. It may be
// called more than once.
func (s *InProcess) Stop() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		defer cancel()
		if err := s.shutdown(ctx); err != nil && s.close != nil {
			_ = s.close()
		}
	})
	<-s.done
	return s.err
}

// FreeAddr returns a loopback address (127.0.0.1:PORT) whose port was free a moment ago, for a
// child that must be told its port on its command line. Another process may take the port before
// the child binds it; the child's ready wait then fails and names its log.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
