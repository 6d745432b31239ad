package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/dashboard"
	"github.com/loadproof/loadproof/internal/durflag"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/localhttp"
	"github.com/loadproof/loadproof/internal/report"
)

// dashboardRun says what a command's dashboard shows.
type dashboardRun struct {
	harness, command string
	// targetFlag names the flag holding the target ("url"), read when the command starts; empty
	// when the target is not a flag (capacity's is in the plan).
	targetFlag string
	// outputs returns the files the finished run wrote (the final report is drawn from them).
	outputs func(cmd *cobra.Command) []string
	// plan, when set, gives the planned length and target rate where no flag holds them (a
	// capacity plan's phases); nil: runPlan reads the flags.
	plan func(cmd *cobra.Command) (time.Duration, float64)
}

// attachDashboard gives a command --dashboard ADDR: before the command runs it starts the live
// dashboard and attaches it to every engine run under the command's context
// (engine.WithIntervalObserver); when the command returns, whatever its outcome, it draws the final
// report from the files the run wrote, sends it to the page and closes the server. Call it after
// the command's RunE is set.
func attachDashboard(c *cobra.Command, env *Env, run dashboardRun) {
	c.Flags().String("dashboard", "", "serve a live dashboard of the run on this address (HOST:PORT; :PORT or 127.0.0.1:PORT binds loopback); read-only, it shows the final report at the end")
	c.Flags().Var(durflag.NewDuration(new(time.Duration), 0), "dashboard-linger", "keep serving the dashboard's final report this long after the run ends (as 300 or 5m; Ctrl-C ends it sooner)")
	c.Flags().String("dashboard-token", "", "require this token on every dashboard request (the URL printed at start carries it); env "+dashboardTokenEnv+" keeps it out of the process list; give one before binding a non-loopback address")
	inner := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		addr, _ := cmd.Flags().GetString("dashboard")
		token, err := flagOrEnvToken(cmd, env, "dashboard-token", dashboardTokenEnv)
		if err != nil {
			return err
		}
		if addr == "" {
			if token != "" && cmd.Flags().Changed("dashboard-token") {
				return usageError("--dashboard-token needs --dashboard ADDR")
			}
			return inner(cmd, args)
		}
		var target string
		if run.targetFlag != "" {
			target, _ = cmd.Flags().GetString(run.targetFlag)
		}
		if f := cmd.Flags().Lookup("target"); f != nil && f.Changed {
			target = f.Value.String() // a LinkKeys client's --target names the server better than its info file
		}
		planned, rate := runPlan(cmd)
		if run.plan != nil {
			planned, rate = run.plan(cmd)
		}
		d, err := dashboard.Start(dashboard.Options{Addr: addr, Title: fmt.Sprintf("loadproof %s %s (live)", run.harness, run.command),
			Harness: run.harness, Command: run.command, Target: target, Token: token, Logger: env.Logger, Planned: planned, TargetRate: rate})
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--dashboard: %w", err)}
		}
		// The token is for the person at the terminal: stderr, once, never a result file.
		fmt.Fprintf(env.Stderr, "dashboard: %s\n", d.TokenURL())
		cmd.SetContext(engine.WithIntervalObserver(cmd.Context(), d.Interval))
		runErr := inner(cmd, args)
		linger, _ := durflag.Parse(cmd.Flags().Lookup("dashboard-linger").Value.String())
		finishDashboard(cmd.Context(), env, d, run.outputs(cmd), linger)
		return runErr
	}
	attachRemoteWrite(c, env, run)
}

// dashboardTokenEnv and serveTokenEnv carry the tokens outside argv (which `ps` shows).
const (
	dashboardTokenEnv = "LOADPROOF_DASHBOARD_TOKEN"
	serveTokenEnv     = "LOADPROOF_SERVE_TOKEN"
)

// flagOrEnvToken reads a token flag, or the environment variable when the flag is not given, and
// checks it (a usage error when localhttp cannot use it).
func flagOrEnvToken(cmd *cobra.Command, env *Env, flag, envName string) (string, error) {
	t, _ := cmd.Flags().GetString(flag)
	src := "--" + flag
	if !cmd.Flags().Changed(flag) && env.Getenv != nil {
		t, src = env.Getenv(envName), envName
	}
	if err := localhttp.CheckToken(t); err != nil {
		return "", usageError("%s: %v", src, err)
	}
	return t, nil
}

// finishDashboard sends the final report drawn from the run's files (when they exist) and closes
// the dashboard, giving open pages a few seconds to receive it.
// With linger it keeps serving that long first (until ctx ends).
func finishDashboard(ctx context.Context, env *Env, d *dashboard.Dashboard, files []string, linger time.Duration) {
	opened, err := openFiles(files)
	if err == nil {
		var m *report.Model
		if m, err = report.BuildModelFiles(opened, report.HTMLOptions{}); err == nil {
			err = d.Finish(m)
		}
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "dashboard: no final report: %v\n", err)
	} else {
		fmt.Fprintf(env.Stderr, "dashboard: final report sent to the page (save it from there, or `loadproof report --format html`)\n")
	}
	if linger > 0 {
		fmt.Fprintf(env.Stderr, "dashboard: still serving %s for %s (--dashboard-linger; Ctrl-C ends it)\n", d.URL(), linger)
		d.Linger(ctx, linger)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.Close(cctx)
}

// runPlan reads a command's planned length (--duration or --duration-secs, plus --hold-secs) and
// target rate (--rate) for the dashboard; 0 where the command has none or the value is not a
// plain figure.
func runPlan(cmd *cobra.Command) (time.Duration, float64) {
	flag := func(name string) time.Duration {
		if f := cmd.Flags().Lookup(name); f != nil {
			if d, err := durflag.Parse(f.Value.String()); err == nil && d > 0 {
				return d
			}
		}
		return 0
	}
	// --duration-secs is --duration's alias where both exist: count it once.
	planned := cmp.Or(flag("duration"), flag("duration-secs")) + flag("hold-secs")
	var rate float64
	if f := cmd.Flags().Lookup("rate"); f != nil {
		rate, _ = strconv.ParseFloat(f.Value.String(), 64)
	}
	return planned, rate
}

// flagFiles returns the value of a file flag, when the file exists.
func flagFiles(name string) func(cmd *cobra.Command) []string {
	return func(cmd *cobra.Command) []string {
		v, _ := cmd.Flags().GetString(name)
		if _, err := os.Stat(v); v == "" || err != nil {
			return nil
		}
		return []string{v}
	}
}
