// Package cmdenv is what every command of every binary shares about the outside world: the
// environment a command runs against (stdout, stderr, variables, logger; tests substitute it) and
// how it chooses its exit status (ExitError and the codes, following Go's own tools: 2 for usage
// errors). The command tree (internal/cli) and the lean server's command (internal/linkkeysmain)
// both use it, so a command behaves the same in either binary. It imports no other internal package.
package cmdenv

import (
	"io"
	"log/slog"
	"os"
)

// Exit codes.
const (
	ExitOK          = 0
	ExitFailure     = 1 // the command ran and reports failure (checks failed, failures counted)
	ExitUsage       = 2 // bad flags, arguments or configuration
	ExitCouldNotRun = 3 // the command could not carry out its run (target down, phase error)
)

// ExitError carries an exit code with an error. Commands return it to choose their exit status.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Env is what commands need from the outside world; tests substitute it.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Logger writes to Stderr.
	Logger *slog.Logger
}

// OS returns the process's real environment, with an info-level text logger on stderr.
func OS() *Env {
	return &Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}
