package cli

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

func newDemoCmd(env *Env) *cobra.Command {
	opt := demoOptions{Users: 10, RunSeconds: 5, PhaseSecs: 2}
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the LinkKeys smoke run and a short Keycast setup, run and capacity plan on the embedded servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.Output == "" {
				opt.Output = filepath.Join("loadproof-demo", time.Now().Format("20060102-150405"))
			}
			if opt.Users < 1 || opt.RunSeconds < 1 || opt.PhaseSecs < 1 {
				return usageError("demo: --users, --run-secs and --phase-secs must be at least 1")
			}
			return runDemo(cmd.Context(), env, opt)
		},
	}
	f := c.Flags()
	f.StringVarP(&opt.Output, "output", "o", opt.Output, "directory for the demo's files, absent or empty (default loadproof-demo/<date-time>)")
	f.IntVar(&opt.Users, "users", opt.Users, "Keycast users to register")
	f.IntVar(&opt.RunSeconds, "run-secs", opt.RunSeconds, "length of the Keycast run")
	f.IntVar(&opt.PhaseSecs, "phase-secs", opt.PhaseSecs, "length of each capacity phase")
	f.BoolVar(&opt.SkipLinkKey, "skip-linkkeys", false, "skip the LinkKeys smoke run")
	f.BoolVar(&opt.Verbose, "verbose", false, "log the servers' and engines' records to stderr")
	return c
}
