package search

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// fakeServer is a deterministic server model: below Knee every request takes 5 ms; above it 50 ms
// and ErrShare of requests fail. FlakyAt makes one trial of that value fail.
type fakeServer struct {
	Knee     float64
	ErrShare float64
	FlakyAt  float64
	calls    []float64
}

func envelope(ops int64, failed int64, lat time.Duration, secs int) *result.Envelope {
	e := &result.Envelope{Totals: map[string]int64{}, Histograms: map[string]*hist.Histogram{"latency": hist.New()}}
	e.StartedAt = time.Unix(0, 0)
	e.EndedAt = e.StartedAt.Add(time.Duration(secs) * time.Second)
	for i := 0; i < secs; i++ {
		iv := result.Interval{T: float64(i), Secs: 1, Counts: map[string]int64{"success": ops - failed}, Latency: map[string]*hist.Histogram{"latency": hist.New()}}
		if failed > 0 {
			iv.Counts["network"] = failed
		}
		for j := int64(0); j < 20; j++ {
			iv.Latency["latency"].Record(lat)
		}
		e.Histograms["latency"].Merge(iv.Latency["latency"])
		for k, v := range iv.Counts {
			e.Totals[k] += v
		}
		e.Intervals = append(e.Intervals, iv)
	}
	return e
}

func (f *fakeServer) Trial(_ context.Context, v float64, step, trial int) (Trial, error) {
	f.calls = append(f.calls, v)
	if v <= f.Knee && !(v == f.FlakyAt && trial == 2) {
		return Trial{Env: envelope(int64(v), 0, 5*time.Millisecond, 5)}, nil
	}
	return Trial{Env: envelope(int64(v), int64(math.Ceil(v*f.ErrShare)), 50*time.Millisecond, 5)}, nil
}

func mustSLO(t *testing.T, s string) *SLO {
	t.Helper()
	slo, err := ParseSLO(s)
	if err != nil {
		t.Fatal(err)
	}
	return slo
}

func TestSearchFindsKneeWithinResolution(t *testing.T) {
	for _, knee := range []float64{137, 500, 999, 4000} {
		f := &fakeServer{Knee: knee}
		res, err := Run(context.Background(), Config{Vary: "rate", From: 100, To: 64000, Trials: 3, Integer: true, SLO: mustSLO(t, "p99<20ms,errors<0.5%"), Resamples: 50}, f)
		if err != nil {
			t.Fatal(err)
		}
		if res.Knee == nil || res.FirstFail == nil {
			t.Fatalf("knee %v: no bracket: %+v", knee, res)
		}
		if *res.Knee > knee || *res.FirstFail <= knee {
			t.Fatalf("knee %v: bracket [%v, %v) does not hold it", knee, *res.Knee, *res.FirstFail)
		}
		if *res.FirstFail/(*res.Knee) > 1.05 && *res.FirstFail-*res.Knee > 1 {
			t.Fatalf("knee %v: bracket [%v, %v) wider than 5%%", knee, *res.Knee, *res.FirstFail)
		}
		if res.TrialCount != 3*len(res.Steps) || len(f.calls) != res.TrialCount {
			t.Fatalf("trial count %d, steps %d, calls %d", res.TrialCount, len(res.Steps), len(f.calls))
		}
		if got := strings.Join(res.BrokeFirst, ","); got != "latency" {
			t.Fatalf("broke first %q, want latency", got)
		}
		if res.Confidence.KneeInBracket == nil || *res.Confidence.KneeInBracket != 1 {
			t.Fatalf("deterministic server: confidence %+v, want 1", res.Confidence)
		}
		// Growth doubles from 100 until the first fail.
		if res.Steps[0].Value != 100 || res.Steps[1].Value != 200 || res.Steps[0].Phase != "grow" {
			t.Fatalf("steps %+v", res.Steps[:2])
		}
	}
}

func TestSearchErrorsBreakFirst(t *testing.T) {
	f := &fakeServer{Knee: 300, ErrShare: 0.1}
	res, err := Run(context.Background(), Config{Vary: "rate", From: 100, To: 1000, Trials: 1, Integer: true, SLO: mustSLO(t, "errors<0.5%"), Resamples: 100}, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.BrokeFirst, ","); got != "errors" {
		t.Fatalf("broke first %q", got)
	}
}

func TestSearchPartialStepStatesShare(t *testing.T) {
	f := &fakeServer{Knee: 1000, FlakyAt: 400}
	res, err := Run(context.Background(), Config{Vary: "rate", From: 100, To: 1000, Trials: 3, Integer: true, SLO: mustSLO(t, "p99<20ms"), Resamples: 100}, f)
	if err != nil {
		t.Fatal(err)
	}
	if *res.FirstFail > 400 || *res.Knee < 200 {
		t.Fatalf("bracket [%v,%v)", *res.Knee, *res.FirstFail)
	}
	for _, st := range res.Steps {
		if st.Value == 400 {
			if st.Passed || math.Abs(st.Held-2.0/3) > 1e-9 {
				t.Fatalf("flaky step: %+v", st)
			}
			return
		}
	}
	t.Fatal("no step at 400")
}

func TestSearchEnds(t *testing.T) {
	// The ceiling passes: knee = to, no first fail.
	res, err := Run(context.Background(), Config{Vary: "rate", From: 100, To: 300, Trials: 1, Integer: true, SLO: mustSLO(t, "p99<20ms"), Resamples: 100}, &fakeServer{Knee: 1e9})
	if err != nil || *res.Knee != 300 || res.FirstFail != nil {
		t.Fatalf("ceiling: %v %+v", err, res)
	}
	// The first value fails: no knee.
	res, err = Run(context.Background(), Config{Vary: "rate", From: 100, To: 300, Trials: 1, Integer: true, SLO: mustSLO(t, "p99<20ms"), Resamples: 100}, &fakeServer{Knee: 50})
	if err != nil || res.Knee != nil || *res.FirstFail != 100 || len(res.Steps) != 1 {
		t.Fatalf("from fails: %v %+v", err, res)
	}
	// An abort condition ends the search at once.
	f := &fakeServer{Knee: 250}
	res, err = Run(context.Background(), Config{Vary: "rate", From: 100, To: 3000, Trials: 3, Integer: true, SLO: mustSLO(t, "p99<20ms"), AbortOn: mustSLO(t, "p99>40ms"), Resamples: 100}, f)
	if !errors.Is(err, ErrAborted) || len(f.calls) != 7 || res.Aborted == "" {
		t.Fatalf("abort: %v, %d calls, %+v", err, len(f.calls), res)
	}
}

func TestConfigValidate(t *testing.T) {
	slo := mustSLO(t, "throughput>95%")
	for _, c := range []Config{
		{Vary: "count", From: 1, To: 2, Growth: 2, Resolution: 0.05, Trials: 1, SLO: slo},
		{Vary: "rate", From: 0, To: 2, Growth: 2, Resolution: 0.05, Trials: 1, SLO: slo},
		{Vary: "rate", From: 3, To: 2, Growth: 2, Resolution: 0.05, Trials: 1, SLO: slo},
		{Vary: "rate", From: 1, To: 2, Growth: 1, Resolution: 0.05, Trials: 1, SLO: slo},
		{Vary: "rate", From: 1, To: 2, Growth: 2, Resolution: 0, Trials: 1, SLO: slo},
		{Vary: "rate", From: 1, To: 2, Growth: 2, Resolution: 0.05, Trials: 0, SLO: slo},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}

func TestParseSLO(t *testing.T) {
	slo := mustSLO(t, "p99<20ms, p99.9:uncorrected<=0.1s,errors<0.5%,failed<0.01%,shed<5%,throughput>=95%,throughput>100/s")
	if len(slo.Terms) != 7 {
		t.Fatal(slo.Terms)
	}
	if tm := slo.Terms[1]; tm.Quantile != 99.9 || tm.Kind != "uncorrected" || tm.Limit != 100 || !tm.Inclusive {
		t.Fatalf("%+v", tm)
	}
	if tm := slo.Terms[2]; tm.Limit != 0.005 || !tm.Below {
		t.Fatalf("%+v", tm)
	}
	if tm := slo.Terms[5]; !tm.OfOffered || tm.Limit != 0.95 || tm.Below {
		t.Fatalf("%+v", tm)
	}
	for _, bad := range []string{"", "p99", "p99<", "p0<1ms", "p101<1ms", "pxx<1ms", "p99<20", "errors<0.5", "errors<200%", "latency<3ms", "p99<20ms,", "p99:<1ms", "throughput>-1", "errors<NaN%", "p1e1<3ms"} {
		if _, err := ParseSLO(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Evaluation: a run with 1% network errors and 5 ms latency.
	e := envelope(100, 1, 5*time.Millisecond, 3)
	s := WholeRun(e)
	held, terms := mustSLO(t, "p99<20ms,errors<0.5%").Evaluate(&s, 0)
	if held || !terms[0].Held || terms[1].Held || math.Abs(terms[1].Observed-0.01) > 1e-9 {
		t.Fatalf("%v %+v", held, terms)
	}
	held, _ = mustSLO(t, "throughput>=99%").Evaluate(&s, 100)
	if !held {
		t.Fatal("99 successes a second of 100 offered should meet throughput>=99%")
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"p99<20ms,errors<0.5%", "failed<0.01%", "p99.9:uncorrected<=1s", "throughput>95%", "shed<1%,throughput>10/s", ",", "p<", "errors<1e400%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := ParseSLO(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, tm := range slo.Terms {
			if math.IsNaN(tm.Limit) || math.IsInf(tm.Limit, 0) || tm.Limit < 0 {
				t.Fatalf("%q: limit %v", s, tm.Limit)
			}
		}
	})
}

func TestSearchFileRoundTrip(t *testing.T) {
	res, err := Run(context.Background(), Config{Vary: "rate", From: 100, To: 1000, Trials: 2, Integer: true, SLO: mustSLO(t, "p99<20ms"), Resamples: 20, Seed: 7}, &fakeServer{Knee: 300})
	if err != nil {
		t.Fatal(err)
	}
	b, err := res.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if *back.Knee != *res.Knee || back.Config.SLO.Text != "p99<20ms" || len(back.Steps) != len(res.Steps) {
		t.Fatalf("round trip: %+v", back)
	}
	for _, bad := range []string{`{}`, `{"format":"loadproof.search/v1"}`, strings.Replace(string(b), `"p99<20ms"`, `"p99<"`, 1), strings.Replace(string(b), `"trials": 2`, `"trials": 0`, 1), strings.Replace(string(b), `"index": 1`, `"index": 9`, 1)} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad[:min(len(bad), 400)])
		}
	}
}

func FuzzParseSearchFile(f *testing.F) {
	res, _ := Run(context.Background(), Config{Vary: "rate", From: 100, To: 400, Trials: 1, Integer: true, SLO: &SLO{Text: "p99<20ms", Terms: []Term{{Text: "p99<20ms", Metric: MetricLatency, Quantile: 99, Kind: "latency", Below: true, Limit: 20}}}, Resamples: 5}, &fakeServer{Knee: 200})
	b, _ := res.Encode()
	f.Add(b)
	f.Add([]byte(`{"format":"loadproof.search/v1","steps":[{"trials":[{"file":"../x"}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if _, err := r.Encode(); err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		r.WriteText(&sb)
	})
}

// TestHoldShareCarriesTrialNoise: the confidence resamples trials, then their seconds. Two trials
// that hold the SLO and one that breaks it: pooling the seconds, a third of every resample is slow
// and the SLO never holds; drawing trials, it holds whenever the slow trial is not drawn,
// (2/3)^3 ≈ 0.30 of the time — the trial-to-trial noise a statement must carry.
func TestHoldShareCarriesTrialNoise(t *testing.T) {
	c := &Config{Vary: "concurrency", SLO: mustSLO(t, "p99<20ms"), Resamples: 4000, Seed: 1}
	envs := []*result.Envelope{envelope(100, 0, 5*time.Millisecond, 5), envelope(100, 0, 5*time.Millisecond, 5), envelope(100, 0, 50*time.Millisecond, 5)}
	h, ok := holdShare(c, 100, envs, rand.New(rand.NewPCG(1, 2)))
	if !ok || math.Abs(h-8.0/27) > 0.04 {
		t.Fatalf("held in %.3f of resamples (ok %v), want about %.3f", h, ok, 8.0/27)
	}
	if h, _ := holdShare(c, 100, envs[:1], rand.New(rand.NewPCG(1, 2))); h != 1 {
		t.Errorf("one holding trial: held in %.3f of resamples, want 1", h)
	}
}

// coldStart fails the very first trial it runs (a cold server), then behaves as inner.
type coldStart struct {
	inner *fakeServer
	runs  int
	steps []int
}

func (c *coldStart) Trial(ctx context.Context, v float64, step, trial int) (Trial, error) {
	c.runs++
	c.steps = append(c.steps, step)
	if c.runs == 1 {
		return Trial{Env: envelope(int64(v), 0, 500*time.Millisecond, 5)}, nil
	}
	return c.inner.Trial(ctx, v, step, trial)
}

// TestWarmUpTrialIsUnscored: with WarmUp, a trial at From runs first as step 0 and counts toward
// nothing; a cold first trial then no longer fails the first value. Without it, the same cold
// trial fails the search at From.
func TestWarmUpTrialIsUnscored(t *testing.T) {
	cfg := Config{Vary: "rate", From: 100, To: 1600, Trials: 2, Integer: true, SLO: mustSLO(t, "p99<20ms"), Resamples: 20}
	cold := &coldStart{inner: &fakeServer{Knee: 450}}
	res, err := Run(context.Background(), cfg, cold)
	if err != nil || res.Knee != nil || res.WarmUp != nil {
		t.Fatalf("without a warm-up the cold first trial should fail the first value: knee %v warm-up %+v err %v", res.Knee, res.WarmUp, err)
	}
	cfg.WarmUp = true
	cold = &coldStart{inner: &fakeServer{Knee: 450}}
	res, err = Run(context.Background(), cfg, cold)
	if err != nil {
		t.Fatal(err)
	}
	if res.WarmUp == nil || res.WarmUp.Held || cold.steps[0] != 0 || slices.Contains(cold.steps[1:], 0) {
		t.Fatalf("warm-up %+v, steps asked %v: want one unscored step-0 trial first", res.WarmUp, cold.steps)
	}
	if res.Knee == nil || *res.Knee < 400 || *res.Knee > 450 || res.TrialCount != cold.runs-1 || res.TrialCount != 2*len(res.Steps) {
		t.Fatalf("knee %s, %d trials counted of %d run, %d steps", fmtPtr(res.Knee), res.TrialCount, cold.runs, len(res.Steps))
	}
	var b strings.Builder
	res.WriteText(&b)
	if !strings.Contains(b.String(), "warm-up rate 100 (unscored)") {
		t.Fatalf("the summary does not show the warm-up:\n%s", b.String())
	}
}

func TestParseResolution(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, " 2.5% ": 0.025, "0.05": 0.05, "100%": 1} {
		if got, err := ParseResolution(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseResolution(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "%", "five", "5%%", "5 %x"} {
		if _, err := ParseResolution(in); err == nil || !strings.Contains(err.Error(), "not a percentage") {
			t.Errorf("ParseResolution(%q): %v; want an error naming a percentage", in, err)
		}
	}
}

// FuzzParseResolution: a resolution is refused with a message, or is the number given (over 100
// when it ends in %).
func FuzzParseResolution(f *testing.F) {
	for _, s := range []string{"5%", "0.05", " 2.5% ", "", "%", "NaN%", "1e400%", "-3%", "5%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseResolution(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		trimmed := strings.TrimSpace(s)
		n, perr := strconv.ParseFloat(strings.TrimSuffix(trimmed, "%"), 64)
		if perr != nil {
			t.Fatalf("%q accepted as %v, but %q is no number", s, v, strings.TrimSuffix(trimmed, "%"))
		}
		if strings.HasSuffix(trimmed, "%") {
			n /= 100
		}
		if !(v == n || math.IsNaN(v) && math.IsNaN(n)) {
			t.Fatalf("%q = %v; want %v", s, v, n)
		}
	})
}
