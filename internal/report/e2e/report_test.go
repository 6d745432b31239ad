//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/report"
)

// wantChart is what one chart must show.
type wantChart struct {
	series []string
	points int
}

// expectCharts computes, from the page's own data, every chart the page must draw: the series each
// holds (prefixed A/B in a comparison) and the number of points on its x axis.
func expectCharts(m *report.Model) map[string]wantChart {
	want := map[string]wantChart{}
	multi := len(m.Runs) > 1
	// A chart's x axis joins the time axes of the runs that have a line in it.
	axes := map[string]map[int]bool{}
	add := func(id string, ri int, names ...string) {
		if len(names) == 0 {
			return
		}
		w := want[id]
		for _, n := range names {
			if multi {
				n = string(rune('A'+ri)) + " " + n
			}
			w.series = append(w.series, n)
		}
		if axes[id] == nil {
			axes[id] = map[int]bool{}
		}
		axes[id][ri] = true
		var ts [][]float64
		for r := range axes[id] {
			ts = append(ts, m.Runs[r].T)
		}
		w.points = union(ts...)
		want[id] = w
	}
	names := func(ss []*report.Series) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	var dist [][]float64
	for ri, r := range m.Runs {
		add("throughput", ri, "throughput")
		for _, l := range r.Latency {
			add("latency-"+l.Kind, ri, "p50", "p90", "p99", "p99.9", "max")
		}
		add("classes", ri, names(r.Classes)...)
		if len(r.CauseSeries) > 0 {
			add("causes", ri, names(r.CauseSeries)...)
		}
		if len(r.Connections) > 0 {
			add("connections", ri, names(r.Connections)...)
		}
		if len(r.Counters) > 0 {
			add("counters", ri, names(r.Counters)...)
		}
		for _, g := range r.Server {
			add("server-"+g.Group+"-"+strings.ReplaceAll(g.Unit, " ", "-"), ri, names(g.Series)...)
		}
		for _, d := range r.Dist {
			label := d.Kind
			for _, a := range d.Also {
				label += " = " + a
			}
			add("distribution", ri, label)
			var x []float64
			for _, p := range d.Percentile {
				x = append(x, 1/(1-p))
			}
			dist = append(dist, x)
		}
	}
	if w, ok := want["distribution"]; ok {
		w.points = union(dist...)
		want["distribution"] = w
	}
	return want
}

// checkPage opens a page, waits for the flag the page sets when it has drawn, and checks its charts
// against want, its console and its requests; then it writes a screenshot.
func checkPage(t *testing.T, b *browser.Browser, url string, want map[string]wantChart, shot string, allow ...string) *browser.Page {
	t.Helper()
	p, err := b.Open(url, allow...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// Generous: the machine running the tests may be small and busy.
	if err := p.Wait(`document.body && document.body.getAttribute('data-rendered') >= '1'`, 90*time.Second); err != nil {
		t.Fatalf("%v; console: %q", err, p.Errors())
	}
	checkCharts(t, p, want)
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
	if reqs := p.Requests(); len(reqs) > 0 {
		t.Errorf("the page requested %q", reqs)
	}
	if err := p.Screenshot(shot); err != nil {
		t.Error(err)
	} else {
		t.Logf("screenshot: %s", shot)
	}
	return p
}

func checkCharts(t *testing.T, p *browser.Page, want map[string]wantChart) {
	t.Helper()
	charts, err := p.Charts()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]browser.Chart{}
	for _, c := range charts {
		got[c.ID] = c
	}
	for id, w := range want {
		c, ok := got[id]
		switch {
		case !ok:
			t.Errorf("chart %s is missing", id)
			continue
		case !c.Drawn:
			t.Errorf("chart %s (%s) was not drawn", id, c.Title)
		case !slices.Equal(c.Series, w.series):
			t.Errorf("chart %s has series %q, want %q", id, c.Series, w.series)
		case c.Points != w.points:
			t.Errorf("chart %s has %d points, want %d", id, c.Points, w.points)
		}
		for i, n := range c.NonNull {
			if n == 0 && !strings.Contains(id, "server") && !strings.HasPrefix(c.Series[i], "B ") && !strings.HasPrefix(c.Series[i], "A ") {
				t.Errorf("chart %s: series %q has no values", id, c.Series[i])
			}
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("chart %s was drawn but is not expected", id)
		}
	}
	// A series of fewer than 3 points is a small table, not dots on an empty axis.
	var small []string
	for id, w := range want {
		if w.points < 3 && id != "distribution" {
			small = append(small, "chart-"+id)
		}
	}
	slices.Sort(small)
	shown, err := browser.Eval[[]string](p, `Array.from(document.querySelectorAll('#charts .chart.small')).map(function(e){return e.id;}).sort()`)
	if err != nil || !slices.Equal(shown, small) {
		t.Errorf("charts shown as tables %q (%v), want %q (those under 3 points)", shown, err, small)
	}
}

func fileURL(path string) string {
	abs, _ := filepath.Abs(path)
	return "file://" + abs
}

// TestReportsInBrowser draws reports of real runs (a Keycast run, two merged, two compared, a
// capacity bundle, a LinkKeys-shaped connections run) and checks them in Chromium.
func TestReportsInBrowser(t *testing.T) {
	b := needBrowser(t)
	f := getFixtures(t)
	cases := []struct {
		name  string
		files []string
		opt   report.HTMLOptions
		check func(t *testing.T, m *report.Model, p *browser.Page)
	}{
		{name: "keycast", files: []string{f.keycastA}, check: func(t *testing.T, m *report.Model, p *browser.Page) {
			if len(m.Runs[0].Server) == 0 {
				t.Error("the Keycast run carries no server samples")
			}
		}},
		{name: "merged", files: []string{f.keycastA, f.keycastB}},
		{name: "compare", files: []string{f.keycastA, f.keycastB}, opt: report.HTMLOptions{Compare: true}, check: func(t *testing.T, m *report.Model, p *browser.Page) {
			rows, err := browser.Eval[int](p, `document.querySelectorAll('#headline-section table tr').length`)
			if err != nil || rows != len(m.Compare)+1 {
				t.Errorf("comparison table has %d rows (%v), want %d", rows, err, len(m.Compare)+1)
			}
		}},
		{name: "capacity", files: []string{f.evidenceDir}, check: func(t *testing.T, m *report.Model, p *browser.Page) {
			var checks int
			for _, ph := range m.Capacity.Phases {
				checks += len(ph.Checks)
			}
			var open int
			for _, ph := range m.Capacity.Phases {
				for _, c := range ph.Checks {
					if c.Outcome != "passed" {
						open++
					}
				}
			}
			rows, err := browser.Eval[int](p, `document.querySelectorAll('#checks-all tr').length`)
			if err != nil || rows != checks+1 || checks == 0 {
				t.Errorf("every-check table has %d rows (%v), want %d", rows, err, checks+1)
			}
			// Passed checks fold into one line; only the others are listed.
			rows, err = browser.Eval[int](p, `document.querySelectorAll('#checks tr').length`)
			if want := map[bool]int{true: open + 1, false: 0}[open > 0]; err != nil || rows != want {
				t.Errorf("checks table has %d rows (%v), want %d (the %d checks not passed)", rows, err, want, open)
			}
			line, err := browser.Eval[string](p, `document.getElementById('checks-folded').textContent`)
			if want := fmt.Sprintf("%d of %d checks passed", checks-open, checks); err != nil || !strings.HasPrefix(line, want) {
				t.Errorf("folded checks line %q (%v), want %q first", line, err, want)
			}
			// The verdict, then the headline, then the phases and checks.
			order, err := browser.Eval[bool](p, `(function(){var v=document.getElementById('verdict'),h=document.getElementById('headline'),ph=document.getElementById('phases');`+
				`return !!(v&&h&&ph) && !!(v.compareDocumentPosition(h)&Node.DOCUMENT_POSITION_FOLLOWING) && !!(h.compareDocumentPosition(ph)&Node.DOCUMENT_POSITION_FOLLOWING);})()`)
			if err != nil || !order {
				t.Errorf("the capacity page is not verdict, headline, phases in that order (%v)", err)
			}
			// The spike's 503s are the server's shedding by design: apart from the failures.
			checkRefusalTiles(t, tiles(t, p, false), m.Runs[0].Headline)
			for _, ph := range m.Capacity.Phases {
				if ph.Label == "" || ph.PlannedSecs <= 0 {
					t.Errorf("phase %s: label %q, planned %v s", ph.Name, ph.Label, ph.PlannedSecs)
				}
			}
			if len(m.Capacity.Phases) != 6 {
				t.Errorf("%d phases, want the rehearsal's 6", len(m.Capacity.Phases))
			}
			for i := 1; i < len(m.Capacity.Phases); i++ {
				if a, b := m.Capacity.Phases[i-1], m.Capacity.Phases[i]; b.Start < a.End || b.End <= b.Start {
					t.Errorf("phase %s spans %v..%v after %s's %v..%v", b.Name, b.Start, b.End, a.Name, a.Start, a.End)
				}
			}
		}},
		{name: "linkkeys", files: []string{f.linkkeys}, check: func(t *testing.T, m *report.Model, p *browser.Page) {
			r := m.Runs[0]
			if len(r.Connections) != 3 || len(r.CauseSeries) == 0 || r.Headline.Kind != "connect_handshake" {
				t.Errorf("connections %d, causes %d, kind %q: want attempted/established/failed, failure reasons, connect_handshake",
					len(r.Connections), len(r.CauseSeries), r.Headline.Kind)
			}
			var groups []string
			for _, g := range r.Server {
				groups = append(groups, g.Group)
			}
			if !slices.Contains(groups, "connections") || !slices.Contains(groups, "buffers") || !slices.Contains(groups, "memory") {
				t.Errorf("server groups %v: want connections, buffers and memory", groups)
			}
		}},
	}
	out := t.ArtifactDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, page := drawModel(t, c.files, c.opt)
			path := filepath.Join(out, c.name+".html")
			if err := os.WriteFile(path, page, 0o644); err != nil {
				t.Fatal(err)
			}
			want := expectCharts(m)
			for _, id := range []string{"throughput", "latency-" + m.Runs[0].Headline.Kind, "classes", "distribution"} {
				if _, ok := want[id]; !ok {
					t.Errorf("the %s model has no %s chart", c.name, id)
				}
			}
			p := checkPage(t, b, fileURL(path), want, filepath.Join(out, c.name+".png"))
			if c.check != nil {
				c.check(t, m, p)
			}
		})
	}
	fmt.Fprintf(os.Stderr, "report e2e: pages and screenshots in %s\n", out)
}
