package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/result"
)

// Exit statuses of the client commands a trial reads (internal/cmdenv; 4 is keycast run's "not one
// request succeeded" and coordinate's lost worker).
const (
	exitFailure     = 1
	exitUsage       = 2
	exitCouldNotRun = 3
	exitNoSuccess   = 4
)

// ErrUsage is returned (wrapped) when a trial's command line is refused by the client: the search
// ends, since every later trial would be refused too.
var ErrUsage = errors.New("the client command refused its command line")

// CommandTrialer runs each trial as a subprocess: Exe (empty: this program) with Args, the client
// command line (for example keycast run --url … --duration 3), plus --VARY=value and
// --OUTFLAG=DIR/trial-sNN-tN.json.
type CommandTrialer struct {
	Exe     string
	Args    []string
	Vary    string
	OutFlag string
	Dir     string
	// Log receives the trials' standard output and error (nil: discarded).
	Log io.Writer
	// Grace is how long a trial has to end after an interrupt before it is killed (default 10 s).
	Grace time.Duration
	// Extra, when set, returns more arguments for a trial (search's --remote-write flags, with the
	// trial's phase label), put before --VARY and --OUTFLAG.
	Extra func(v float64, step, trial int) []string
}

// TrialFile names the result file of a trial in the bundle; step 0 is the warm-up trial.
func TrialFile(step, trial int) string {
	if step == 0 {
		return "trial-warm-up.json"
	}
	return fmt.Sprintf("trial-s%02d-t%d.json", step, trial)
}

// FormatValue writes a step's value as its flag takes it.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// CommandLine is the trial's argument list.
func (c *CommandTrialer) CommandLine(v float64, step, trial int) []string {
	args := slices.Clone(c.Args)
	if c.Extra != nil {
		args = append(args, c.Extra(v, step, trial)...)
	}
	return append(args, "--"+c.Vary+"="+FormatValue(v), "--"+c.OutFlag+"="+filepath.Join(c.Dir, TrialFile(step, trial)))
}

// Trial runs one trial and reads its result file.
func (c *CommandTrialer) Trial(ctx context.Context, v float64, step, trial int) (Trial, error) {
	if err := ctx.Err(); err != nil {
		return Trial{}, err
	}
	args := c.CommandLine(v, step, trial)
	cmd, err := procexec.Command(c.Exe, args...)
	if err != nil {
		return Trial{}, err
	}
	out := c.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := procexec.Start(cmd, procexec.Options{Signal: syscall.SIGTERM, NewGroup: true}); err != nil {
		return Trial{}, fmt.Errorf("starting the trial: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	grace := c.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(os.Interrupt) // the client drains and writes partial results
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
		return Trial{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	code := 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return Trial{}, fmt.Errorf("running the trial: %w", werr)
		}
		code = ee.ExitCode()
	}
	name := TrialFile(step, trial)
	t := Trial{File: name, ExitCode: code}
	switch code {
	case 0, exitFailure:
	case exitNoSuccess:
		t.RunFailed = true
	case exitUsage:
		return t, fmt.Errorf("%w (exit 2): loadproof %v", ErrUsage, args)
	case exitCouldNotRun:
		return t, fmt.Errorf("the client could not carry out its run (exit 3: target down?): loadproof %v", args)
	default:
		return t, fmt.Errorf("the client ended with exit status %d: loadproof %v", code, args)
	}
	env, err := ReadResultFile(filepath.Join(c.Dir, name))
	switch {
	case err == nil:
		t.Env = env
	case t.RunFailed && errors.Is(err, os.ErrNotExist):
		t.File = ""
	default:
		return t, fmt.Errorf("reading the trial's result: %w", err)
	}
	return t, nil
}

// ReadResultFile reads the envelope of a result file of either harness (bounded, validated).
func ReadResultFile(path string) (*result.Envelope, error) {
	b, err := boundedfile.Read(path, boundedfile.Result)
	if err != nil {
		return nil, err
	}
	return ParseResult(b)
}

// ParseResult decodes a result file's envelope and validates it.
func ParseResult(b []byte) (*result.Envelope, error) {
	var e result.Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("not a result file: %w", err)
	}
	if e.Format != result.Format {
		return nil, fmt.Errorf("result format %q is not %s", e.Format, result.Format)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}
