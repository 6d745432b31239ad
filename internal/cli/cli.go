// Package cli holds loadproof's command tree: the umbrella `loadproof` command and the two
// seed-compatible trees (`linkkeys-loadtest`, `keycast-loadtest`), their flags, environment wiring and
// exit codes. The binaries under cmd/ are one-line mains over Main. Nothing imports this package.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/cmdenv"
	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/report"
)

// Exit codes, following Go's own tools: 2 for usage errors (internal/cmdenv, shared with the lean
// server binary).
const (
	ExitOK          = cmdenv.ExitOK
	ExitFailure     = cmdenv.ExitFailure
	ExitUsage       = cmdenv.ExitUsage
	ExitCouldNotRun = cmdenv.ExitCouldNotRun
	ExitNoSuccess   = 4 // keycast run: it ran to its end, but not one request succeeded
)

// ExitError carries an exit code with an error. Commands return it to choose their exit status.
type ExitError = cmdenv.ExitError

// usageError marks an error as a usage error (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Env is what commands need from the outside world; tests substitute it.
type Env = cmdenv.Env

// OSEnv returns the process's real environment.
func OSEnv() *Env { return cmdenv.OS() }

// Tree names the command tree a binary exposes.
type Tree int

const (
	// Loadproof is the umbrella tree: demo, linkkeys …, keycast ….
	Loadproof Tree = iota
	// LinkKeys is the seed-compatible linkkeys-loadtest tree.
	LinkKeys
	// Keycast is the seed-compatible keycast-loadtest tree.
	Keycast
)

// Main runs the command tree with os.Args and returns the exit code. The first SIGINT or SIGTERM
// cancels the command's context (commands drain and write partial results); a second exits at once.
// A process this binary started as its own child (a worker, a server) watches for its parent to end
// where the system has no parent-death signal (procexec).
func Main(tree Tree) int {
	env := OSEnv()
	ctx, stop := procexec.SignalContext()
	defer stop()
	procexec.WatchParent() // after SignalContext, so a SIGTERM from the watcher drains like any other
	return Run(ctx, tree, os.Args[1:], env)
}

// Run executes one command line against env and returns the exit code.
func Run(ctx context.Context, tree Tree, args []string, env *Env) int {
	return runRoot(ctx, NewRoot(tree, env), args, env)
}

// runRoot executes one command line on a built tree and returns the exit code.
func runRoot(ctx context.Context, root *cobra.Command, args []string, env *Env) int {
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "error: %s\n", report.SanitizeText(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if isFlagError(err) {
		return ExitUsage
	}
	return ExitFailure
}

type flagError struct{ error }

func isFlagError(err error) bool {
	var fe flagError
	return errors.As(err, &fe)
}

// treeOpts are what a command tree is built with beyond its environment, handed to the client
// commands' constructors. The zero value is a plain command line's tree: every client runs here,
// priced by its own flags. coordinate and worker build a tree with theirs.
type treeOpts struct {
	// runner is where the client commands send their load (coord.Runner): a worker's task share,
	// or the coordinator's workers.
	runner coord.Runner
	// fleet, under coordinate, holds the prices of the run's machines (docs/cost.md).
	fleet *cost.Fleet
}

// NewRoot builds the command tree for a binary.
func NewRoot(tree Tree, env *Env) *cobra.Command {
	return newRoot(tree, env, treeOpts{})
}

// newRoot builds the command tree for a binary with o's runner and prices.
func newRoot(tree Tree, env *Env, o treeOpts) *cobra.Command {
	var root *cobra.Command
	switch tree {
	case LinkKeys:
		root = newLinkKeysCmd(env, "linkkeys-loadtest", o)
	case Keycast:
		root = newKeycastCmd(env, "keycast-loadtest", o)
		// Upstream's clap command has `-V`/`--version` and prints "<name> <version>".
		root.Flags().BoolP("version", "V", false, "Print version")
		root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	default:
		root = &cobra.Command{
			Use:   "loadproof",
			Short: "Load-test harnesses that turn capacity claims into evidence",
			Long: "loadproof measures how many connections and requests a key server takes, and records the\n" +
				"machine and settings the figures were measured on. Subcommands: linkkeys (TCP/TLS/CBOR\n" +
				"harness and reference server), keycast (HTTP RPC tool and reference server), report (result\n" +
				"files of either, merged exactly), verify and keygen (checked and signed evidence), demo.",
		}
		root.AddCommand(newLinkKeysCmd(env, "linkkeys", o), newKeycastCmd(env, "keycast", o), newDemoCmd(env), newReportCmd(env), newMachineCmd(env),
			newVerifyCmd(env), newKeygenCmd(env), newCompareCmd(env))
		root.AddCommand(newCoordinateCmd(env), newWorkerCmd(env), newKubeCmd(env))
		root.AddCommand(newSearchCmd(env))
	}
	applyExamples(root)
	applyGroupedHelp(root)
	root.Version = machine.LoadproofVersion()
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return flagError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	return root
}

func newLinkKeysCmd(env *Env, use string, o treeOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: "LinkKeys TCP/TLS load-test harness and reference server",
	}
	c.PersistentFlags().BoolP("verbose", "v", false, "print the DEBUG sample of a non-ok answer (request-bench, combined)")
	c.AddCommand(
		newLinkKeysServerCmd(env),
		newLinkKeysConnectionsCmd(env, o),
		newLinkKeysHandshakeBenchCmd(env, o),
		newLinkKeysRequestBenchCmd(env, o),
		newLinkKeysDDoSCmd(env, o),
		newLinkKeysCombinedCmd(env, o),
		newLinkKeysCapacityCmd(env),
		newLinkKeysSmokeCmd(env),
		newLinkKeysProfileCmd(env),
	)
	for _, w := range linkKeysHiddenCmds(env, o) {
		w.Hidden = true
		c.AddCommand(w)
	}
	return c
}

func newKeycastCmd(env *Env, use string, o treeOpts) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: "Load testing tool for Keycast HTTP RPC endpoint",
	}
	c.PersistentFlags().BoolP("verbose", "v", false, "debug logging")
	c.AddCommand(
		newKeycastServerCmd(env),
		newKeycastSetupCmd(env),
		newKeycastRunCmd(env, o),
		newKeycastReportCmd(env),
		newKeycastCapacityCmd(env, o),
		newKeycastProfileCmd(env),
	)
	return c
}
