package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/report"
)

// newReportCmd is `loadproof report FILE...`: it reads result files of either harness (LinkKeys
// client results written with --json, Keycast run results), merges several files of one run's
// segments exactly (counts add, HDR histograms merge), and prints the report. Nothing is measured.
func newReportCmd(env *Env) *cobra.Command {
	var format, output string
	var page pageOptions
	c := &cobra.Command{
		Use:   "report FILE...",
		Short: "Report (and merge) result files of either harness, from the files alone",
		Long: "report reads LinkKeys client results (--json) or Keycast run results, merges several files\n" +
			"that are segments of one run (worker processes or machines) exactly, and prints the report.\n" +
			"--format json prints the merged result; --output writes it to a file.\n" +
			"--format html draws the files as one self-contained page (no network needed to open it):\n" +
			"merged segments, --compare two runs, or a capacity bundle directory; -o writes it to a file.\n" +
			"--format hgrm writes the HdrHistogram percentile distribution for the HdrHistogram plotter.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format == report.FormatHTML || format == report.FormatHGRM {
				return runReportPage(env, args, format, output, page)
			}
			if format != "text" && format != "json" {
				return usageError("report: --format %q: must be text or json", format)
			}
			return runReport(env, args, format, output)
		},
	}
	c.Flags().StringVarP(&format, "format", "f", "text", "text, json, html (a self-contained page; -o names it) or hgrm (HdrHistogram percentile distribution)")
	addPageFlags(c, &page)
	c.Flags().StringVarP(&output, "output", "o", "", "also write the merged result as JSON to this file")
	return c
}

// resultKind tells the two result formats apart by their top-level keys; anything else is refused
// with what it appears to be (keycastresult.CheckShape).
func resultKind(b []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err == nil && top != nil {
		var harness string
		_ = json.Unmarshal(top["harness"], &harness)
		_, cmd := top["command"]
		_, meta := top["metadata"]
		if harness == linkkeysresult.Harness || harness == "" && cmd && !meta {
			return "linkkeys", nil
		}
	}
	err := keycastresult.CheckShape(b)
	var ne *keycastresult.NotResultsError
	if errors.As(err, &ne) && ne.Unknown {
		ne.What += `; nor is it a LinkKeys client result (no "command"): neither a LinkKeys client result nor a Keycast results file`
	}
	if err != nil {
		return "", err
	}
	return "keycast", nil
}

func runReport(env *Env, paths []string, format, output string) error {
	var kind string
	var lk []linkkeysresult.Result
	var kc []*keycastresult.Results
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", err)}
		}
		k, err := resultKind(b)
		if err != nil {
			var ne *keycastresult.NotResultsError
			if errors.As(err, &ne) {
				ne.Path = p
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", ne)}
			}
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %s: %w", p, err)}
		}
		if kind != "" && k != kind {
			return usageError("report: %s is a %s result but %s is a %s result; merge files of one kind", p, k, paths[0], kind)
		}
		kind = k
		if k == "linkkeys" {
			r, err := linkkeysresult.Read(b)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %s: %w", p, err)}
			}
			lk = append(lk, r)
		} else {
			r, err := keycastresult.Parse(b)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %s: %w", p, err)}
			}
			kc = append(kc, r)
		}
	}
	var merged any
	var text func() error
	if kind == "linkkeys" {
		r := lk[0]
		if len(lk) > 1 {
			var err error
			if r, err = linkkeysresult.Merge(lk); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: merging: %w", err)}
			}
		}
		merged = r
		text = func() error { return report.LinkKeysText(env.Stdout, &r) }
	} else {
		r := kc[0]
		if len(kc) > 1 {
			var err error
			if r, err = keycastresult.Merge(kc); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: merging: %w", err)}
			}
		}
		merged = r
		text = func() error {
			out, err := report.Render(r, "text")
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, out)
			return nil
		}
	}
	if output != "" {
		b, err := json.MarshalIndent(merged, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(output, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	if format == "json" {
		b, err := json.MarshalIndent(merged, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	return text()
}
