//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/report"
)

// intText writes a count as the page does (en-US thousands separators).
func intText(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// tiles reads the headline tiles of the page (or of the frame that is shown): label -> value.
func tiles(t *testing.T, p *browser.Page, inFrame bool) map[string]string {
	t.Helper()
	doc := `document`
	if inFrame {
		doc = `document.querySelector('iframe.on').contentDocument`
	}
	got, err := browser.Eval[map[string]string](p, `(function(){var o={};`+doc+`.querySelectorAll('#headline .fig').forEach(function(f){o[f.querySelector('.l').textContent]=f.querySelector('.v').textContent;});return o;})()`)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkRefusalTiles: the headline tiles show the refusals by design apart, and the failures
// without them.
func checkRefusalTiles(t *testing.T, got map[string]string, h report.Headline) {
	t.Helper()
	if h.Refused == 0 {
		t.Fatalf("the run refused nothing (headline %+v): it cannot show refusals apart", h)
	}
	if got["Failures"] != intText(h.Failures) {
		t.Errorf("Failures tile %q, want %s (refusals by design are not failures)", got["Failures"], intText(h.Failures))
	}
	if r := got["Refused by design"]; r != intText(h.Refused) {
		t.Errorf("Refused by design tile %q, want %s", r, intText(h.Refused))
	}
	if h.Failures+h.Refused+h.Succeeded != h.Operations {
		t.Errorf("headline %+v: succeeded, refused and failures do not add up to the operations", h)
	}
}

// TestCombinedPageTabs draws a combined page (what `loadproof demo` writes) of real runs: it opens
// on the summary, every tab opens from its #tab=NAME link, and the capacity run's shedding (the
// server's 503s by design) is shown apart from failures in the summary and in the headline tiles.
// A screenshot of every tab is kept.
func TestCombinedPageTabs(t *testing.T) {
	b := needBrowser(t)
	f := getFixtures(t)
	out := t.ArtifactDir()
	type src struct{ name, file, tab string }
	srcs := []src{{"Keycast run", f.keycastA, "keycast-run"}, {"Capacity profile", f.evidenceDir, "capacity-profile"},
		{"LinkKeys connections", f.linkkeys, "linkkeys-connections"}}
	var parts []report.Part
	models := map[string]*report.Model{}
	for _, s := range srcs {
		m, page := drawModel(t, []string{s.file}, report.HTMLOptions{})
		models[s.tab] = m
		parts = append(parts, report.Part{Name: s.name, Page: page})
	}
	page, err := report.Combined("loadproof e2e", parts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "combined.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	tabs := []string{"", "summary"}
	for _, s := range srcs {
		tabs = append(tabs, s.tab)
	}
	for _, tab := range tabs {
		t.Run("tab="+tab, func(t *testing.T) {
			url := fileURL(path)
			want := tab
			if tab == "" {
				want = "summary" // no #tab: the summary first
			} else {
				url += "#tab=" + tab
			}
			p, err := b.Open(url, fileURL(path), "about:")
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ready := fmt.Sprintf(`document.body && document.body.getAttribute('data-tab') === %q`, want)
			if want != "summary" {
				ready += ` && (function(){var f=document.querySelector('iframe.on');return !!(f && f.contentDocument && f.contentDocument.body && f.contentDocument.body.getAttribute('data-rendered') >= '1');})()`
			}
			if err := p.Wait(ready, 90*time.Second); err != nil {
				t.Fatalf("%v; console %q", err, p.Errors())
			}
			if want == "summary" {
				rows, err := browser.Eval[[]string](p, `Array.from(document.querySelectorAll('#summary tr')).slice(1).map(function(r){return r.textContent;})`)
				if err != nil || len(rows) != len(srcs) {
					t.Fatalf("summary rows %q (%v), want %d", rows, err, len(srcs))
				}
				h := models["capacity-profile"].Runs[0].Headline
				if !strings.Contains(rows[1], "refused by design: "+intText(h.Refused)) {
					t.Errorf("capacity summary row %q does not show the %d refusals apart", rows[1], h.Refused)
				}
				if h.Failures == 0 && strings.Contains(rows[1], "failures:") {
					t.Errorf("capacity summary row %q counts failures where the headline has none", rows[1])
				}
			}
			if want == "capacity-profile" {
				checkRefusalTiles(t, tiles(t, p, true), models[want].Runs[0].Headline)
			}
			if errs := p.Errors(); len(errs) > 0 {
				t.Errorf("console errors: %q", errs)
			}
			if reqs := p.Requests(); len(reqs) > 0 {
				t.Errorf("the page requested %q", reqs)
			}
			if err := p.Screenshot(filepath.Join(out, "combined-"+want+".png")); err != nil {
				t.Error(err)
			}
		})
	}
}
