//go:build e2e

package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/report"
)

// TestRepeatedPhasesFold draws a capacity page whose plan repeats a phase (step-1 … step-5, the
// last of which overran) between two others: the four repeated phases that passed on time fold
// into one row, the overrun stays on its own, marked, and every phase is listed under the fold.
func TestRepeatedPhasesFold(t *testing.T) {
	b := needBrowser(t)
	// The page's data as `loadproof report` writes it for such a bundle.
	type ph struct {
		Name        string           `json:"name"`
		Label       string           `json:"label"`
		Kind        string           `json:"kind"`
		Passed      bool             `json:"passed"`
		Start       float64          `json:"start"`
		End         float64          `json:"end"`
		PlannedSecs float64          `json:"planned_secs"`
		ElapsedSecs float64          `json:"elapsed_secs"`
		Overran     bool             `json:"overran"`
		Headline    map[string]any   `json:"headline"`
		Checks      []map[string]any `json:"checks"`
	}
	var phases []ph
	at := 0.0
	for _, n := range []string{"warmup", "step-1", "step-2", "step-3", "step-4", "step-5", "cooldown"} {
		ran := 1.0
		if n == "step-5" {
			ran = 2.5
		}
		phases = append(phases, ph{Name: "plan-" + n, Label: n, Kind: "steady", Passed: true, Start: at, End: at + ran, PlannedSecs: 1,
			ElapsedSecs: ran, Overran: ran > 2, Headline: map[string]any{"operations": 100, "succeeded": 90, "refused": 10, "failures": 0,
				"duration_s": ran, "throughput": 90 / ran, "p50_ms": 0.05, "p99_ms": 2}})
		at += ran
	}
	data, err := json.Marshal(map[string]any{"title": "fold", "mode": "capacity",
		"capacity": map[string]any{"profile": "fold", "passed": true, "rehearsal": true, "phases": phases, "stop_at": nil},
		"runs":     []map[string]any{{"label": "fold", "harness": "keycast", "command": "capacity", "headline": map[string]any{}}}})
	if err != nil {
		t.Fatal(err)
	}
	var m report.Model
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	cv := m.Capacity
	page, err := report.Page(&m)
	if err != nil {
		t.Fatal(err)
	}
	out := t.ArtifactDir()
	path := filepath.Join(out, "phases-folded.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := b.Open(fileURL(path))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Wait(`document.body && document.body.getAttribute('data-rendered') >= '1'`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	rows, err := browser.Eval[[]string](p, `Array.from(document.querySelectorAll('#phases tr')).slice(1).map(function(r){return r.cells[0].textContent + ' | ' + r.cells[4].textContent;})`)
	want := []string{"plan-warmup | 1", "plan-step-1 … plan-step-4 (4 phases) | 4", "plan-step-5 | 2.5 OVERRAN", "plan-cooldown | 1"}
	if err != nil || len(rows) != len(want) {
		t.Fatalf("phase rows %q (%v), want %q", rows, err, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("phase row %d: %q, want %q", i, rows[i], want[i])
		}
	}
	if n, err := browser.Eval[int](p, `document.querySelectorAll('#phases-all tr').length`); err != nil || n != len(cv.Phases)+1 {
		t.Errorf("every-phase table has %d rows (%v), want %d", n, err, len(cv.Phases)+1)
	}
	verdict, err := browser.Eval[string](p, `document.getElementById('verdict').textContent`)
	if err != nil || !strings.Contains(verdict, "OVERRAN: plan-step-5 ran 2.5 s of 1 s planned") || !strings.Contains(verdict, "rehearsal: not certifiable") {
		t.Errorf("verdict %q (%v): want the overrun and the rehearsal named", verdict, err)
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
	if err := p.Screenshot(filepath.Join(out, "phases-folded.png")); err != nil {
		t.Error(err)
	}
}
