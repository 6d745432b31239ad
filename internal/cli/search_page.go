package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/search"
)

// runSearchReport reports a search file or bundle: text (as search prints it), json (the search
// file) or html (the load-response page). A bundle with a manifest is verified as `verify` does;
// one that does not verify is reported with TAMPERED at its top and the command exits 1.
func runSearchReport(env *Env, file *report.File, format, output, title string) error {
	res := file.Search
	var failed *evidence.Findings
	var err error
	if dir, ok := search.IsBundle(file.Path); ok {
		if _, err := os.Stat(filepath.Join(dir, evidence.ManifestFile)); err == nil {
			if f := search.Verify(dir, verifyOptions(nil)); !f.OK() {
				failed = f
				report.TamperedText(env.Stderr, f.Path, f.Problems)
			}
		}
	}
	var out []byte
	switch format {
	case report.FormatHTML:
		if out, err = report.SearchPage(res, file.Path, title); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if failed != nil {
			out = report.MarkTampered(out, failed.Path, failed.Problems)
		}
	case "json":
		if out, err = res.Encode(); err != nil {
			return err
		}
	case "text":
		if output != "" {
			return usageError("report: -o with a search writes the page (--format html) or the search file (--format json)")
		}
		res.WriteText(env.Stdout)
		if failed != nil {
			return tamperedError(failed)
		}
		return nil
	default:
		return usageError("report: a search reports as text, json or html, not %q", format)
	}
	if output == "" {
		if _, err := env.Stdout.Write(out); err != nil {
			return err
		}
	} else {
		if err := atomicfile.Write(output, out, 0o644); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("report: %w", err)}
		}
		fmt.Fprintf(env.Stderr, "report: wrote %s (%d bytes)\n", output, len(out))
	}
	if failed != nil {
		return tamperedError(failed)
	}
	return nil
}

// writeSearchPage is search --html: the search's page, written once the search file is.
func writeSearchPage(env *Env, res *search.Result, searchFile, page string) error {
	out, err := report.SearchPage(res, searchFile, "")
	if err != nil {
		return fmt.Errorf("search: drawing %s: %w", page, err)
	}
	if err := atomicfile.Write(page, out, 0o644); err != nil {
		return fmt.Errorf("search: writing %s: %w", page, err)
	}
	fmt.Fprintf(env.Stdout, "search page: %s\n", page)
	return nil
}
