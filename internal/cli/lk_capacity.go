package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// newLinkKeysCapacityCmd is `linkkeys-loadtest capacity` / `loadproof linkkeys capacity`: run a
// predeclared LinkKeys capacity plan against reference servers it starts with the declared
// environment profiles (or against a running server it verifies), and write its evidence bundle.
func newLinkKeysCapacityCmd(env *Env) *cobra.Command {
	var (
		planPath, output string
		prov             provenance
		prices           prices
		settle           time.Duration
		allowHost        string
	)
	c := &cobra.Command{
		Use:   "capacity",
		Short: "Run a predeclared LinkKeys capacity plan and write its evidence bundle",
		Long: "Runs the phases of a LinkKeys capacity plan in order. Each phase names an environment profile (the\n" +
			"TCP_* and PUBLIC_READ_* values its server must run with) and a workload of the combined command's\n" +
			"streams (a held population, a handshake stream, a request stream, ddos waves). With target mode\n" +
			"\"start\" every phase gets a fresh reference server started with its profile; with \"running\" the\n" +
			"phases run against the server the plan names. Either way the server is verified, not trusted: its\n" +
			"config: line and its environment must be what the profile declares, or the phase is not run. With\n" +
			"\"remote\" the phases run against a server named by addr, fingerprint and domain, anywhere (a\n" +
			"non-loopback host needs --allow-host); its config: line is read from its metrics_url's /config, and\n" +
			"without one the evidence says the server side was not verified and is not certification-ready.\n" +
			"The bundle holds evidence.json (checks, stop point, machine record, each server's limits),\n" +
			"one results file and one server log per phase, and manifest.json with the SHA-256 of every file.\n" +
			"See docs/capacity.md and docs/linkkeys-capacity-plan.example.json.\n\n" +
			"Exit status: 0 passed, 1 a check failed or a stop condition was breached, 2 bad plan or flags or an\n" +
			"output directory that is not empty or not writable (nothing run), 3 the plan could not run to its end\n" +
			"(a phase error such as a server running other limits, SIGINT/SIGTERM, or the bundle could not be written).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if planPath == "" {
				return usageError("capacity: --plan is required: the LinkKeys capacity plan file (see docs/linkkeys-capacity-plan.example.json)")
			}
			plan, err := capacity.ReadLinkKeysPlan(planPath)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			exe, err := os.Executable()
			if err != nil {
				return &ExitError{Code: ExitCouldNotRun, Err: err}
			}
			signKey, err := prov.key()
			if err != nil {
				return err
			}
			prices.fromPlan(plan.CostPerHour, plan.ServerCostPerHour)
			if err := prices.check(); err != nil {
				return err
			}
			ev, err := capacity.ExecuteLinkKeys(cmd.Context(), plan, capacity.LinkKeysOptions{
				OutputDir:  output,
				SignKey:    signKey,
				Validate:   capacity.LinkKeysValidateOptions{ServerConfigLine: lkExpectedConfigLine, Rules: hostrule.Rules{AllowHost: allowHost}},
				Server:     capacity.ServerLauncher{Executable: exe, Args: lkServerArgs(cmd)},
				Clients:    linkkeysload.Launcher{Executable: exe, Args: lkWorkerArgs(cmd)},
				SettleWait: settle,
				PricePhase: prices.linkKeysPhase(),
				Progress:   env.Stderr,
				Logger:     env.Logger,
			})
			if ev != nil {
				printLinkKeysCapacitySummary(env.Stdout, ev, evidencePath(output))
				printPhaseCosts(env.Stdout, linkKeysPhaseCosts(ev))
			}
			return capacityExit(planPath, err)
		},
	}
	attachRemoteWrite(c, env, dashboardRun{harness: "linkkeys", command: "capacity"})
	f := c.Flags()
	f.StringVarP(&planPath, "plan", "p", "", "LinkKeys capacity plan with predeclared phases, profiles and limits (required)")
	f.StringVarP(&output, "output", "o", capacity.DefaultOutputDir, "directory for the evidence bundle (must be absent or empty)")
	prov.bindSignKey(f, "the bundle's manifest.json")
	prices.bind(f)
	f.StringVar(&allowHost, "allow-host", "", "authorize exactly this non-loopback `host` of a remote target (target mode remote: its addr and metrics_url)")
	f.DurationVar(&settle, "settle-wait", 15*time.Second, "how long to wait for a server reading with no handshake in progress before and after each phase")
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		o := termstatus.Options{Label: "capacity", LatencyKinds: []string{linkkeysresult.KindRequest, linkkeysresult.KindConnectHandshake}}
		if plan, err := capacity.ReadLinkKeysPlan(planPath); err == nil {
			for _, ph := range plan.Phases {
				o.Parts = append(o.Parts, termstatus.Part{Label: "capacity " + ph.Name, Planned: time.Duration(ph.DurationSeconds) * time.Second})
			}
		}
		return o
	})
	return c
}

// lkExpectedConfigLine is the config: line a reference server prints for a profile's variables;
// its error names every variable the server refuses.
func lkExpectedConfigLine(vars map[string]string) (string, error) {
	cfg, err := linkkeysserver.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return "", err
	}
	return linkkeysserver.ConfigLine(cfg), nil
}

// printLinkKeysCapacitySummary prints one line per phase, the evidence path and, when
// certification is not ready, why.
func printLinkKeysCapacitySummary(w io.Writer, ev *capacity.LinkKeysEvidence, path string) {
	fmt.Fprintf(w, "\n%-3s %-28s %-10s %-12s %s\n", "#", "phase", "kind", "result", "checks")
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
		passed := 0
		for _, c := range ph.Checks {
			if c.Outcome == capacity.Passed {
				passed++
			}
		}
		fmt.Fprintf(w, "%-3d %-28s %-10s %-12s %d of %d passed\n", i+1, ph.Name, ph.Kind, result, passed, len(ph.Checks))
		for _, c := range ph.Checks {
			fmt.Fprintf(w, "      %-8s %-36s %-8s observed %s, limit %s\n", c.Outcome, c.Metric, c.Comparison, numText(c.Observed), numText(c.Limit))
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

func numText(n capacity.Number) string {
	f := float64(n)
	if f != f {
		return "unknown"
	}
	return fmt.Sprintf("%.6g", f)
}
