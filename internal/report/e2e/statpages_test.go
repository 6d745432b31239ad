//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/browser"
	"github.com/loadproof/loadproof/internal/compare"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// keycastTrialer runs each trial of a search as a real open-model Keycast run against the
// reference server and keeps its result file in dir, as `loadproof search` does with subprocesses.
type keycastTrialer struct {
	url, usersPath, dir string
	users               []keycast.TestUser
}

func (k *keycastTrialer) Trial(ctx context.Context, v float64, step, trial int) (search.Trial, error) {
	res, err := keycastload.Run(ctx, keycastload.RunConfig{URL: k.url, Concurrency: 16, Duration: 2 * time.Second, Rate: v,
		Scenario: keycast.ScenarioWarmCache, Method: keycast.MethodGetPublicKey, Users: k.users, UsersFile: k.usersPath,
		ReportInterval: time.Second, HTTPTimeout: 2 * time.Second, Drain: time.Second, Seed: uint64(step*10 + trial)})
	if err != nil {
		return search.Trial{}, fmt.Errorf("trial at %v: %w", v, err)
	}
	name := search.TrialFile(step, trial)
	if err := keycastresult.Write(filepath.Join(k.dir, name), res); err != nil {
		return search.Trial{}, err
	}
	return search.Trial{Env: res.Envelope, File: name}, nil
}

// visibleText is the text of the element with id, or "" when it is missing or not laid out.
func visibleText(t *testing.T, p *browser.Page, id string) string {
	t.Helper()
	s, err := browser.Eval[string](p, `(function () { var e = document.getElementById(`+jsString(id)+`);
		if (!e) return ''; var r = e.getBoundingClientRect(), st = getComputedStyle(e);
		return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none' ? e.innerText : ''; })()`)
	if err != nil {
		t.Fatalf("reading #%s: %v", id, err)
	}
	return s
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestStatPagesInBrowser runs a real knee search against the Keycast reference server (each trial
// an open-model run of 2 s, two trials a step), draws its search page and a comparison of its
// first step's trials against its highest step's, and a refused comparison, and checks them in
// Chromium: the knee and its rule, every trial on the curves, each metric's verdict and why, the
// gate; no console errors, no requests; a screenshot of each.
func TestStatPagesInBrowser(t *testing.T) {
	b := needBrowser(t)
	dir := t.TempDir()
	srv, stop, err := startKeycast(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	setup, err := keycastload.Setup(ctx, keycastload.SetupConfig{URL: srv, Users: 4, Concurrency: 2, Mode: keycastload.ModeHTTP})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	usersPath := filepath.Join(dir, "users.json")
	if err := keycast.WriteUsersFile(usersPath, setup.File); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "search-bundle")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	slo, err := search.ParseSLO("p99<50ms,errors<1%,throughput>90%")
	if err != nil {
		t.Fatal(err)
	}
	cfg := search.Config{Vary: "rate", From: 40, To: 5000, Growth: 4, Resolution: 0.25, Trials: 2, SLO: slo, Resamples: 200, Seed: 5}
	start := time.Now()
	res, err := search.Run(ctx, cfg, &keycastTrialer{url: srv, usersPath: usersPath, dir: bundle, users: setup.File.Users})
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	res.Command = []string{"keycast", "run", "--url", srv, "--users-file", usersPath, "--duration", "2", "--method", "get-public-key"}
	if err := search.WriteBundle(bundle, res, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("search: %d steps, %d trials in %s; knee %v, first fail %v", len(res.Steps), res.TrialCount, time.Since(start).Round(time.Second), ptrText(res.Knee), ptrText(res.FirstFail))
	out := t.ArtifactDir()

	t.Run("search", func(t *testing.T) {
		// The page is a function of the bundle's search file alone.
		back, err := search.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(bundle, search.File)
		page, err := report.SearchPage(back, name, "")
		if err != nil {
			t.Fatal(err)
		}
		m, err := report.BuildSearchModel(back, name, "")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, "search.html")
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		p := checkPage(t, b, fileURL(path), nil, filepath.Join(out, "search.png"))
		knee := visibleText(t, p, "knee")
		switch {
		case back.Knee == nil:
			if !strings.Contains(knee, "No knee") {
				t.Errorf("no knee, but the page says %q", knee)
			}
		default:
			if !strings.HasPrefix(knee, "Knee: ") || !strings.Contains(knee, formatValue(*back.Knee)) {
				t.Errorf("knee %v, but the page says %q", *back.Knee, knee)
			}
			if back.FirstFail != nil && !strings.Contains(knee, "first fail "+formatValue(*back.FirstFail)) {
				t.Errorf("first fail %v, but the page says %q", *back.FirstFail, knee)
			}
			if n, err := browser.Eval[int](p, `document.querySelectorAll('#curve #knee-line').length`); err != nil || n != 1 {
				t.Errorf("the curve marks the knee %d times (%v), want once", n, err)
			}
		}
		if rule := visibleText(t, p, "knee-rule"); rule != "Rule: "+m.KneeRule || !strings.Contains(rule, back.Config.SLO.Text) {
			t.Errorf("knee rule %q, want %q", rule, "Rule: "+m.KneeRule)
		}
		if c := visibleText(t, p, "confidence"); c != "Confidence: "+back.Confidence.Statement {
			t.Errorf("confidence %q, the search says %q", c, back.Confidence.Statement)
		}
		// Every trial is a point on each curve it has a value for, and a row of the table.
		var p99s, tps int
		for _, pt := range m.Points {
			if !math.IsNaN(float64(pt.P99)) {
				p99s++
			}
			if !math.IsNaN(float64(pt.Throughput)) {
				tps++
			}
		}
		counts, err := browser.Eval[[]int](p, `[document.querySelectorAll('#curve circle.pt.p99').length,
			document.querySelectorAll('#tput circle.pt.tp').length, document.querySelectorAll('#search-trials tr').length - 1,
			document.querySelectorAll('#curve line.limit').length]`)
		if err != nil {
			t.Fatal(err)
		}
		if counts[0] != p99s || counts[1] != tps || counts[2] != back.TrialCount || counts[2] == 0 {
			t.Errorf("drawn: %d p99 points (want %d), %d throughput points (want %d), %d table rows (want %d)", counts[0], p99s, counts[1], tps, counts[2], back.TrialCount)
		}
		if counts[3] != 2 {
			t.Errorf("the curve draws %d SLO lines, want 2 (p99<50ms, errors<1%%)", counts[3])
		}
	})

	// The search's other endings, drawn from its own steps: the first value failed (no knee), and
	// the ceiling passed (no first fail).
	t.Run("search-ends", func(t *testing.T) {
		one := res.Steps[0].Value
		noKnee := *res
		noKnee.Steps, noKnee.Knee, noKnee.LastPass, noKnee.FirstFail = []search.Step{res.Steps[0]}, nil, nil, &one
		noKnee.Steps[0].Passed = false
		// The ceiling case does not lean on the real search having passed a step (on a busy
		// machine its first value can fail): every step passed, the last one is the knee.
		ceiling := *res
		ceiling.Steps = slices.Clone(res.Steps)
		for i := range ceiling.Steps {
			ceiling.Steps[i].Passed = true
		}
		top := ceiling.Steps[len(ceiling.Steps)-1].Value
		ceiling.Knee, ceiling.LastPass, ceiling.FirstFail = &top, &top, nil
		for _, c := range []struct {
			name string
			r    *search.Result
			want string
		}{{"search-no-knee", &noKnee, "No knee: the SLO failed at the first value"}, {"search-ceiling", &ceiling, "the ceiling (--to) passed"}} {
			page, err := report.SearchPage(c.r, c.name+".json", "")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(out, c.name+".html")
			if err := os.WriteFile(path, page, 0o644); err != nil {
				t.Fatal(err)
			}
			p := checkPage(t, b, fileURL(path), nil, filepath.Join(out, c.name+".png"))
			if got := visibleText(t, p, "knee"); !strings.Contains(got, c.want) {
				t.Errorf("%s: the page says %q, want %q", c.name, got, c.want)
			}
		}
	})

	t.Run("compare", func(t *testing.T) {
		// A: the first step's trials; B: the highest step's (more offered load).
		first, top := res.Steps[0], res.Steps[0]
		for _, st := range res.Steps {
			if st.Value > top.Value {
				top = st
			}
		}
		files := func(st search.Step) ([]string, []*result.Envelope) {
			var names []string
			var envs []*result.Envelope
			for _, tr := range st.Trials {
				p := filepath.Join(bundle, tr.File)
				e, err := search.ReadResultFile(p)
				if err != nil {
					t.Fatal(err)
				}
				names, envs = append(names, p), append(envs, e)
			}
			return names, envs
		}
		an, a := files(first)
		bn, bb := files(top)
		c, err := compare.Compare(a, bb, compare.Options{Seed: 11, Iterations: 1000})
		if err != nil {
			t.Fatal(err)
		}
		gates, _ := compare.ParseGate("throughput>-3%,p99<+500%")
		if err := c.ApplyGate(gates); err != nil {
			t.Fatal(err)
		}
		info := report.CompareInfo{FilesA: an, FilesB: bn, Command: "keycast run", Seed: 11}
		page, err := report.ComparePage(c, info)
		if err != nil {
			t.Fatal(err)
		}
		m, err := report.BuildCompareModel(c, info)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, "compare.html")
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		p := checkPage(t, b, fileURL(path), nil, filepath.Join(out, "compare.png"))
		type row struct{ Metric, Verdict, Why string }
		rows, err := browser.Eval[[]row](p, `Array.from(document.querySelectorAll('#cmp-metrics tr[data-metric]')).map(function (tr) {
			var v = tr.querySelector('td.verdict-cell'), w = tr.querySelector('td.why');
			return { Metric: tr.getAttribute('data-metric'), Verdict: v.getBoundingClientRect().height > 0 ? v.innerText : '', Why: w.innerText }; })`)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(m.Metrics) || len(rows) == 0 {
			t.Fatalf("%d rows drawn, the comparison has %d metrics", len(rows), len(m.Metrics))
		}
		for i, r := range rows {
			if r.Metric != m.Metrics[i].Name || r.Verdict != m.Metrics[i].Verdict || r.Why != m.Metrics[i].Why {
				t.Errorf("row %d: %+v, want %s %q %q", i, r, m.Metrics[i].Name, m.Metrics[i].Verdict, m.Metrics[i].Why)
			}
		}
		gate := visibleText(t, p, "cmp-gate")
		if want := map[bool]string{true: "Gate PASSED", false: "Gate FAILED"}[c.Gate.Passed]; !strings.HasPrefix(gate, want) {
			t.Errorf("gate card %q, want %s", gate, want)
		}
		// B offered at least twice A's load and held the SLO's throughput>90% of it: throughput rose
		// beyond doubt.
		if top.Value >= 2*first.Value && top.Passed && m.Metrics[0].Name == "throughput" && m.Metrics[0].Verdict != compare.Better {
			t.Errorf("B offered %v against A's %v and held 90%% of it, but throughput's verdict is %q (%s)", top.Value, first.Value, m.Metrics[0].Verdict, m.Metrics[0].Why)
		}
		t.Logf("compare: step %v (%d trials) against step %v: %d worse, %d better, %d no change, %d inconclusive", first.Value, len(a), top.Value, m.Worse, m.Better, m.NoChange, m.Inconclusive)
	})

	t.Run("refused", func(t *testing.T) {
		e, err := search.ReadResultFile(filepath.Join(bundle, res.Steps[0].Trials[0].File))
		if err != nil {
			t.Fatal(err)
		}
		bare := *e
		bare.Intervals = nil
		_, cerr := compare.Compare([]*result.Envelope{e}, []*result.Envelope{&bare}, compare.Options{Seed: 1})
		if cerr == nil {
			t.Fatal("a run without interval snapshots was compared")
		}
		page, err := report.RefusedComparePage(cerr.Error(), report.CompareInfo{FilesA: []string{"a.json"}, FilesB: []string{"bare.json"}, Command: "keycast run"})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, "compare-refused.html")
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		p := checkPage(t, b, fileURL(path), nil, filepath.Join(out, "compare-refused.png"))
		if got := visibleText(t, p, "cmp-refused"); !strings.Contains(got, "Comparison refused") || !strings.Contains(got, "no interval snapshots") {
			t.Errorf("refused card %q: want the refusal and its reason (%v)", got, cerr)
		}
	})
	fmt.Fprintf(os.Stderr, "stat pages e2e: pages and screenshots in %s\n", out)
}

func ptrText(p *float64) string {
	if p == nil {
		return "none"
	}
	return formatValue(*p)
}

// formatValue writes a value as the search page does (en-US grouping, at most three decimals).
func formatValue(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	intPart, frac, _ := strings.Cut(s, ".")
	var g []string
	for len(intPart) > 3 {
		g = append([]string{intPart[len(intPart)-3:]}, g...)
		intPart = intPart[:len(intPart)-3]
	}
	g = append([]string{intPart}, g...)
	out := strings.Join(g, ",")
	if frac != "" {
		out += "." + frac
	}
	return out
}
