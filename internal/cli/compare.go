package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/compare"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// ExitGateFailed is compare's exit status when a gated metric is worse beyond its allowance.
const ExitGateFailed = 1

func newCompareCmd(env *Env) *cobra.Command {
	var (
		gate, format, output string
		confidence           float64
		iterations           int
		seed                 uint64
	)
	c := &cobra.Command{
		Use:   "compare A.json... --vs B.json... [flags]",
		Short: "Did it get worse? Per-metric change of runs B against runs A, with a bootstrap confidence interval",
		Long: "compare reads result files of one command (runs A, then --vs, runs B) and gives, per metric\n" +
			"(throughput of successes; p50, p90, p99, p99.9 per latency kind; error and refusal rates), the change\n" +
			"of B against A with a confidence interval from a bootstrap over the runs and their per-second\n" +
			"intervals, and a verdict: better, worse or no change at --confidence. --gate fails the command\n" +
			"(exit 1) only when a gated metric is worse beyond its allowance at that confidence; usage errors\n" +
			"exit 2. One run a side works, but its interval holds no run-to-run noise. docs/compare.md.",
		Example: "  loadproof compare a1.json a2.json a3.json --vs b1.json b2.json b3.json\n" +
			"  loadproof compare --gate 'throughput>-3%,p99<+5%' base-*.json --vs head-*.json\n" +
			"  loadproof compare --confidence 0.99 --format json -o cmp.json a.json --vs b.json",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true, // the files on each side of --vs are split here, then each side's flags parsed
		RunE: func(cmd *cobra.Command, raw []string) error {
			i := slices.Index(raw, "--vs")
			if slices.Contains(raw, "-h") || slices.Contains(raw, "--help") {
				return cmd.Help()
			}
			if i < 0 {
				return usageError("compare: give the A files, then --vs and the B files (compare A.json... --vs B.json...)")
			}
			fs := cmd.Flags()
			if err := fs.Parse(raw[:i]); err != nil {
				return usageError("compare: %v", err)
			}
			args := slices.Clone(fs.Args())
			if err := fs.Parse(raw[i+1:]); err != nil {
				return usageError("compare: %v", err)
			}
			vs := slices.Clone(fs.Args())
			if len(args) == 0 || len(vs) == 0 {
				return usageError("compare: give at least one result file on each side of --vs")
			}
			if format != "text" && format != "json" {
				return usageError("compare: --format %q: text or json", format)
			}
			var gates []compare.Gate
			if gate != "" {
				g, err := compare.ParseGate(gate)
				if err != nil {
					return usageError("compare: --gate: %v", err)
				}
				gates = g
			}
			a, err := readEnvelopes(args)
			if err != nil {
				return err
			}
			b, err := readEnvelopes(vs)
			if err != nil {
				return err
			}
			cmp, err := compare.Compare(a, b, compare.Options{Confidence: confidence, Iterations: iterations, Seed: seed})
			if err != nil {
				return usageError("%v", err)
			}
			if gates != nil {
				if err := cmp.ApplyGate(gates); err != nil {
					return usageError("compare: %v", err)
				}
			}
			if err := writeComparison(env, cmp, format, output); err != nil {
				return err
			}
			if cmp.Gate != nil && !cmp.Gate.Passed {
				return &ExitError{Code: ExitGateFailed, Err: errors.New("compare: the gate failed (see above)")}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&gate, "gate", "", "allowances, e.g. 'throughput>-3%,p99<+5%': fail (exit 1) when a metric is worse beyond its allowance at the confidence")
	f.Float64Var(&confidence, "confidence", 0.95, "two-sided confidence of the intervals (0.5 to 0.999)")
	f.IntVar(&iterations, "iterations", 2000, "bootstrap resamples (100 to 100000)")
	f.Uint64Var(&seed, "seed", 0, "resampling seed (0: a random one); the same seed and files give the same intervals")
	f.StringVarP(&format, "format", "f", "text", "text or json")
	f.StringVarP(&output, "output", "o", "", "also write the comparison as JSON to this `file`")
	return c
}

// readEnvelopes reads result files of either harness.
func readEnvelopes(paths []string) ([]*result.Envelope, error) {
	srcs, err := readSources(slices.Clone(paths))
	if err != nil {
		return nil, err
	}
	out := make([]*result.Envelope, len(srcs))
	for i, s := range srcs {
		e, err := report.LoadEnvelope(s)
		if err != nil {
			return nil, usageError("compare: %v", err)
		}
		out[i] = e
	}
	return out, nil
}

func writeComparison(env *Env, c *compare.Comparison, format, output string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("compare: encoding: %w", err)
	}
	if format == "json" {
		env.Stdout.Write(append(b, '\n'))
	} else {
		c.WriteText(env.Stdout)
	}
	if output != "" {
		if err := atomicfile.Write(output, append(b, '\n'), 0o644); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("compare: %w", err)}
		}
	}
	return nil
}
