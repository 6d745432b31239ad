package result

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loadproof/loadproof/internal/hist"
)

func validEnvelope() *Envelope {
	h := hist.New()
	h.RecordMicros(100)
	h.RecordMicros(200)
	ih := hist.New()
	ih.RecordMicros(100)
	return &Envelope{Format: Format, Harness: "linkkeys", Command: "connections", Target: "127.0.0.1:1", IntervalSecs: 1,
		Totals: map[string]int64{"success": 2, "failed": 1}, Causes: map[string]int64{"timeout": 1},
		Histograms: map[string]*hist.Histogram{"latency": h},
		Intervals: []Interval{
			{T: 0, Secs: 1, Counts: map[string]int64{"success": 1}, Latency: map[string]*hist.Histogram{"latency": ih}},
			{T: 1, Secs: 1, Counts: map[string]int64{"success": 1, "failed": 1}, Causes: map[string]int64{"timeout": 1}},
		}}
}

// TestValidateConsistency (issue 27, finding 7): totals of 2^63-1, negative causes, totals that
// disagree with the intervals and histograms holding more samples than operations are refused, each
// with its field named.
func TestValidateConsistency(t *testing.T) {
	if err := validEnvelope().Validate(); err != nil {
		t.Fatalf("a consistent envelope refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		spoil func(e *Envelope)
		want  string
	}{
		{"total 2^63-1", func(e *Envelope) { e.Totals["success"] = 1<<63 - 1 }, `totals["success"] is 9223372036854775807, above`},
		{"negative cause", func(e *Envelope) { e.Causes["timeout"] = -5 }, `causes["timeout"] is negative (-5)`},
		{"negative total", func(e *Envelope) { e.Totals["failed"] = -1 }, `totals["failed"] is negative`},
		{"totals above intervals", func(e *Envelope) { e.Totals["success"] = 200 }, `totals["success"] is 200 but the intervals count 2`},
		{"class only in intervals", func(e *Envelope) { delete(e.Totals, "failed") }, `class "failed" that totals lacks`},
		{"negative interval count", func(e *Envelope) { e.Intervals[1].Counts["failed"] = -1 }, `intervals[1].counts["failed"] is negative`},
		{"interval counter 2^63-1", func(e *Envelope) { e.Intervals[0].Counters = map[string]int64{"late": 1<<63 - 1} }, `intervals[0].counters["late"]`},
		{"histogram above totals", func(e *Envelope) {
			for range 10 {
				e.Histograms["latency"].RecordMicros(5)
			}
		}, `histograms["latency"] holds 12 samples, more than the 3 operations`},
		{"negative secs", func(e *Envelope) { e.Intervals[0].Secs = -1 }, `intervals[0]: t 0, secs -1`},
		{"negative gauge", func(e *Envelope) { e.Intervals[1].Gauges = map[string]int64{"held": -3} }, `intervals[1].gauges["held"] is negative`},
		{"interval length under 1 ms", func(e *Envelope) { e.IntervalSecs = 1e-6 }, `interval_secs 1e-06: want a finite length of at least 1 ms`},
	} {
		e := validEnvelope()
		tc.spoil(e)
		err := e.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzValidate: any envelope a file can hold is judged without panicking, and one Validate accepts
// has no negative or impossible total.
func FuzzValidate(f *testing.F) {
	b, _ := json.Marshal(validEnvelope())
	f.Add(b)
	f.Add([]byte(`{"format":"loadproof.result/v2","harness":"h","command":"c","totals":{"success":9223372036854775807}}`))
	f.Add([]byte(`{"format":"loadproof.result/v2","harness":"h","command":"c","causes":{"x":-5},"intervals":[{"t":0,"secs":1,"counts":{"a":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Envelope
		if json.Unmarshal(b, &e) != nil || e.Validate() != nil {
			return
		}
		for k, v := range e.Totals {
			if v < 0 || v > MaxCount {
				t.Fatalf("accepted totals[%q] = %d", k, v)
			}
		}
	})
}
