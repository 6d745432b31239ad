package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// capacityRunner replaces the load engine in tests; nil runs keycastload.
var capacityRunner capacity.Runner

// newKeycastCapacityCmd is `keycast-loadtest capacity` / `loadproof keycast capacity`: run a
// predeclared capacity-readiness profile and write its evidence bundle.
func newKeycastCapacityCmd(env *Env, o treeOpts) *cobra.Command {
	var (
		planPath, output, allowHost string
		prov                        provenance
		prices                      prices
		refuseHosts                 []string
		stopWindow                  time.Duration
		tlsOpts                     keycastload.TLSOptions
	)
	prices.fleet = o.fleet // under coordinate: every machine of the run is priced (docs/cost.md)
	c := &cobra.Command{
		Use:   "capacity",
		Short: "Run a predeclared capacity-readiness profile",
		Long: "Runs the six phases of a capacity plan (ramp, spike, soak, recovery, rollout, scale-down) against\n" +
			"the plan's target and writes an evidence bundle: evidence.json, one results file per phase and\n" +
			"manifest.json with the SHA-256 of every file. The plan is checked completely before anything\n" +
			"runs. Local targets (localhost, 127.0.0.1, [::1], *.localhost) need no flag; any other host needs\n" +
			"--allow-host with exactly that host; production Keycast hosts are always refused.\n" +
			"See docs/capacity.md.\n\n" +
			"Exit status: 0 passed, 1 one or more checks failed or a stop condition was breached, 2 bad plan\n" +
			"or flags, or an output directory that is not empty or not writable (nothing run), 3 the profile\n" +
			"could not run to its end (a phase error, SIGINT/SIGTERM, or the bundle could not be written).\n" +
			"SIGINT/SIGTERM ends the current phase and writes partial evidence; a second signal exits at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if planPath == "" {
				return usageError("capacity: --plan is required: the capacity plan file (see docs/capacity-plan.example.json)")
			}
			if stopWindow < time.Second {
				return usageError("capacity: --stop-window %v must be at least 1s", stopWindow)
			}
			for _, h := range append([]string{allowHost}, refuseHosts...) {
				if h == "" {
					continue
				}
				if _, err := hostrule.CanonicalHostFlag(h); err != nil {
					return usageError("capacity: host %q: %v; give a bare host name or IP address", h, err)
				}
			}
			plan, err := capacity.ReadPlan(planPath)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if err := checkTLSFlags("capacity", plan.TargetURL, tlsOpts); err != nil {
				return err
			}
			runner := capacityRunner
			if sp := o.runner.Spread; sp != nil {
				runner = capacity.KeycastRunnerWith(sp.KeycastRun, env.Stderr, env.Logger, 0, tlsOpts)
			}
			signKey, err := prov.key()
			if err != nil {
				return err
			}
			prices.fromPlan(plan.CostPerHour, plan.ServerCostPerHour)
			if err := prices.check(); err != nil {
				return err
			}
			if prices.given() {
				if runner == nil {
					runner = capacity.KeycastloadRunner(env.Stderr, env.Logger, 0, tlsOpts)
				}
				runner = prices.keycastRunner(runner)
			}
			ev, err := capacity.Execute(cmd.Context(), plan, capacity.Options{
				OutputDir:  output,
				SignKey:    signKey,
				Validate:   capacity.ValidateOptions{AllowHost: allowHost, RefuseHosts: refuseHosts},
				Runner:     runner,
				TLS:        tlsOpts,
				StopWindow: stopWindow,
				Progress:   env.Stderr,
				Logger:     env.Logger,
			})
			if ev != nil {
				printCapacitySummary(env.Stdout, ev, evidencePath(output))
				printPhaseCosts(env.Stdout, keycastPhaseCosts(ev))
			}
			return capacityExit(planPath, err)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "keycast", command: "capacity", outputs: flagFiles("output"), plan: capacityPlanLength})
	f.StringVarP(&planPath, "plan", "p", "", "Capacity plan with predeclared phases and limits (required)")
	f.StringVarP(&output, "output", "o", capacity.DefaultOutputDir, "directory for the evidence bundle (must be absent or empty)")
	prov.bindSignKey(f, "the bundle's manifest.json")
	prices.bind(f)
	f.StringVar(&allowHost, "allow-host", "", "Explicitly authorize a non-local target host from the plan")
	f.StringArrayVar(&refuseHosts, "refuse-host", nil, "refuse this target host in addition to the production Keycast hosts (repeatable)")
	f.DurationVar(&stopWindow, "stop-window", capacity.DefaultStopWindow, "sliding window over which the plan's stop conditions are judged live")
	addTLSFlags(f, &tlsOpts)
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		o := termstatus.Options{Label: "capacity", LatencyKinds: []string{"latency"}}
		if plan, err := capacity.ReadPlan(planPath); err == nil {
			for _, ph := range plan.Phases {
				o.Parts = append(o.Parts, termstatus.Part{Label: "capacity " + ph.Name, Planned: time.Duration(ph.DurationSeconds) * time.Second})
			}
		}
		return o
	})
	return c
}

// evidencePath spells the evidence path as upstream prints it: the --output value as given, joined
// with evidence.json.
func evidencePath(output string) string {
	if output == "" {
		output = capacity.DefaultOutputDir
	}
	if strings.HasSuffix(output, "/") {
		return output + capacity.EvidenceFile
	}
	return output + "/" + capacity.EvidenceFile
}

// capacityExit maps Execute's error to the exit status documented in the command's help.
func capacityExit(planPath string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, capacity.ErrInvalidPlan):
		problems := capacity.Problems(err)
		var b strings.Builder
		fmt.Fprintf(&b, "capacity: plan %s is invalid (%d problem", planPath, len(problems))
		if len(problems) != 1 {
			b.WriteString("s")
		}
		b.WriteString("):")
		for _, p := range problems {
			b.WriteString("\n  - ")
			if p.Path != "" {
				b.WriteString(p.Path + ": ")
			}
			b.WriteString(p.Message)
		}
		return &ExitError{Code: ExitUsage, Err: errors.New(b.String())}
	case errors.Is(err, capacity.ErrOutputNotEmpty), errors.Is(err, capacity.ErrOutputNotWritable):
		return &ExitError{Code: ExitUsage, Err: err}
	case errors.Is(err, capacity.ErrIncomplete):
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	case errors.Is(err, capacity.ErrLimitsExceeded):
		return &ExitError{Code: ExitFailure, Err: err}
	default:
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
}

// printCapacitySummary prints one line per phase, the evidence path (upstream's line) and, when
// certification is not ready, why.
func printCapacitySummary(w io.Writer, ev *capacity.Evidence, path string) {
	fmt.Fprintf(w, "\n%-3s %-24s %-10s %-12s %9s %9s %9s %9s\n", "#", "phase", "kind", "result", "requests", "p95", "unint %", "shed %")
	for i, ph := range ev.Phases {
		result := "passed"
		switch {
		case ph.Interrupted:
			result = "interrupted"
		case ph.Error != nil:
			result = "error"
		case ph.StopBreached:
			result = "STOPPED"
		case !ph.Passed:
			result = "failed"
		}
		if r := ph.Results; r != nil {
			s := r.Summary
			fmt.Fprintf(w, "%-3d %-24s %-10s %-12s %9d %9s %9.2f %9.2f\n", i+1, ph.Name, ph.Kind, result,
				s.TotalRequests, report.MsText(s.LatencyP95Ms), s.UnintentionalErrorRate*100, s.IntentionalRejectionRate*100)
		} else {
			fmt.Fprintf(w, "%-3d %-24s %-10s %-12s %9s %9s %9s %9s\n", i+1, ph.Name, ph.Kind, result, "-", "-", "-", "-")
		}
	}
	fmt.Fprintf(w, "passed: %v  certification_ready: %v\n", ev.Passed, ev.CertificationReady)
	fmt.Fprintf(w, "Capacity evidence saved to %s\n", path)
	if !ev.CertificationReady && len(ev.CertificationBlockers) > 0 {
		fmt.Fprintln(w, "Certification is not ready:")
		for _, b := range ev.CertificationBlockers {
			fmt.Fprintf(w, "  - %s\n", b)
		}
	}
}

// capacityPlanLength is a Keycast capacity run's planned length for its dashboard: the sum of its
// plan's phase durations (0 when the plan cannot be read; the run then says why). Its phases'
// rates differ, so there is no one target rate.
func capacityPlanLength(cmd *cobra.Command) (time.Duration, float64) {
	path, _ := cmd.Flags().GetString("plan")
	p, err := capacity.ReadPlan(path)
	if err != nil {
		return 0, 0
	}
	var secs uint64
	for _, ph := range p.Phases {
		secs += ph.DurationSeconds
	}
	return time.Duration(secs) * time.Second, 0
}
