package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/boundedfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/search"
)

// searchArg reports whether report's arguments name a search file or a search bundle: a directory
// holding search.json, or a file whose format is the search file's. A search is reported alone.
func searchArg(args []string) (path string, ok bool, err error) {
	for _, p := range args {
		fi, serr := os.Stat(p)
		if serr != nil {
			continue // the result reader names the problem
		}
		switch {
		case fi.IsDir():
			if _, ok := search.IsBundle(p); !ok {
				continue
			}
		case fi.Mode().IsRegular() && fi.Size() <= search.MaxSearchBytes:
			b, rerr := boundedfile.Read(p, boundedfile.Kind{Name: "search file", Max: search.MaxSearchBytes})
			if rerr != nil || !search.IsSearch(b) {
				continue
			}
		default:
			continue
		}
		if len(args) > 1 {
			return "", false, usageError("report: %s is a search; report one search at a time (searches do not merge with other files)", p)
		}
		return p, true, nil
	}
	return "", false, nil
}

// runSearchReport reports a search file or bundle: text (as search prints it), json (the search
// file) or html (the load-response page). A bundle with a manifest is verified as `verify` does;
// one that does not verify is reported with TAMPERED at its top and the command exits 1.
func runSearchReport(env *Env, path, format, output, title string) error {
	res, err := search.ReadFile(path)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("report: %w", err)}
	}
	var failed *evidence.Findings
	if dir, ok := search.IsBundle(path); ok {
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
		name := path
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			name = filepath.Join(path, search.File)
		}
		if out, err = report.SearchPage(res, name, title); err != nil {
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
