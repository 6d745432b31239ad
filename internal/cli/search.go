package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// searchClients are the client commands a search drives, with the flag their result file goes to.
var searchClients = map[string]string{
	"keycast run":              "output",
	"linkkeys connections":     "json",
	"linkkeys handshake-bench": "json",
	"linkkeys request-bench":   "json",
}

func newSearchCmd(env *Env) *cobra.Command {
	var (
		cfg                            search.Config
		sloText, abortText, resolution string
		output, bundle, htmlPage       string
		prov                           provenance
		prices                         prices
	)
	c := &cobra.Command{
		Use:   "search --vary FLAG --from N --to N --slo TERMS [flags] -- <client command>",
		Short: "Find the knee: the highest load at which an SLO holds, with its bracket and confidence",
		Long: "search runs a client command (keycast run, linkkeys connections, handshake-bench, request-bench,\n" +
			"or any of them under coordinate) again and again with its --vary flag (rate, count or concurrency)\n" +
			"set to each step's value: it grows the value geometrically from --from until a step breaks the SLO\n" +
			"(or --to passes), then bisects the bracket to --resolution. Each step runs --trials times and passes\n" +
			"only when every trial holds the SLO. The result: the knee (highest passing value), the bracket,\n" +
			"every trial, a bootstrap confidence for the knee and what broke first. Every trial's result file\n" +
			"and search.json form one evidence bundle (manifest, --sign-key) that loadproof verify checks.\n\n" +
			"SLO terms, comma-separated: pNN[:KIND]<DURATION (p99<20ms, p99.9:uncorrected<50ms), errors<N%,\n" +
			"failed<N% (refusals counted too), shed<N%, throughput>N% (of the offered rate) or throughput>N/s.\n" +
			"--abort-on takes the same terms and ends the search at once when any one of them is met by a trial.\n" +
			"See docs/search.md.\n\n" +
			"Exit status: 0 a knee was found (or the ceiling passed); 1 no value passed, or the search was\n" +
			"aborted; 2 bad flags or a client command line the client refused; 3 a trial could not run.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return usageError("search: put the client command after --, e.g. loadproof search --vary rate … -- keycast run …")
			}
			slo, err := search.ParseSLO(sloText)
			if err != nil {
				return usageError("search: --slo: %v", err)
			}
			cfg.SLO = slo
			if abortText != "" {
				if cfg.AbortOn, err = search.ParseSLO(abortText); err != nil {
					return usageError("search: --abort-on: %v", err)
				}
			}
			if cfg.Resolution, err = search.ParseResolution(resolution); err != nil {
				return usageError("search: --resolution: %v", err)
			}
			outFlag, err := checkSearchCommand(env, args, cfg.Vary)
			if err != nil {
				return err
			}
			rwArgs, err := remoteWriteArgs(cmd)
			if err != nil {
				return err
			}
			cfg.Integer = cfg.Vary != "rate"
			if !cmd.Flags().Changed("seed") {
				cfg.Seed = rand.Uint64()
			}
			if err := cfg.Validate(); err != nil {
				return usageError("search: %v", err)
			}
			key, err := prov.key()
			if err != nil {
				return err
			}
			if bundle == "" {
				bundle = strings.TrimSuffix(output, ".json") + "-bundle"
			}
			if err := emptyDir(bundle); err != nil {
				return usageError("search: --bundle: %v", err)
			}
			logf, err := os.Create(filepath.Join(bundle, search.LogFile))
			if err != nil {
				return fmt.Errorf("search: %w", err)
			}
			defer logf.Close()
			if err := prices.check(); err != nil {
				return err
			}
			tr := &search.CommandTrialer{Args: prices.trialArgs(args), Vary: cfg.Vary, OutFlag: outFlag, Dir: bundle, Log: logf}
			if rwArgs != nil {
				// Every trial streams to the endpoint: its series carry the search's ID and the
				// trial as their phase, so a dashboard follows the whole search.
				id := result.NewRunID()
				tr.Extra = func(v float64, step, trial int) []string {
					return append(slices.Clone(rwArgs), "--remote-write-label=search_id="+id,
						searchPhase(step, trial, cfg.Vary, v))
				}
				fmt.Fprintf(env.Stderr, "search: every trial streams to --remote-write with search_id=%q\n", id)
			}
			fmt.Fprintf(env.Stderr, "search: trials write to %s (their output: %s)\n", bundle, filepath.Join(bundle, search.LogFile))
			res, runErr := search.Run(cmd.Context(), cfg, tr)
			if res == nil {
				return usageError("search: %v", runErr)
			}
			res.Command = args
			if err := logf.Close(); err != nil {
				return fmt.Errorf("search: %w", err)
			}
			if err := search.WriteBundle(bundle, res, key); err != nil {
				return err
			}
			b, err := res.Encode()
			if err != nil {
				return err
			}
			if err := atomicfile.Write(output, b, 0o644); err != nil {
				return fmt.Errorf("search: writing %s: %w", output, err)
			}
			res.WriteText(env.Stdout)
			if prices.given() {
				printKneeCost(env.Stdout, bundle, res)
			}
			fmt.Fprintf(env.Stdout, "search file: %s; evidence bundle: %s\n", output, bundle)
			if htmlPage != "" {
				if err := writeSearchPage(env, res, output, htmlPage); err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
			}
			switch {
			case errors.Is(runErr, search.ErrUsage):
				return usageError("search: %v", runErr)
			case errors.Is(runErr, search.ErrAborted):
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("search: %w", runErr)}
			case runErr != nil && errors.Is(runErr, context.Canceled):
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("search: interrupted: %w", runErr)}
			case runErr != nil:
				return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("search: %w", runErr)}
			case res.Knee == nil:
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("search: the SLO failed at the first value, --from %s: no knee", search.FormatValue(cfg.From))}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Vary, "vary", "", "the client's flag to vary: rate (open model), count (connections held) or concurrency (closed model)")
	f.Float64Var(&cfg.From, "from", 0, "the first value tried")
	f.Float64Var(&cfg.To, "to", 0, "the ceiling: the search never tries more")
	f.Float64Var(&cfg.Growth, "growth", 2, "the factor between steps while growing")
	f.StringVar(&resolution, "resolution", "5%", "bisect until the bracket (first fail / last pass) is within this")
	f.IntVar(&cfg.Trials, "trials", 3, "trials a step; a step passes only when all of them hold the SLO")
	f.BoolVar(&cfg.WarmUp, "warm-up", true, "run one unscored trial at --from before the first step (a search's first trial often runs slower than the rest and could fail the first value alone); --warm-up=false skips it")
	f.StringVar(&sloText, "slo", "", "the SLO every trial must hold, e.g. 'p99<20ms,errors<0.5%' (required)")
	f.StringVar(&abortText, "abort-on", "", "end the search at once when a trial meets any of these terms, e.g. 'errors>50%,p99>5s'")
	f.IntVar(&cfg.Resamples, "resamples", 1000, "bootstrap resamples for the confidence statement")
	f.Uint64Var(&cfg.Seed, "seed", 0, "the bootstrap's random seed (default: random, recorded)")
	f.StringVarP(&output, "output", "o", "search.json", "the search file to write")
	f.StringVar(&htmlPage, "html", "", "also draw the search as a self-contained page in this `file`: the load-response curve, the knee, the bracket, every trial (report --format html SEARCH.json draws it later)")
	prices.bind(f)
	f.StringVar(&bundle, "bundle", "", "the evidence bundle directory: every trial's result file, search.json, manifest (default: OUTPUT without .json + -bundle; must be absent or empty)")
	prov.bindSignKey(f, "the bundle's manifest")
	bindRemoteWriteFlags(f)
	return c
}

// checkSearchCommand checks the client command line: a command the search drives, which has the
// --vary flag and sets neither it nor its result file itself. It returns the result-file flag.
func checkSearchCommand(env *Env, args []string, vary string) (string, error) {
	if vary != "rate" && vary != "count" && vary != "concurrency" {
		return "", usageError("search: --vary %q: give rate, count or concurrency", vary)
	}
	inner := args
	if args[0] == "coordinate" {
		i := slices.Index(args, "--")
		if i < 0 || i == len(args)-1 {
			return "", usageError("search: coordinate needs its client command after its own --, e.g. -- coordinate --workers 2 -- keycast run …")
		}
		inner = args[i+1:]
	}
	if len(inner) < 2 {
		return "", usageError("search: the client command %q is incomplete: e.g. keycast run --url … or linkkeys connections --info-file …", strings.Join(inner, " "))
	}
	name := inner[0] + " " + inner[1]
	outFlag, ok := searchClients[name]
	if !ok {
		return "", usageError("search: %q is not a client command a search can drive: use keycast run, linkkeys connections, linkkeys handshake-bench or linkkeys request-bench", name)
	}
	root := NewRoot(Loadproof, env)
	sub, _, err := root.Find(inner)
	if err != nil || sub.CommandPath() != "loadproof "+name {
		return "", usageError("search: cannot find the client command %q", name)
	}
	vf := sub.Flags().Lookup(vary)
	if vf == nil {
		return "", usageError("search: %s has no --%s flag to vary (see loadproof %s --help)", name, vary, name)
	}
	for _, a := range inner[2:] {
		if a == "--remote-write" || strings.HasPrefix(a, "--remote-write") {
			return "", usageError("search: give %s to search, not to the client command: search hands it to every trial with the trial's phase label", strings.SplitN(a, "=", 2)[0])
		}
	}
	for _, fl := range []string{vary, outFlag} {
		sf := sub.Flags().Lookup(fl)
		for _, a := range inner[2:] {
			if a == "--" {
				break
			}
			if a == "--"+fl || strings.HasPrefix(a, "--"+fl+"=") || (sf.Shorthand != "" && strings.HasPrefix(a, "-"+sf.Shorthand) && !strings.HasPrefix(a, "--")) {
				return "", usageError("search: the client command sets --%s itself; the search sets it for each trial, so leave it out", fl)
			}
		}
	}
	return outFlag, nil
}

// emptyDir makes dir, or checks that it exists empty (a search never mixes its trials with others').
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: give a new directory, so the bundle holds this search's trials only", dir)
	}
	return nil
}

// searchPhase is a trial's remote-write phase label; step 0 is the warm-up trial.
func searchPhase(step, trial int, vary string, v float64) string {
	if step == 0 {
		return fmt.Sprintf("--remote-write-label=phase=warm-up (%s=%s)", vary, search.FormatValue(v))
	}
	return fmt.Sprintf("--remote-write-label=phase=step %d trial %d (%s=%s)", step, trial, vary, search.FormatValue(v))
}
