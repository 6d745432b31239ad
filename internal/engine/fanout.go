package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/procexec"
)

// FanOut describes a run split across worker processes of the same binary. Each worker is started as
// Executable with Args(seg, resultPath) and must write its result (JSON) to resultPath before it exits
// 0. The parent merges the results; the split itself is deterministic (Segment), so the merged totals
// are exact.
type FanOut struct {
	// Executable is the program to run; empty means this process's own executable.
	Executable string
	// Workers is the number of processes (at least 1).
	Workers int
	// Args builds the command line of one worker.
	Args func(seg Segment, resultPath string) []string
	// Env, when non-nil, replaces the inherited environment.
	Env []string
	// OnLine, when set, receives every stdout line of every worker (with its segment). It is called
	// from one goroutine per worker.
	OnLine func(seg Segment, line string)
	// Stderr receives the workers' stderr; nil means os.Stderr.
	Stderr io.Writer
	// Grace is how long workers get to write their results after ctx ends (SIGINT) before SIGKILL;
	// 0 means 10 s.
	Grace time.Duration
	// OnExit, when set, is called once per worker when it has ended (or failed to start), with its
	// segment, before Run returns: a run whose workers do different work learns when one part of
	// it is over (a combined run's held population waits for the request stream's processes).
	OnExit func(seg Segment)
}

// WorkerError reports a worker that failed.
type WorkerError struct {
	Segment Segment
	Err     error
}

func (e *WorkerError) Error() string {
	return fmt.Sprintf("engine: worker %s failed: %v", e.Segment, e.Err)
}

func (e *WorkerError) Unwrap() error { return e.Err }

// Run starts every worker, waits for all of them, and returns the result files' contents in segment
// order. Results of workers that succeeded are returned even when others failed; the error then joins
// one WorkerError per failed worker. When ctx ends, workers get SIGINT (so they write partial
// results), then SIGKILL after Grace.
func (f FanOut) Run(ctx context.Context) ([][]byte, error) {
	n := max(f.Workers, 1)
	dir, err := os.MkdirTemp("", "loadproof-workers-*")
	if err != nil {
		return nil, fmt.Errorf("engine: making a directory for worker results: %w", err)
	}
	defer os.RemoveAll(dir)
	stderr := f.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	grace := f.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}

	results := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	exited := func(seg Segment) {
		if f.OnExit != nil {
			f.OnExit(seg)
		}
	}
	for i, seg := range Split(n) {
		path := filepath.Join(dir, fmt.Sprintf("worker-%03d.json", i))
		cmd, err := procexec.Command(f.Executable, f.Args(seg, path)...)
		if err != nil {
			errs[i] = err
			exited(seg)
			continue
		}
		if f.Env != nil {
			cmd.Env = f.Env
		}
		cmd.Stderr = stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			errs[i] = err
			exited(seg)
			continue
		}
		// A worker must not outlive the run: killed with it, it leaves no load behind.
		if err := procexec.Start(cmd, procexec.Options{Signal: syscall.SIGKILL}); err != nil {
			errs[i] = fmt.Errorf("starting %s: %w", cmd.Path, err)
			exited(seg)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() {
				select {
				case <-ctx.Done():
					_ = cmd.Process.Signal(os.Interrupt)
					select {
					case <-done:
					case <-time.After(grace):
						_ = cmd.Process.Kill()
					}
				case <-done:
				}
			}()
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if f.OnLine != nil {
					f.OnLine(seg, sc.Text())
				}
			}
			_, _ = io.Copy(io.Discard, stdout)
			werr := cmd.Wait()
			close(done)
			defer exited(seg)
			b, rerr := boundedfile.Read(path, boundedfile.Result)
			switch {
			case rerr == nil && len(b) > 0:
				results[i] = b
				if werr != nil {
					errs[i] = werr
				}
			case werr != nil:
				errs[i] = werr
			default:
				errs[i] = fmt.Errorf("exited without writing its result file: %v", rerr)
			}
		}()
	}
	wg.Wait()
	var all []error
	for i, e := range errs {
		if e != nil {
			all = append(all, &WorkerError{Segment: Segment{Index: i, Count: n}, Err: e})
		}
	}
	return results, errors.Join(all...)
}

// WriteResult writes a worker's result atomically, so a parent never reads half a file.
func WriteResult(path string, b []byte) error {
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("engine: worker result: %w", err)
	}
	return nil
}
