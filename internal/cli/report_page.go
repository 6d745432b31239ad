package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/evidence"
	"github.com/loadproof/loadproof/internal/report"
)

// pageOptions are the report command's flags for the drawn formats (html, hgrm).
type pageOptions struct {
	compare bool
	title   string
	kind    string
}

func addPageFlags(c *cobra.Command, o *pageOptions) {
	f := c.Flags()
	f.BoolVar(&o.compare, "compare", false, "html: draw two runs overlaid with the differences of their headline figures (exactly two files)")
	f.StringVar(&o.title, "title", "", "html: the page's title (default from the files)")
	f.StringVar(&o.kind, "kind", "", "hgrm: the latency kind to write (default \"latency\", or the files' first kind)")
}

// runReportPage draws the files as a self-contained HTML page or an .hgrm distribution, into
// output (atomically) or onto stdout.
func runReportPage(env *Env, files []*report.File, format, output string, o pageOptions) error {
	var out []byte
	var err error
	if format == report.FormatHGRM {
		out, err = report.HGRMFiles(files, o.kind)
	} else {
		out, err = report.HTMLFiles(files, report.HTMLOptions{Title: o.title, Compare: o.compare})
	}
	if err != nil {
		// Every failure here is about the files given: not results, or not of one run.
		return &ExitError{Code: ExitUsage, Err: err}
	}
	// A bundle is verified as `verify` does; one that does not verify is drawn with TAMPERED at
	// the top of the page, and the command fails.
	var failed *evidence.Findings
	if format == report.FormatHTML {
		for _, s := range files {
			if s.Kind != report.KindEvidence {
				continue
			}
			if f := evidence.Verify(s.Dir, verifyOptions(nil)); !f.OK() {
				out, failed = report.MarkTampered(out, f.Path, f.Problems), f
				report.TamperedText(env.Stderr, f.Path, f.Problems)
			}
		}
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
