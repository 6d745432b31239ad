package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/report"
)

// writeDemoReport writes out/report.html: one self-contained page with a tab for each LinkKeys smoke
// step (lkResults, its result files), the Keycast run
// and one for the capacity profile, drawn from the files the demo wrote.
func writeDemoReport(out, resultsPath, evidenceDir string, lkResults []string) (string, error) {
	var parts []report.Part
	type part struct{ name, path, title string }
	var all []part
	for _, p := range lkResults {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "linkkeys-"), ".json")
		all = append(all, part{"LinkKeys " + name, p, "LinkKeys smoke run: " + name})
	}
	all = append(all,
		part{"Keycast run", resultsPath, "Keycast run (get_public_key, warm cache)"},
		part{"Capacity profile", filepath.Join(evidenceDir, "evidence.json"), ""})
	for _, p := range all {
		if _, err := os.Stat(p.path); err != nil {
			continue // a part the demo did not get to
		}
		f, err := report.Open(p.path)
		if err != nil {
			return "", fmt.Errorf("demo: reading %w", err)
		}
		page, err := report.HTMLFiles([]*report.File{f}, report.HTMLOptions{Title: p.title})
		if err != nil {
			return "", fmt.Errorf("demo: drawing %s: %w", p.path, err)
		}
		parts = append(parts, report.Part{Name: p.name, Page: page})
	}
	page, err := report.Combined("loadproof demo", parts)
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, "report.html")
	if err := atomicfile.Write(path, page, 0o644); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	return path, nil
}
