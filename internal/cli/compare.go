package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/compare"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
)

// ExitGateFailed is compare's exit status when a gated metric is worse beyond its allowance.
const ExitGateFailed = 1

// compareOptions are the flags a comparison takes, from compare or from report --compare … --vs.
type compareOptions struct {
	gate       string
	confidence float64
	iterations int
	seed       uint64
	title      string
}

func (o *compareOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.gate, "gate", "", "allowances, e.g. 'throughput>-3%,p99<+5%': fail (exit 1) when a metric is worse beyond its allowance at the confidence")
	f.Float64Var(&o.confidence, "confidence", 0.95, "two-sided confidence of the intervals (0.5 to 0.999)")
	f.IntVar(&o.iterations, "iterations", 2000, "bootstrap resamples (100 to 100000)")
}

func newCompareCmd(env *Env) *cobra.Command {
	var (
		opt            compareOptions
		format, output string
	)
	c := &cobra.Command{
		Use:   "compare A.json... --vs B.json... [flags]",
		Short: "Did it get worse? Per-metric change of runs B against runs A, with a bootstrap confidence interval",
		Long: "compare reads result files of one command (runs A, then --vs, runs B) and gives, per metric\n" +
			"(throughput of successes; p50, p90, p99, p99.9 per latency kind; error and refusal rates), the change\n" +
			"of B against A with a confidence interval from a bootstrap over the runs and their per-second\n" +
			"intervals, and a verdict: better, worse or no change at --confidence. --gate fails the command\n" +
			"(exit 1) only when a gated metric is worse beyond its allowance at that confidence; usage errors\n" +
			"exit 2. One run a side works, but its interval holds no run-to-run noise. --format html draws the\n" +
			"comparison as a self-contained page (each interval as a bar against zero, the gate's allowances);\n" +
			"-o names it. docs/compare.md.",
		Example: "  loadproof compare a1.json a2.json a3.json --vs b1.json b2.json b3.json\n" +
			"  loadproof compare --gate 'throughput>-3%,p99<+5%' base-*.json --vs head-*.json\n" +
			"  loadproof compare --confidence 0.99 --format json -o cmp.json a.json --vs b.json\n" +
			"  loadproof compare --format html -o cmp.html a1.json a2.json --vs b1.json b2.json",
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
			if format != "text" && format != "json" && format != report.FormatHTML {
				return usageError("compare: --format %q: text, json or html", format)
			}
			if !fs.Changed("seed") {
				// Derived from the files rather than drawn: the same files give the same intervals
				// (and the same page), so a gate does not flip on a rerun.
				// A file that cannot be read is named by the comparison itself (and its page).
				opt.seed, _ = filesSeed(append(slices.Clone(args), vs...))
			}
			return runCompare(env, args, vs, opt, format, output)
		},
	}
	f := c.Flags()
	opt.bind(f)
	f.Uint64Var(&opt.seed, "seed", 0, "resampling seed (default: one derived from the files' bytes, so the same files give the same intervals)")
	f.StringVarP(&format, "format", "f", "text", "text, json or html (a self-contained page)")
	f.StringVarP(&output, "output", "o", "", "also write the comparison as JSON to this `file` (with --format html: the page)")
	f.StringVar(&opt.title, "title", "", "html: the page's title (default from the runs' command)")
	return c
}

// runCompare compares the B files against the A files and writes the comparison as text, JSON or
// a page; a failed gate exits 1 after the output is written.
func runCompare(env *Env, aPaths, bPaths []string, opt compareOptions, format, output string) error {
	if len(aPaths) == 0 || len(bPaths) == 0 {
		return usageError("compare: give at least one result file on each side of --vs")
	}
	var gates []compare.Gate
	if opt.gate != "" {
		g, err := compare.ParseGate(opt.gate)
		if err != nil {
			return usageError("compare: --gate: %v", err)
		}
		gates = g
	}
	info := report.CompareInfo{Title: opt.title, FilesA: aPaths, FilesB: bPaths, Seed: opt.seed}
	cmp, err := compareFiles(aPaths, bPaths, opt, gates, &info)
	if err != nil {
		if format == report.FormatHTML && output != "" {
			// The page says why nothing was compared (a CI job keeps the page it was asked for).
			if page, perr := report.RefusedComparePage(err.Error(), info); perr == nil {
				if werr := atomicfile.Write(output, page, 0o644); werr == nil {
					fmt.Fprintf(env.Stderr, "compare: wrote %s (the comparison was refused)\n", output)
				}
			}
		}
		return err
	}
	if format == report.FormatHTML {
		if err := writeComparePage(env, cmp, info, output); err != nil {
			return err
		}
	} else if err := writeComparison(env, cmp, format, output); err != nil {
		return err
	}
	if cmp.Gate != nil && !cmp.Gate.Passed {
		return &ExitError{Code: ExitGateFailed, Err: errors.New("compare: the gate failed (see above)")}
	}
	return nil
}

// compareFiles reads both sides' result files, compares them and applies the gates; info learns
// the runs' command as soon as it is known.
func compareFiles(aPaths, bPaths []string, opt compareOptions, gates []compare.Gate, info *report.CompareInfo) (*compare.Comparison, error) {
	a, err := readEnvelopes(aPaths)
	if err != nil {
		return nil, err
	}
	info.Command = a[0].Harness + " " + a[0].Command
	b, err := readEnvelopes(bPaths)
	if err != nil {
		return nil, err
	}
	cmp, err := compare.Compare(a, b, compare.Options{Confidence: opt.confidence, Iterations: opt.iterations, Seed: opt.seed})
	if err != nil {
		return nil, usageError("%v", err)
	}
	if gates != nil {
		if err := cmp.ApplyGate(gates); err != nil {
			return nil, usageError("compare: %v", err)
		}
	}
	return cmp, nil
}

// writeComparePage writes the comparison's page to output (atomically) with the text table on
// stdout, or the page alone onto stdout when no output is named.
func writeComparePage(env *Env, cmp *compare.Comparison, info report.CompareInfo, output string) error {
	page, err := report.ComparePage(cmp, info)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if output == "" {
		_, err := env.Stdout.Write(page)
		return err
	}
	if err := atomicfile.Write(output, page, 0o644); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("compare: %w", err)}
	}
	cmp.WriteText(report.TextWriter(env.Stdout))
	fmt.Fprintf(env.Stderr, "compare: wrote %s (%d bytes)\n", output, len(page))
	return nil
}

// vsFlag is report's --vs: a marker between the A files and the B files of a comparison. pflag
// gathers the file names as it parses, so the marker records how many came before it.
type vsFlag struct {
	fs  *pflag.FlagSet
	set bool
	at  int
}

func (v *vsFlag) String() string { return "" }
func (v *vsFlag) Type() string   { return "bool" }
func (v *vsFlag) Set(string) error {
	if v.set {
		return errors.New("give --vs once: the A files before it, the B files after it")
	}
	v.set, v.at = true, len(v.fs.Args())
	return nil
}

// reportCompare is report's part of a comparison: --vs and the compare flags.
type reportCompare struct {
	vs  vsFlag
	opt compareOptions
	// seed is --seed; without it report derives one from the files' bytes.
	seed uint64
}

// unused refuses the comparison's flags without --vs: they would silently do nothing.
func (o *reportCompare) unused(cmd *cobra.Command) error {
	for _, name := range []string{"gate", "confidence", "iterations", "seed"} {
		if cmd.Flags().Changed(name) {
			return usageError("report: --%s belongs to a statistical comparison: give --compare A.json... --vs B.json...", name)
		}
	}
	return nil
}

// addReportCompareFlags gives report --compare A... --vs B... (a statistical comparison page).
func addReportCompareFlags(c *cobra.Command, o *reportCompare) {
	f := c.Flags()
	o.vs.fs = f
	fl := f.VarPF(&o.vs, "vs", "", "with --compare: the files after it are runs B, those before it runs A; draws the bootstrap comparison (compare --format html)")
	fl.NoOptDefVal = "true"
	o.opt.bind(f)
	f.Uint64Var(&o.seed, "seed", 0, "with --vs: the resampling seed (default: one derived from the files' bytes, so the page is a function of them)")
}

// runReportCompare is report --compare A... --vs B...: the comparison as compare draws it, with a
// seed derived from the files' bytes unless one is given, so the same files draw the same page.
func runReportCompare(env *Env, cmd *cobra.Command, args []string, format, output, title string, o *reportCompare) error {
	if format != "text" && format != "json" && format != report.FormatHTML {
		return usageError("report: --vs compares runs as text, json or html, not %q", format)
	}
	a, b := args[:o.vs.at], args[o.vs.at:]
	if len(a) == 0 || len(b) == 0 {
		return usageError("report: --vs needs result files on each side: report --compare A.json... --vs B.json...")
	}
	opt := o.opt
	opt.title = title
	opt.seed = o.seed
	if !cmd.Flags().Changed("seed") {
		var err error
		if opt.seed, err = filesSeed(args); err != nil {
			return err
		}
	}
	return runCompare(env, a, b, opt, format, output)
}

// filesSeed is the bootstrap's default seed: a hash of the files' bytes in order (never 0, which
// compare takes for "draw one").
func filesSeed(paths []string) (uint64, error) {
	files, err := openFiles(paths)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	for _, s := range files {
		h.Write(s.Data)
		h.Write([]byte{0})
	}
	return max(h.Sum64(), 1), nil
}

// readEnvelopes reads result files of either harness.
func readEnvelopes(paths []string) ([]*result.Envelope, error) {
	files, err := openFiles(paths)
	if err != nil {
		return nil, err
	}
	out := make([]*result.Envelope, len(files))
	for i, f := range files {
		e, err := f.RunEnvelope()
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
