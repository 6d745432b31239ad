//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/dashboard"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/testwait"
)

// TestDashboardDuringARun opens the live dashboard in Chromium before a real Keycast run starts,
// watches the charts grow while it runs, then checks that the page shows the final report (the
// same charts the static report of the results file draws) and that the page it saves is that
// report and renders on its own.
func TestDashboardDuringARun(t *testing.T) {
	b := needBrowser(t)
	f := getFixtures(t)
	out := t.ArtifactDir()
	const planned, rate = 4 * time.Second, 40.0
	d, err := dashboard.Start(dashboard.Options{Addr: "127.0.0.1:0", Title: "loadproof keycast run (live)", Harness: "keycast", Command: "run", Target: f.srvURL,
		Planned: planned, TargetRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	p, err := b.Open(d.URL(), strings.TrimSuffix(d.URL(), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Wait(`document.body && document.body.getAttribute('data-rendered') >= '1'`, 90*time.Second); err != nil {
		t.Fatalf("%v; console %q", err, p.Errors())
	}
	uf, err := keycast.ReadUsersFile(f.usersPath)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan *keycastresult.Results, 1)
	go func() {
		ctx := engine.WithIntervalObserver(context.Background(), d.Interval)
		res, err := keycastload.Run(ctx, keycastload.RunConfig{URL: f.srvURL, Concurrency: 2, Duration: planned, Rate: rate,
			Scenario: keycast.ScenarioWarmCache, Method: keycast.MethodGetPublicKey, Users: uf.Users, UsersFile: f.usersPath, ReportInterval: time.Second})
		if err != nil {
			t.Error(err)
		}
		runDone <- res
	}()
	// Live: the charts grow as intervals arrive (the page sets its flag after each redraw).
	live := `(window.__lpCharts || []).some(c => c.id === 'throughput' && c.points >= 2)`
	if err := p.Wait(live, 90*time.Second); err != nil {
		t.Fatalf("the live page never showed two intervals: %v; console %q", err, p.Errors())
	}
	if err := p.Screenshot(filepath.Join(out, "dashboard-live.png")); err != nil {
		t.Error(err)
	}
	// Elapsed against planned, the target as a line, the rates now in the tiles.
	status, err := browser.Eval[string](p, `document.getElementById('live-status').textContent`)
	if want := fmt.Sprintf("of %g s planned", planned.Seconds()); err != nil || !strings.Contains(status, want) || !strings.Contains(status, fmt.Sprintf("target %g /s", rate)) {
		t.Errorf("live status %q (%v): want %q and the target rate", status, err, want)
	}
	labels, err := browser.Eval[[]string](p, `Array.from(document.querySelectorAll('#headline .fig .l')).map(function(e){return e.textContent;})`)
	if err != nil || !slices.Contains(labels, "Succeeded /s (now)") || slices.Contains(labels, "Throughput (succeeded)") {
		t.Errorf("live tiles %q (%v): want the current rates, not the means since the start", labels, err)
	}
	liveCharts, err := p.Charts()
	if err != nil {
		t.Fatal(err)
	}
	shown, err := browser.Eval[[]string](p, `Array.from(document.querySelectorAll('#charts > .chart')).map(function(e){return e.id.replace(/^chart-/, '');})`)
	var liveOrder []string
	for _, c := range liveCharts {
		liveOrder = append(liveOrder, c.ID)
		if c.ID == "throughput" && !slices.Equal(c.Series, []string{"throughput", "target"}) {
			t.Errorf("live throughput chart series %q: want the target line beside it", c.Series)
		}
	}
	res := testwait.Recv(t, runDone, planned+2*time.Minute, "the end of the planned run")
	if res == nil {
		t.FailNow()
	}
	resultsPath := filepath.Join(t.TempDir(), "results.json")
	if err := keycastresult.Write(resultsPath, res); err != nil {
		t.Fatal(err)
	}
	m, _ := drawModel(t, []string{resultsPath}, report.HTMLOptions{})
	if err := d.Finish(m); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(`document.body.getAttribute('data-final') === '1'`, 90*time.Second); err != nil {
		t.Fatalf("the page never showed the final report: %v; console %q", err, p.Errors())
	}
	want := expectCharts(m)
	w := want["throughput"]
	w.series = append(w.series, "target") // the dashboard keeps its target line at the end
	want["throughput"] = w
	checkCharts(t, p, want)
	if !slices.Equal(shown, liveOrder) {
		t.Errorf("live page shows charts %q (%v), want them in the order %q", shown, err, liveOrder)
	}
	// The same charts in the same order live and final (the final report may add the charts of
	// the whole run, like the distribution, after them).
	finalCharts, err := p.Charts()
	if err != nil {
		t.Fatal(err)
	}
	var finalOrder []string
	for _, c := range finalCharts {
		if slices.Contains(liveOrder, c.ID) {
			finalOrder = append(finalOrder, c.ID)
		}
	}
	if !slices.Equal(finalOrder, liveOrder) {
		t.Errorf("charts live %q, final %q: want the same order", liveOrder, finalOrder)
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
	if reqs := p.Requests(); len(reqs) > 0 {
		t.Errorf("the dashboard requested %q", reqs)
	}
	if n, err := browser.Eval[int](p, `document.querySelectorAll('#save').length`); err != nil || n != 1 {
		t.Errorf("no save button on the final page (%v)", err)
	}
	if err := p.Screenshot(filepath.Join(out, "dashboard-final.png")); err != nil {
		t.Error(err)
	}
	// What Save writes is a report page of its own: same data, renders offline.
	saved, err := browser.Eval[string](p, `window.__lpPageHTML()`)
	if err != nil {
		t.Fatal(err)
	}
	savedPath := filepath.Join(out, "dashboard-saved.html")
	if err := os.WriteFile(savedPath, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saved, `"live":`) {
		t.Error("the saved page still wants its live feed")
	}
	var back report.Model
	if i, j := strings.Index(saved, `type="application/json">`), strings.Index(saved, "</script>\n<script id=\"lp-app\">"); i < 0 || j < 0 {
		t.Fatal("the saved page has no data element")
	} else if err := json.Unmarshal([]byte(saved[i+len(`type="application/json">`):j]), &back); err != nil {
		t.Fatal(err)
	}
	checkPage(t, b, fileURL(savedPath), expectCharts(&back), filepath.Join(out, "dashboard-saved.png"))
}
