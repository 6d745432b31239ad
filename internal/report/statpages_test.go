package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/compare"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/search"
)

// statData reads back the JSON a comparison or search page carries.
func statData(t *testing.T, page []byte, into any) {
	t.Helper()
	s := string(page)
	const open = `<script id="lp-data" type="application/json">`
	i := strings.Index(s, open)
	if i < 0 {
		t.Fatal("page has no data element")
	}
	j := strings.Index(s[i:], "</script>")
	if j < 0 {
		t.Fatal("page's data element is not closed")
	}
	if err := json.Unmarshal([]byte(s[i+len(open):i+j]), into); err != nil {
		t.Fatalf("page data: %v", err)
	}
}

// near compares a figure with its value as the page carries it (three decimals).
func near(got, want float64) bool { return math.Abs(got-want) <= 0.0005+1e-9*math.Abs(want) }

// checkSelfContained fails when a page could load or send anything.
func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	s := strings.ToLower(string(page))
	// The data may hold anything the files do (a target URL): it is JSON, never markup.
	if i := strings.Index(s, `<script id="lp-data"`); i >= 0 {
		if j := strings.Index(s[i:], "</script>"); j >= 0 {
			s = s[:i] + s[i+j:]
		}
	}
	for _, bad := range []string{"<script src", "<link", "@import", "https://", "fetch(", "xmlhttprequest", "<iframe", "<img"} {
		if strings.Contains(s, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	// The only URL is the SVG namespace, which names and loads nothing.
	if n, ns := strings.Count(s, "http://"), strings.Count(s, "http://www.w3.org/2000/svg"); n != ns {
		t.Errorf("page has %d http:// URLs besides the SVG namespace", n-ns)
	}
	if !strings.Contains(s, strings.ToLower(StaticCSP)) {
		t.Error("page lacks the static report's Content-Security-Policy")
	}
}

func TestStatPageAssetsCannotCloseTheirElement(t *testing.T) {
	for name, s := range map[string]string{"compare.js": compareJS, "search.js": searchJS, "statpages.js": statPagesJS, "statpages.css": statPagesCSS} {
		l := strings.ToLower(s)
		if strings.Contains(l, "</script") || strings.Contains(l, "</style") {
			t.Errorf("%s contains a closing </script or </style", name)
		}
	}
}

// synthRun is a run of n one-second intervals of about rate successes a second with latencies
// about lat; a share errShare of operations fail.
func synthRun(n int, rate float64, lat time.Duration, errShare float64, jitter int) *result.Envelope {
	e := &result.Envelope{Format: result.Format, Harness: "keycast", Command: "run", IntervalSecs: 1,
		Totals: map[string]int64{}, Histograms: map[string]*hist.Histogram{"latency": hist.New()}}
	e.StartedAt = time.Unix(1_800_000_000, 0).UTC()
	e.EndedAt = e.StartedAt.Add(time.Duration(n) * time.Second)
	for i := range n {
		ok := int64(rate) + int64((i*7+jitter)%11) - 5
		failed := int64(math.Round(float64(ok) * errShare))
		h := hist.New()
		for j := range 100 {
			h.Record(lat + time.Duration((j*13+i*3+jitter)%50)*lat/100)
		}
		iv := result.Interval{T: float64(i), Secs: 1, Counts: map[string]int64{"success": ok}, Latency: map[string]*hist.Histogram{"latency": h}}
		if failed > 0 {
			iv.Counts["server"] = failed
		}
		e.Histograms["latency"].Merge(h)
		for k, v := range iv.Counts {
			e.Totals[k] += v
		}
		e.Intervals = append(e.Intervals, iv)
	}
	return e
}

func TestCompareModelVerdictsAndWhy(t *testing.T) {
	var a, b []*result.Envelope
	for i := range 3 {
		a = append(a, synthRun(10, 1000, 5*time.Millisecond, 0, i))
		// B: the same throughput, latency twice as high.
		b = append(b, synthRun(10, 1000, 10*time.Millisecond, 0, i+3))
	}
	c, err := compare.Compare(a, b, compare.Options{Seed: 7, Iterations: 400})
	if err != nil {
		t.Fatal(err)
	}
	gates, err := compare.ParseGate("throughput>-3%,p99<+5%")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyGate(gates); err != nil {
		t.Fatal(err)
	}
	page, err := ComparePage(c, CompareInfo{FilesA: []string{"a1.json", "a2.json", "a3.json"}, FilesB: []string{"b1.json", "b2.json", "b3.json"}, Command: "keycast run", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page)
	var m CompareModel
	statData(t, page, &m)
	if len(m.Metrics) != len(c.Metrics) || m.RunsA != 3 || m.RunsB != 3 || m.Seed != "7" || m.Title != "loadproof compare: keycast run" {
		t.Fatalf("model: %d metrics of %d, runs %d/%d, seed %q, title %q", len(m.Metrics), len(c.Metrics), m.RunsA, m.RunsB, m.Seed, m.Title)
	}
	if m.Better+m.Worse+m.NoChange+m.Inconclusive != len(m.Metrics) {
		t.Errorf("counts %d+%d+%d+%d do not add up to %d metrics", m.Better, m.Worse, m.NoChange, m.Inconclusive, len(m.Metrics))
	}
	rows := map[string]CompareRow{}
	for _, r := range m.Metrics {
		rows[r.Name] = r
	}
	p99 := rows["p99:latency"]
	if p99.Verdict != compare.Worse || !strings.Contains(p99.Why, "above zero") || !strings.Contains(p99.Why, "lower is better") {
		t.Errorf("p99: verdict %q, why %q: want worse, the interval above zero", p99.Verdict, p99.Why)
	}
	if p99.Allowance == nil || !p99.Allowance.Failed || p99.Allowance.Op != "<" || p99.Allowance.Limit != 5 {
		t.Errorf("p99 allowance %+v: want p99<+5%% failed", p99.Allowance)
	}
	tp := rows["throughput"]
	if tp.Verdict != compare.NoChange || !strings.Contains(tp.Why, "holds zero") {
		t.Errorf("throughput: verdict %q, why %q: want no change, the interval holding zero", tp.Verdict, tp.Why)
	}
	if tp.Allowance == nil || tp.Allowance.Failed {
		t.Errorf("throughput allowance %+v: want held", tp.Allowance)
	}
	// Error rates were zero on both sides: no change, said as such.
	er := rows["error_rate"]
	if er.Verdict != compare.NoChange || !strings.Contains(er.Why, "zero on both sides") {
		t.Errorf("error_rate: verdict %q, why %q: want no change, zero on both sides", er.Verdict, er.Why)
	}
	if m.Gate == nil || m.Gate.Passed || len(m.Gate.Failed) != 1 || !strings.Contains(m.Gate.Failed[0], "p99:latency") {
		t.Errorf("gate %+v: want failed on p99:latency alone", m.Gate)
	}
	// The verdicts are the comparison's, metric for metric (inconclusive where it drew no interval).
	for i, mt := range c.Metrics {
		want := mt.Verdict
		if math.IsNaN(mt.Low) {
			want = Inconclusive
		}
		if m.Metrics[i].Verdict != want || !near(float64(m.Metrics[i].Change), mt.Change) && !math.IsNaN(mt.Change) {
			t.Errorf("row %s: verdict %q change %v, comparison %q %v", mt.Name, m.Metrics[i].Verdict, m.Metrics[i].Change, want, mt.Change)
		}
	}
}

func TestCompareModelOneRunASideCarriesTheNote(t *testing.T) {
	c, err := compare.Compare([]*result.Envelope{synthRun(8, 500, 3*time.Millisecond, 0.01, 0)}, []*result.Envelope{synthRun(8, 500, 3*time.Millisecond, 0.01, 1)}, compare.Options{Seed: 3, Iterations: 200})
	if err != nil {
		t.Fatal(err)
	}
	m, err := BuildCompareModel(c, CompareInfo{Title: "one a side"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Notes) == 0 || !strings.Contains(m.Notes[0], "run-to-run noise") {
		t.Errorf("notes %q: want the no-noise-model note", m.Notes)
	}
	if m.Title != "one a side" || m.Gate != nil {
		t.Errorf("title %q, gate %+v", m.Title, m.Gate)
	}
}

// TestCompareModelHostileBounded: a crafted comparison (thousands of metrics, huge and control-laden
// names, markup) costs a bounded page whose data cannot leave its script element.
func TestCompareModelHostileBounded(t *testing.T) {
	c := &compare.Comparison{RunsA: 2, RunsB: 2, Confidence: 0.95, Iterations: 100}
	long := strings.Repeat("x", 100_000)
	for i := range 5000 {
		c.Metrics = append(c.Metrics, compare.Metric{Name: fmt.Sprintf("p99:%s</script><script>alert(1)</script>\x1b[31m%d", long, i),
			Unit: "ms", A: 1, B: 2, Change: 100, Low: 50, High: 150, Verdict: "bogus"})
	}
	for range 1000 {
		c.Notes = append(c.Notes, long)
	}
	page, err := ComparePage(c, CompareInfo{Title: long, FilesA: []string{long}, FilesB: []string{long}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) > 1<<20 {
		t.Errorf("page is %d bytes: a crafted comparison must cost a bounded page", len(page))
	}
	if strings.Count(string(page), "</script>") != 3 {
		t.Error("the data closed its script element")
	}
	var m CompareModel
	statData(t, page, &m)
	if len(m.Metrics) != MaxCompareRows || len(m.Notes) > maxPageList+1 || !strings.Contains(m.Notes[len(m.Notes)-1], "more metrics are not drawn") {
		t.Errorf("%d rows, %d notes (last %.80q)", len(m.Metrics), len(m.Notes), m.Notes[len(m.Notes)-1])
	}
	if r := m.Metrics[0]; r.Verdict != compare.NoChange || len(r.Name) > 4*maxPageText || strings.Contains(r.Name, "\x1b") {
		t.Errorf("row 0: verdict %q, name of %d bytes", r.Verdict, len(r.Name))
	}
}

func TestCompareModelInconclusiveWithoutInterval(t *testing.T) {
	c := &compare.Comparison{RunsA: 3, RunsB: 3, Confidence: 0.99, Iterations: 100, Metrics: []compare.Metric{
		{Name: "p99:resumed", Unit: "ms", A: 0, B: 4, Change: math.NaN(), Low: math.NaN(), High: math.NaN(), Verdict: compare.NoChange},
		{Name: "throughput", Unit: "/s", Higher: true, A: 100, B: 80, Change: -20, Low: -25, High: -15, Verdict: compare.Worse},
	}}
	m, err := BuildCompareModel(c, CompareInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Metrics[0]; r.Verdict != Inconclusive || !strings.Contains(r.Why, "no interval") || m.Inconclusive != 1 {
		t.Errorf("no interval: verdict %q, why %q, %d inconclusive", r.Verdict, r.Why, m.Inconclusive)
	}
	if r := m.Metrics[1]; r.Verdict != compare.Worse || !strings.Contains(r.Why, "99% interval [-25.00%, -15.00%] lies below zero (higher is better)") || m.Worse != 1 {
		t.Errorf("worse: verdict %q, why %q", r.Verdict, r.Why)
	}
}

func TestRefusedComparePageSaysWhy(t *testing.T) {
	page, err := RefusedComparePage("compare: run 2 is linkkeys connections, run 1 is keycast run: compare runs of one command", CompareInfo{FilesA: []string{"a.json"}, FilesB: []string{"b.json"}})
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page)
	var m CompareModel
	statData(t, page, &m)
	if !strings.Contains(m.Refused, "compare runs of one command") || len(m.Metrics) != 0 || m.RunsA != 1 {
		t.Errorf("refused model %+v", m)
	}
}

// stepServer is a deterministic server for a search: below knee a trial measures 4 ms; above it
// 40 ms with errShare of requests failing.
type stepServer struct {
	knee, errShare float64
}

func (s stepServer) Trial(_ context.Context, v float64, step, trial int) (search.Trial, error) {
	if v <= s.knee {
		return search.Trial{Env: synthRun(5, v, 4*time.Millisecond, 0, trial)}, nil
	}
	return search.Trial{Env: synthRun(5, v, 40*time.Millisecond, s.errShare, trial)}, nil
}

func runSearch(t testing.TB, cfg search.Config, s stepServer) *search.Result {
	t.Helper()
	res, err := search.Run(context.Background(), cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	res.Command = []string{"keycast", "run", "--url", "http://127.0.0.1:1", "--duration", "5"}
	// Through the file form, as report reads it.
	b, err := res.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := search.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func mustSLO(t testing.TB, s string) *search.SLO {
	t.Helper()
	slo, err := search.ParseSLO(s)
	if err != nil {
		t.Fatal(err)
	}
	return slo
}

func TestSearchModelKneeBracketAndEveryTrial(t *testing.T) {
	res := runSearch(t, search.Config{Vary: "rate", From: 100, To: 64000, Growth: 2, Resolution: 0.05, Trials: 3, Integer: true,
		SLO: mustSLO(t, "p99<20ms,errors<0.5%"), Resamples: 100, Seed: 1}, stepServer{knee: 900, errShare: 0.02})
	page, err := SearchPage(res, "search.json", "")
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page)
	var m SearchModel
	statData(t, page, &m)
	if res.Knee == nil || res.FirstFail == nil || float64(m.Knee) != *res.Knee || float64(m.FirstFail) != *res.FirstFail || float64(m.LastPass) != *res.LastPass {
		t.Fatalf("knee %v bracket [%v, %v): the search says %v [%v, %v)", m.Knee, m.LastPass, m.FirstFail, res.Knee, res.LastPass, res.FirstFail)
	}
	if !(float64(m.Knee) <= 900 && float64(m.FirstFail) > 900) {
		t.Errorf("the bracket [%v, %v) does not hold the server's knee 900", m.Knee, m.FirstFail)
	}
	if m.StepCount != len(res.Steps) || m.TrialCount != res.TrialCount || len(m.Points) != res.TrialCount || len(m.Steps) != len(res.Steps) {
		t.Errorf("%d steps, %d points of %d trials", len(m.Steps), len(m.Points), res.TrialCount)
	}
	if m.Confidence != res.Confidence.Statement || m.Confidence == "" || m.SLO != "p99<20ms,errors<0.5%" || m.XLabel != xLabels["rate"] {
		t.Errorf("confidence %q, SLO %q, x label %q", m.Confidence, m.SLO, m.XLabel)
	}
	if want := "the knee is the highest rate at which all 3 of its trials hold the SLO p99<20ms,errors<0.5%; the search grows it ×2 a step from 100 until a step fails (or 64000 passes), then bisects the bracket until first fail / last pass is within 5%"; m.KneeRule != want {
		t.Errorf("knee rule %q, want %q", m.KneeRule, want)
	}
	if strings.Join(m.BrokeFirst, ",") != strings.Join(res.BrokeFirst, ",") || len(m.BrokeFirst) == 0 {
		t.Errorf("broke first %q, the search says %q", m.BrokeFirst, res.BrokeFirst)
	}
	// The SLO's limits, in the units of their axes: milliseconds and shares.
	if len(m.Limits) != 2 || m.Limits[0].Metric != search.MetricLatency || m.Limits[0].Limit != 20 || m.Limits[1].Metric != search.MetricErrors || math.Abs(float64(m.Limits[1].Limit)-0.005) > 1e-12 {
		t.Errorf("limits %+v: want p99 20 ms and errors 0.005", m.Limits)
	}
	// Every point is its trial, and each step's line is its trials' median.
	i := 0
	for si, st := range res.Steps {
		for _, tr := range st.Trials {
			p := m.Points[i]
			i++
			if p.Step != st.Index || p.Trial != tr.Trial || float64(p.Value) != st.Value || p.Held != tr.Held || p.Ops != tr.Total {
				t.Fatalf("point %+v is not step %d trial %d", p, st.Index, tr.Trial)
			}
			if !near(float64(p.P99), tr.P99Ms) || !near(float64(p.Throughput), float64(tr.Success)/tr.Secs) {
				t.Errorf("point p99 %v throughput %v, trial %v and %v/%v", p.P99, p.Throughput, tr.P99Ms, tr.Success, tr.Secs)
			}
			if !tr.Held && len(p.Broke) == 0 {
				t.Errorf("step %d trial %d broke the SLO but the point says not what", st.Index, tr.Trial)
			}
		}
		var p99s []float64
		for _, tr := range st.Trials {
			p99s = append(p99s, tr.P99Ms)
		}
		if got, want := float64(m.Steps[si].P99), median(p99s); !near(got, want) {
			t.Errorf("step %d median p99 %v, want %v", st.Index, got, want)
		}
	}
}

func TestSearchModelEnds(t *testing.T) {
	// The ceiling passes: a knee with no first fail.
	res := runSearch(t, search.Config{Vary: "count", From: 100, To: 300, Growth: 2, Resolution: 0.05, Trials: 1, Integer: true,
		SLO: mustSLO(t, "failed<1%"), Resamples: 100, Seed: 1}, stepServer{knee: 1e9})
	m, err := BuildSearchModel(res, "held.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if float64(m.Knee) != 300 || !math.IsNaN(float64(m.FirstFail)) || m.XLabel != xLabels["count"] || m.Title != "loadproof search: the knee of count" {
		t.Errorf("ceiling: knee %v, first fail %v, x %q, title %q", m.Knee, m.FirstFail, m.XLabel, m.Title)
	}
	// The first value fails: no knee.
	res = runSearch(t, search.Config{Vary: "rate", From: 100, To: 300, Growth: 2, Resolution: 0.05, Trials: 2, Integer: true,
		SLO: mustSLO(t, "p99<20ms"), Resamples: 100, Seed: 1}, stepServer{knee: 50})
	m, err = BuildSearchModel(res, "none.json", "no knee")
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(m.Knee)) || float64(m.FirstFail) != 100 || len(m.Points) != 2 || m.Title != "no knee" {
		t.Errorf("no knee: knee %v, first fail %v, %d points", m.Knee, m.FirstFail, len(m.Points))
	}
}

// TestSearchModelHostileBounded: the largest search file the parser takes costs a bounded page.
func TestSearchModelHostileBounded(t *testing.T) {
	res := &search.Result{Format: search.Format, Config: search.Config{Vary: "rate\x1b]0;x\a", From: 1, To: 10, Trials: 100,
		SLO: &search.SLO{Text: strings.Repeat("p99<1ms,", 500)}}, Confidence: search.Confidence{Statement: strings.Repeat("y", 1<<20)}}
	for i := range 5000 {
		res.Config.SLO.Terms = append(res.Config.SLO.Terms, search.Term{Text: "p99<1ms", Metric: search.MetricLatency, Limit: 1})
		_ = i
	}
	for s := range 1000 {
		st := search.Step{Index: s + 1, Phase: "grow", Value: float64(s + 1), Held: 1, Passed: true}
		for tr := range 100 {
			st.Trials = append(st.Trials, search.TrialSummary{Trial: tr + 1, Held: true, Total: 10, Success: 10, Secs: 1, P50Ms: 1, P99Ms: 2,
				GeneratorLimited: []string{strings.Repeat("z", 10000)}})
		}
		res.Steps = append(res.Steps, st)
	}
	page, err := SearchPage(res, strings.Repeat("n", 100000), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page) > 8<<20 {
		t.Errorf("page is %d bytes", len(page))
	}
	var m SearchModel
	statData(t, page, &m)
	if len(m.Points) != MaxSearchPoints || m.Omitted != 100*1000-MaxSearchPoints || len(m.Limits) != maxPageList || strings.Contains(m.Vary, "\x1b") {
		t.Errorf("%d points, %d omitted, %d limits, vary %q", len(m.Points), m.Omitted, len(m.Limits), m.Vary)
	}
	// A knee that is no positive number is refused.
	bad := -3.0
	res.Knee = &bad
	if _, err := BuildSearchModel(res, "bad.json", ""); err == nil || !strings.Contains(err.Error(), "the knee -3") {
		t.Errorf("negative knee: %v", err)
	}
	res.Knee = nil
	// A value that is no positive number is refused with the step that holds it.
	res.Steps[3].Value = math.Inf(1)
	if _, err := BuildSearchModel(res, "bad.json", ""); err == nil || !strings.Contains(err.Error(), "step 4") {
		t.Errorf("infinite value: %v", err)
	}
}

// FuzzSearchPage: whatever search file the parser accepts draws a page (or a clear error) whose
// data stays inside its script element.
func FuzzSearchPage(f *testing.F) {
	ok := `{"format":"loadproof.search/v1","config":{"vary":"rate","from":100,"to":400,"growth":2,"resolution":0.05,"trials":1,` +
		`"slo":{"text":"p99<20ms","terms":[{"text":"p99<20ms","metric":"latency","quantile":99,"kind":"latency","below":true,"inclusive":false,"limit":20}]},` +
		`"resamples":10,"seed":1,"integer":true},"started_at":"2026-01-01T00:00:00Z","ended_at":"2026-01-01T00:01:00Z",` +
		`"steps":[{"index":1,"phase":"grow","value":100,"passed":true,"held_share":1,"trials":[{"trial":1,"exit_code":0,"held":true,"total":500,"success":500,"refused":0,"secs":5,"p50_ms":3,"p99_ms":9}]}],` +
		`"knee":100,"last_pass":100,"confidence":{"resamples":10,"statement":"s"},"trial_count":1,"stopped":"ceiling"}`
	f.Add([]byte(ok))
	f.Add([]byte(strings.Replace(ok, `"value":100`, `"value":-1`, 1)))
	f.Add([]byte(strings.Replace(ok, `"p99_ms":9`, `"p99_ms":1e308`, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := search.Parse(b)
		if err != nil {
			return
		}
		page, err := SearchPage(r, "fuzz.json", "")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error without the file's name: %v", err)
			}
			return
		}
		if strings.Count(string(page), "</script>") != 3 {
			t.Fatal("the data closed its script element")
		}
		var m SearchModel
		statData(t, page, &m)
	})
}

// TestStatPagesShareTheirDOMHelpers: the comparison and search scripts take el, svg, setAttrs
// and isNum from the one shared asset (statpages.js), which each page inlines before its script.
func TestStatPagesShareTheirDOMHelpers(t *testing.T) {
	for name, s := range map[string]string{"compare.js": compareJS, "search.js": searchJS} {
		for _, own := range []string{"function el(", "function svg(", "function setAttrs(", "function isNum(", "createElementNS("} {
			if strings.Contains(s, own) {
				t.Errorf("%s defines its own %s: use lpDOM (statpages.js)", name, own)
			}
		}
		if !strings.Contains(s, "lpDOM.el") {
			t.Errorf("%s does not take its helpers from lpDOM", name)
		}
	}
	page, err := statPage("t", map[string]int{}, compareJS)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	dom, app := strings.Index(s, `<script id="lp-stat-dom">`), strings.Index(s, `<script id="lp-app">`)
	if dom < 0 || app < 0 || dom > app || !strings.Contains(s, statPagesJS) {
		t.Errorf("the shared helpers are not inlined before the page's script (at %d, script at %d)", dom, app)
	}
}
