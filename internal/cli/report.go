package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/report"
)

// newReportCmd is `loadproof report FILE...`: it reads result files of either harness (LinkKeys
// client results written with --json, Keycast run results), merges several files of one run's
// segments exactly (counts add, HDR histograms merge), and prints the report. Nothing is measured.
func newReportCmd(env *Env) *cobra.Command {
	var format, output string
	var page pageOptions
	var rc reportCompare
	c := &cobra.Command{
		Use:   "report FILE...",
		Short: "Report (and merge) result files or evidence bundles of either harness, from the files alone",
		Long: "report reads LinkKeys client results (--json, combined results included) or Keycast run results,\n" +
			"merges several files that are segments of one run (worker processes or machines) exactly, and\n" +
			"prints the report. Given a capacity evidence bundle (its directory, or its evidence.json) of either\n" +
			"harness, it checks the bundle against its manifest and reports the verdict, every phase's checks,\n" +
			"its server's verified limits (LinkKeys) and each phase's results file.\n" +
			"--format json prints the merged result (or the evidence); csv one row per command, stream or check;\n" +
			"--output writes the JSON to a file.\n" +
			"--format html draws the files as one self-contained page (no network needed to open it):\n" +
			"merged segments, --compare two runs, or a capacity bundle directory; -o writes it to a file.\n" +
			"--compare A.json... --vs B.json... draws the statistical comparison of runs B against runs A\n" +
			"(compare --format html: each change with its confidence interval and verdict).\n" +
			"A search file or search bundle is reported alone: text, json, or html (the load-response curve).\n" +
			"--format hgrm writes the HdrHistogram percentile distribution for the HdrHistogram plotter.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rc.vs.set {
				return runReportCompare(env, cmd, args, format, output, page.title, &rc)
			}
			if err := rc.unused(cmd); err != nil {
				return err
			}
			files, err := openFiles(args)
			if err != nil {
				return err
			}
			if f, err := alone(files, report.KindSearch, "a search; report one search at a time (searches do not merge with other files)"); f != nil || err != nil {
				if err != nil {
					return err
				}
				return runSearchReport(env, f, format, output, page.title)
			}
			if format == report.FormatHTML || format == report.FormatHGRM {
				return runReportPage(env, files, format, output, page)
			}
			if format != "text" && format != "json" && format != "csv" {
				return usageError("report: --format %q: must be text, json, csv, html or hgrm", format)
			}
			if f, err := alone(files, report.KindEvidence, "a capacity evidence bundle; report one bundle at a time (bundles do not merge)"); f != nil || err != nil {
				if err != nil {
					return err
				}
				return runEvidenceReport(env, f, format, output)
			}
			return runReport(env, files, format, output)
		},
	}
	c.Flags().StringVarP(&format, "format", "f", "text", "text, json, csv, html (a self-contained page; -o names it) or hgrm (HdrHistogram percentile distribution)")
	addPageFlags(c, &page)
	addReportCompareFlags(c, &rc)
	c.Flags().StringVarP(&output, "output", "o", "", "write to this `file`: the page with --format html or hgrm, else also the merged result (or the evidence) as JSON")
	return c
}

// openFiles opens the files report is given through the one door (report.Open: a bounded read,
// the kind told, the file parsed; a directory stands for the bundle in it). A file that cannot be
// read as any kind is a usage error naming it and the problem.
func openFiles(paths []string) ([]*report.File, error) {
	files := make([]*report.File, 0, len(paths))
	for _, p := range paths {
		f, err := report.Open(p)
		if err != nil {
			// Results of two harnesses never merge: say so before what else is wrong with one.
			var oe *report.OpenError
			if errors.As(err, &oe) && len(files) > 0 && (oe.Kind == report.KindLinkKeys || oe.Kind == report.KindKeycast) {
				if err := report.SameHarness(files[0], p, oe.Kind); err != nil {
					return nil, &ExitError{Code: ExitUsage, Err: err}
				}
			}
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", err)}
		}
		files = append(files, f)
	}
	return files, nil
}

// alone returns the file of kind among files, which must then be the only one (what says what
// it is and why it stands alone); nil when there is none.
func alone(files []*report.File, kind report.Kind, what string) (*report.File, error) {
	for _, f := range files {
		if f.Kind != kind {
			continue
		}
		if len(files) > 1 {
			return nil, usageError("report: %s is %s", f.Path, what)
		}
		return f, nil
	}
	return nil, nil
}

func runReport(env *Env, files []*report.File, format, output string) error {
	m, err := report.MergeResults(files)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	var merged any
	var text func() error
	if m.LinkKeys != nil {
		r := *m.LinkKeys
		merged = r
		notice := report.PartialNotice(&r.Envelope)
		text = func() error {
			if notice != "" {
				fmt.Fprintf(env.Stdout, "%s\n\n", notice)
			}
			return report.LinkKeysText(env.Stdout, &r)
		}
		if format == "csv" {
			fmt.Fprintln(env.Stdout, report.SanitizeText(report.LinkKeysCSV(&r)))
			return writeMerged(output, merged)
		}
	} else {
		r := m.Keycast
		merged = r
		notice := report.PartialNotice(r.Envelope)
		if format == "csv" {
			fmt.Fprintln(env.Stdout, report.SanitizeText(report.CSV(r)))
			return writeMerged(output, merged)
		}
		text = func() error {
			out, err := report.Render(r, "text")
			if err != nil {
				return err
			}
			if notice != "" {
				fmt.Fprintf(env.Stdout, "%s\n\n", notice)
			}
			fmt.Fprintln(env.Stdout, out)
			return nil
		}
	}
	if err := writeMerged(output, merged); err != nil {
		return err
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

// writeMerged writes the merged result (or evidence) as JSON to output, when given.
func writeMerged(output string, merged any) error {
	if output == "" {
		return nil
	}
	b, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(output, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// tamperedError is report's exit for a bundle that does not verify: the report is printed (with
// TAMPERED at its top), and the command fails.
func tamperedError(f *evidence.Findings) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("report: %s does not verify (%d findings; `loadproof verify %s` lists them)", f.Path, len(f.Problems), f.Path)}
}

// runEvidenceReport reports an evidence bundle: its verification (manifest, recomputed checks and
// verdict, signature) first, then the verdict and checks, and, in text, each phase's results file
// drawn as the report of a result file would draw it. A bundle that does not verify is shown as
// TAMPERED at the top in every format, and the command exits 1.
func runEvidenceReport(env *Env, file *report.File, format, output string) error {
	bundle := &evidence.Bundle{Dir: file.Dir, Raw: file.Data, Evidence: file.Evidence}
	ev := bundle.Evidence
	f := evidence.Verify(bundle.Dir, verifyOptions(nil))
	var raw any
	if err := json.Unmarshal(bundle.Raw, &raw); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", err)}
	}
	if err := writeMerged(output, raw); err != nil {
		return err
	}
	switch format {
	case "json":
		if f.OK() {
			fmt.Fprintln(env.Stdout, strings.TrimRight(string(bundle.Raw), "\n"))
			return nil
		}
		b, _ := json.MarshalIndent(struct {
			Verification string          `json:"verification"`
			Problems     []string        `json:"problems"`
			Evidence     json.RawMessage `json:"evidence"`
		}{"TAMPERED", f.Problems, bundle.Raw}, "", "  ")
		fmt.Fprintln(env.Stdout, string(b))
		return tamperedError(f)
	case "csv":
		if !f.OK() {
			report.TamperedText(env.Stderr, f.Path, f.Problems)
		}
		fmt.Fprintln(env.Stdout, report.SanitizeText(report.EvidenceCSV(ev)))
		if !f.OK() {
			return tamperedError(f)
		}
		return nil
	}
	if !f.OK() {
		report.TamperedText(env.Stdout, f.Path, f.Problems)
	}
	report.EvidenceText(env.Stdout, ev)
	if f.OK() {
		fmt.Fprintf(env.Stdout, "verified: every file of %s matches its SHA-256 in the manifest; checks and verdict recompute\n", bundle.Dir)
	} else {
		fmt.Fprintf(env.Stdout, "manifest, checks or signature: DOES NOT MATCH the bundle (TAMPERED, see the top)\n")
	}
	for _, h := range f.Held {
		if strings.HasPrefix(h, "signature") {
			fmt.Fprintf(env.Stdout, "%s\n", h)
		}
	}
	for i, ph := range ev.Phases {
		if ph.ResultsFile == "" {
			continue
		}
		rb, err := bundle.ReadMember(ph.ResultsFile, capacity.MaxPhaseResultsBytes)
		if err != nil {
			fmt.Fprintf(env.Stdout, "\nphase %d %s: results file %s unreadable: %s\n", i+1, report.Sanitize(ph.Name), report.Sanitize(ph.ResultsFile), report.Sanitize(err.Error()))
			continue
		}
		fmt.Fprintf(env.Stdout, "\n---- phase %d %s: %s\n", i+1, report.Sanitize(ph.Name), report.Sanitize(ph.ResultsFile))
		rf, err := report.Parse(ph.ResultsFile, rb)
		switch {
		case err != nil:
		case rf.LinkKeys != nil:
			err = report.LinkKeysText(env.Stdout, rf.LinkKeys)
		case rf.Keycast != nil:
			out, _ := report.Render(rf.Keycast, "text")
			fmt.Fprintln(env.Stdout, out)
		default:
			err = fmt.Errorf("a %s file, not a phase's results file", rf.Kind)
		}
		if err != nil {
			fmt.Fprintf(env.Stdout, "  unreadable: %s\n", report.Sanitize(err.Error()))
		}
	}
	if !f.OK() {
		return tamperedError(f)
	}
	return nil
}
