package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/capacity"
	"github.com/loadproof/loadproof/internal/evidence"
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
			if path, ok, err := searchArg(args); ok || err != nil {
				if err != nil {
					return err
				}
				return runSearchReport(env, path, format, output, page.title)
			}
			if format == report.FormatHTML || format == report.FormatHGRM {
				return runReportPage(env, args, format, output, page)
			}
			if format != "text" && format != "json" && format != "csv" {
				return usageError("report: --format %q: must be text, json, csv, html or hgrm", format)
			}
			if path, ok, err := evidenceArg(args); ok || err != nil {
				if err != nil {
					return err
				}
				return runEvidenceReport(env, path, format, output)
			}
			return runReport(env, args, format, output)
		},
	}
	c.Flags().StringVarP(&format, "format", "f", "text", "text, json, csv, html (a self-contained page; -o names it) or hgrm (HdrHistogram percentile distribution)")
	addPageFlags(c, &page)
	addReportCompareFlags(c, &rc)
	c.Flags().StringVarP(&output, "output", "o", "", "write to this `file`: the page with --format html or hgrm, else also the merged result (or the evidence) as JSON")
	return c
}

// resultKind is the harness of a result file (report.Sniff tells the kinds apart); anything but
// the two result formats is refused with what it appears to be (keycastresult.CheckShape).
func resultKind(b []byte) (string, error) {
	k, _ := report.Sniff(b)
	if k == report.KindLinkKeys {
		return "linkkeys", nil
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
	var names []string
	for _, p := range paths {
		b, err := boundedfile.Read(p, boundedfile.Result)
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
		names = append(names, p)
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
			if r, err = linkkeysresult.MergeRun(names, lk); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: merging: %w", err)}
			}
		}
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
		r := kc[0]
		if len(kc) > 1 {
			var err error
			if r, err = keycastresult.MergeRun(names, kc); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: merging: %w", err)}
			}
		}
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

// evidenceArg reports whether the arguments name one capacity evidence bundle: a directory holding
// evidence.json, or an evidence file. ok is false for result files.
func evidenceArg(args []string) (dir string, ok bool, err error) {
	for _, p := range args {
		fi, serr := os.Stat(p)
		isDir := serr == nil && fi.IsDir()
		if !isDir {
			if serr != nil || !fi.Mode().IsRegular() || fi.Size() > evidence.MaxEvidenceBytes {
				continue // runReport names the problem
			}
			b, rerr := boundedfile.Read(p, boundedfile.Evidence)
			if rerr != nil || !evidence.IsEvidence(b) {
				continue
			}
		}
		if len(args) > 1 {
			return "", false, usageError("report: %s is a capacity evidence bundle; report one bundle at a time (bundles do not merge)", p)
		}
		return p, true, nil
	}
	return "", false, nil
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
func runEvidenceReport(env *Env, path, format, output string) error {
	bundle, err := evidence.Read(path)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", err)}
	}
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
		if ev.HarnessName() == linkkeysresult.Harness {
			r, err := linkkeysresult.Read(rb)
			if err == nil {
				err = report.LinkKeysText(env.Stdout, &r)
			}
			if err != nil {
				fmt.Fprintf(env.Stdout, "  unreadable: %v\n", err)
			}
			continue
		}
		r, err := keycastresult.Parse(rb)
		if err != nil {
			fmt.Fprintf(env.Stdout, "  unreadable: %v\n", err)
			continue
		}
		out, _ := report.Render(r, "text")
		fmt.Fprintln(env.Stdout, out)
	}
	if !f.OK() {
		return tamperedError(f)
	}
	return nil
}
