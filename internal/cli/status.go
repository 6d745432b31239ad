package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// statusKey carries a command's status line in its context, for the LinkKeys clients' attempt
// totals and hold countdown (lkRun reads it).
type statusKey struct{}

// statusFrom returns the status line of ctx's command, or nil when it has none.
func statusFrom(ctx context.Context) *termstatus.Line {
	l, _ := ctx.Value(statusKey{}).(*termstatus.Line)
	return l
}

// attachStatus gives a long-running command one in-place status line on stderr while it runs,
// when stderr is a terminal (termstatus.Enabled): the line is fed every engine interval under the
// command's context and, for a LinkKeys client, its attempt totals and hold countdown. While the
// line is up, the command's stdout (when it is a terminal too), stderr and logger clear it before
// they write, so nothing is written over. When stderr is not a terminal nothing here runs: the
// output is byte for byte what it is without the line. opts says what the line shows, from the
// command's flags. Call it last, after the command's RunE and its other wrappers are set.
func attachStatus(c *cobra.Command, env *Env, opts func(cmd *cobra.Command) termstatus.Options) {
	inner := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !termstatus.Enabled(env.Stderr, env.Getenv) || statusFrom(cmd.Context()) != nil {
			return inner(cmd, args)
		}
		line := termstatus.New(env.Stderr, opts(cmd))
		saved := *env
		defer func() {
			line.Close()
			*env = saved
		}()
		env.Stderr = line.Writer(saved.Stderr)
		if termstatus.IsTerminal(saved.Stdout) {
			env.Stdout = line.Writer(saved.Stdout)
		}
		if saved.Logger != nil {
			env.Logger = slog.New(line.Handler(saved.Logger.Handler()))
		}
		ctx := context.WithValue(cmd.Context(), statusKey{}, line)
		cmd.SetContext(engine.WithIntervalObserver(ctx, line.Interval))
		return inner(cmd, args)
	}
}

// fixedStatus is the options of a command whose line needs no flag.
func fixedStatus(o termstatus.Options) func(*cobra.Command) termstatus.Options {
	return func(*cobra.Command) termstatus.Options { return o }
}
