package report

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// handshakeEnvelope is a handshake-bench-shaped run of n intervals of secs seconds: every attempt
// timed as attempt and, when ok, as connect_handshake too. failEvery > 0 fails every failEvery-th
// attempt (timed as attempt only).
func handshakeEnvelope(n int, secs float64, perIv int, failEvery int) *result.Envelope {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env := &result.Envelope{Format: result.Format, Harness: "linkkeys", Command: "handshake-bench", Target: "127.0.0.1:1",
		StartedAt: start, EndedAt: start.Add(time.Duration(float64(n) * secs * float64(time.Second))), IntervalSecs: secs,
		Classes:    []string{"success", "network"},
		Histograms: map[string]*hist.Histogram{"attempt": hist.New(), "connect_handshake": hist.New()}, Totals: map[string]int64{}}
	for i := range n {
		iv := result.Interval{T: float64(i) * secs, Secs: secs, Counts: map[string]int64{},
			Latency: map[string]*hist.Histogram{"attempt": hist.New(), "connect_handshake": hist.New()}}
		for k := range perIv {
			us := int64(300 + 37*k + 11*i)
			iv.Latency["attempt"].RecordMicros(us)
			if failEvery > 0 && k%failEvery == 0 {
				iv.Counts["network"]++
				continue
			}
			iv.Latency["connect_handshake"].RecordMicros(us)
			iv.Counts["success"]++
		}
		for k, h := range iv.Latency {
			env.Histograms[k].Merge(h)
		}
		for k, v := range iv.Counts {
			env.Totals[k] += v
		}
		env.Intervals = append(env.Intervals, iv)
	}
	return env
}

func kinds(rv *RunView) (lat, dist []string) {
	for _, l := range rv.Latency {
		lat = append(lat, l.Kind)
	}
	for _, d := range rv.Dist {
		dist = append(dist, d.Kind)
	}
	return lat, dist
}

// TestIdenticalLatencyKindsDrawnOnce: when every attempt succeeded, attempt and connect_handshake
// are the same histogram; the page draws it once, under the success kind, naming the other. When
// some attempts failed the two differ and both are drawn.
func TestIdenticalLatencyKindsDrawnOnce(t *testing.T) {
	env := handshakeEnvelope(5, 1, 40, 0)
	rv := runView("a", env, []part{{env: env}}, nil, nil)
	lat, dist := kinds(rv)
	if !slices.Equal(lat, []string{"connect_handshake"}) || !slices.Equal(dist, []string{"connect_handshake"}) {
		t.Fatalf("latency kinds %v, distributions %v: want connect_handshake once", lat, dist)
	}
	if !slices.Equal(rv.Latency[0].Also, []string{"attempt"}) || !slices.Equal(rv.Dist[0].Also, []string{"attempt"}) {
		t.Errorf("also %v / %v, want [attempt]", rv.Latency[0].Also, rv.Dist[0].Also)
	}
	if rv.Headline.Kind != "connect_handshake" {
		t.Errorf("headline kind %q", rv.Headline.Kind)
	}

	env = handshakeEnvelope(5, 1, 40, 4)
	rv = runView("b", env, []part{{env: env}}, nil, nil)
	lat, dist = kinds(rv)
	slices.Sort(lat)
	slices.Sort(dist)
	if !slices.Equal(lat, []string{"attempt", "connect_handshake"}) || !slices.Equal(dist, lat) {
		t.Errorf("latency kinds %v, distributions %v: with failures both kinds differ and are drawn", lat, dist)
	}
	for _, l := range rv.Latency {
		if len(l.Also) > 0 {
			t.Errorf("%s also %v, want none", l.Kind, l.Also)
		}
	}
}

// TestMergedTailRateUsesItsLength: a short last interval folded into the one before is one row
// whose throughput is its operations over the merged length, and a server counter growing at a
// steady rate draws that rate in it (not twice it: the growth of two samples over one interval).
func TestMergedTailRateUsesItsLength(t *testing.T) {
	const perSec = 200.0
	for _, secs := range []float64{1, 0.1} {
		env := handshakeEnvelope(6, secs, int(perSec*secs), 0)
		// The engine samples the server when an interval closes and attaches the sample to the next
		// one (the last interval's sample is taken after the load): counter = perSec × sample time.
		for i := range env.Intervals {
			iv := &env.Intervals[i]
			at := iv.T
			if i == len(env.Intervals)-1 {
				iv.Secs = secs / 5 // the run's end cut the last interval short
				at = iv.T + iv.Secs
				for k, h := range iv.Latency {
					h.Reset()
					h.RecordMicros(400)
					iv.Latency[k] = h
				}
				iv.Counts = map[string]int64{"success": int64(perSec * iv.Secs)}
			}
			iv.Server = map[string]float64{"handshakes_total": perSec * at}
		}
		rv := runView("a", env, []part{{env: env}}, nil, nil)
		if len(rv.T) != 5 {
			t.Fatalf("interval %v: %d rows, want the short tail folded into 5", secs, len(rv.T))
		}
		if got, want := rv.T[4], 5*secs+secs/5; math.Abs(got-want) > 1e-9 {
			t.Errorf("interval %v: last row ends at %v, want %v", secs, got, want)
		}
		if thr := rv.Throughput[4]; math.Abs(thr-perSec) > perSec*0.01 {
			t.Errorf("interval %v: merged row throughput %v/s, want %v/s (operations over the merged length)", secs, thr, perSec)
		}
		var rates nums
		for _, g := range rv.Server {
			for _, s := range g.Series {
				if s.Name == "handshakes_total" {
					rates = s.Values
				}
			}
		}
		if len(rates) != 5 {
			t.Fatalf("interval %v: handshakes_total drawn as %v", secs, rates)
		}
		for i, v := range rates[1:] {
			if math.Abs(v-perSec) > perSec*0.01 {
				t.Errorf("interval %v: row %d server rate %v/s, want %v/s", secs, i+1, v, perSec)
			}
		}
	}
}

// TestCombinedOpensOnSummary: a combined page starts with a summary tab, one row per report with
// its verdict, key figure and warnings; refusals by design are a warning of their own, not
// failures; every tab is a #tab=NAME link, names unique.
func TestCombinedOpensOnSummary(t *testing.T) {
	env := handshakeEnvelope(4, 1, 50, 0)
	env.Classes = append(env.Classes, result.ClassRefused)
	for i := range env.Intervals {
		env.Intervals[i].Counts[result.ClassRefused] = 300
		env.Totals[result.ClassRefused] += 300
	}
	lk := must(HTML([]Source{{"lk.json", encode(t, env)}}, HTMLOptions{Title: "handshakes"}))
	failing := synthResults(3, 40)
	kc := must(HTML([]Source{{"kc.json", encode(t, failing)}}, HTMLOptions{}))
	page, err := Combined("demo", []Part{{"LinkKeys handshake-bench", lk}, {"Keycast run", kc}, {"Keycast run", kc}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	nav := s[strings.Index(s, "<nav>"):strings.Index(s, "</nav>")]
	for _, want := range []string{`href="#tab=summary"`, `href="#tab=linkkeys-handshake-bench"`, `href="#tab=keycast-run"`, `href="#tab=keycast-run-2"`} {
		if !strings.Contains(nav, want) {
			t.Errorf("nav lacks %s: %s", want, nav)
		}
	}
	if strings.Index(nav, "#tab=summary") > strings.Index(nav, "#tab=linkkeys") {
		t.Error("the summary tab is not first")
	}
	if strings.Count(s, "<iframe ") != 3 || strings.Count(s, `<tr><td><a href="#tab=`) != 3 {
		t.Errorf("want 3 frames and 3 summary rows")
	}
	m := pageData(t, lk)
	row := Summarize("lk", m)
	h := m.Runs[0].Headline
	if row.Verdict != "ok" || !row.OK || h.Failures != 0 || h.Refused != 1200 {
		t.Errorf("limiter-heavy run: verdict %q ok %v, headline failures %d refused %d; want ok, 0 failures, 1,200 refused",
			row.Verdict, row.OK, h.Failures, h.Refused)
	}
	if !strings.Contains(row.Key, "50.0 handshakes/s") || len(row.Warnings) != 1 || !strings.HasPrefix(row.Warnings[0], "refused by design: 1,200") {
		t.Errorf("key %q warnings %q: want 50.0 handshakes/s and one refusal warning", row.Key, row.Warnings)
	}
	kr := Summarize("kc", pageData(t, kc))
	if kr.OK || kr.Verdict != "failures" || !slices.ContainsFunc(kr.Warnings, func(w string) bool { return strings.HasPrefix(w, "failures: ") }) {
		t.Errorf("a run with network failures: %+v", kr)
	}
	odd, err := Combined("x", []Part{{"not a report", []byte("<html></html>")}})
	if err != nil || !strings.Contains(string(odd), "no data") || !strings.Contains(string(odd), "has no data element") {
		t.Errorf("a part that is no report page: %v; want its tab with a row saying why", err)
	}
}

// FuzzPageModel: reading a page's model back never panics and fails with a message on anything
// but a page's data element holding a model.
func FuzzPageModel(f *testing.F) {
	f.Add([]byte(`<script id="lp-data" type="application/json">{"title":"x","runs":[]}</script>`))
	f.Add([]byte(`<script id="lp-data" type="application/json">{"title":`))
	f.Add([]byte(`<html></html>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := PageModel(b)
		if (m == nil) == (err == nil) {
			t.Fatalf("model %v and error %v", m, err)
		}
		if err == nil {
			Summarize("fuzz", m)
		}
	})
}

// TestPhaseLabelsWithoutCommonPrefix: band labels drop the prefix all phase names share, cut at a
// separator; a name that would be left empty keeps its whole name.
func TestPhaseLabelsWithoutCommonPrefix(t *testing.T) {
	for _, c := range []struct{ names, want []string }{
		{[]string{"kc-capacity-warmup", "kc-capacity-steady", "kc-capacity-spike"}, []string{"warmup", "steady", "spike"}},
		{[]string{"step-10", "step-11", "step-12"}, []string{"10", "11", "12"}},
		{[]string{"steady", "spike"}, []string{"steady", "spike"}},
		{[]string{"load", "load-2"}, []string{"load", "load-2"}}, // the prefix is a whole name: kept
		{[]string{"only-one"}, []string{"only-one"}},
	} {
		var ps []*PhaseView
		for _, n := range c.names {
			ps = append(ps, &PhaseView{Name: n})
		}
		labelPhases(ps)
		var got []string
		for _, p := range ps {
			got = append(got, p.Label)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: labels %q, want %q", c.names, got, c.want)
		}
	}
}
