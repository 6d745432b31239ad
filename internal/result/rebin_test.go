package result

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// fine returns n intervals of 0.1 s from t0, interval i counting i+1 successes and one counter
// "c", with the gauge "held" at i and a server sample "s" at 10·i.
func fine(t0 float64, n int) []Interval {
	ivs := make([]Interval, n)
	for i := range ivs {
		ivs[i] = Interval{T: t0 + float64(i)*0.1 + 0.0003, Secs: 0.1, Counts: map[string]int64{"success": int64(i + 1)},
			Counters: map[string]int64{"c": 1}, Gauges: map[string]int64{"held": int64(i)}, Server: map[string]float64{"s": float64(10 * i)}}
	}
	return ivs
}

func countsOf(ivs []Interval) (n, ctr int64) {
	for _, iv := range ivs {
		n += iv.Counts["success"]
		ctr += iv.Counters["c"]
	}
	return n, ctr
}

func TestRebinnedJoinsBySecond(t *testing.T) {
	ivs := fine(0, 25)
	// The runtime delivered one tick late: intervals 8 and 9 came as one, 0.2 s long, starting at 0.8.
	ivs[8].Secs, ivs[8].Counts["success"] = 0.2, ivs[8].Counts["success"]+ivs[9].Counts["success"]
	ivs[8].Counters["c"], ivs[8].Gauges, ivs[8].Server = 2, ivs[9].Gauges, ivs[9].Server
	ivs = append(ivs[:9], ivs[10:]...)
	wantN, wantC := countsOf(ivs)
	out := Rebinned(ivs, 1)
	if len(out) != 3 {
		t.Fatalf("%d intervals, want 3 (0–1 s, 1–2 s, 2–2.5 s)", len(out))
	}
	if n, c := countsOf(out); n != wantN || c != wantC {
		t.Fatalf("counts %d counters %d, want %d %d", n, c, wantN, wantC)
	}
	// The late tick stays in its own second: the second slot still starts at interval 10.
	if out[1].T != ivs[9].T || out[0].Counts["success"] != 55 || out[1].Counts["success"] != 155 {
		t.Fatalf("slots %+v %+v", out[0], out[1])
	}
	for i, want := range []float64{1, 1, 0.5} {
		if math.Abs(out[i].Secs-want) > 1e-9 {
			t.Fatalf("slot %d lasts %g s, want %g", i, out[i].Secs, want)
		}
	}
	// Gauges and samples are the last readings of their slot: the state at its end.
	if out[0].Gauges["held"] != 9 || out[1].Gauges["held"] != 19 || out[2].Gauges["held"] != 24 || out[1].Server["s"] != 190 {
		t.Fatalf("gauges %v %v %v server %v", out[0].Gauges, out[1].Gauges, out[2].Gauges, out[1].Server)
	}
	// Nothing is shared with the input.
	out[0].Counts["success"] = -1
	out[0].Gauges["held"] = -1
	if ivs[0].Counts["success"] != 1 || ivs[9].Gauges["held"] != 10 {
		t.Fatal("Rebinned shares maps with its input")
	}
}

func TestRebinnedKeepsSkippedSlots(t *testing.T) {
	ivs := []Interval{{T: 0, Secs: 1, Counts: map[string]int64{"success": 1}}, {T: 1, Secs: 2.5, Counts: map[string]int64{"success": 2}},
		{T: 3.5, Secs: 0.5, Counts: map[string]int64{"success": 3}}}
	out := Rebinned(ivs, 1)
	if len(out) != 4 || out[2].T != 2 || out[2].Secs != 0 || out[2].Total() != 0 || out[3].Counts["success"] != 3 {
		t.Fatalf("%+v", out)
	}
	// A damaged file's huge gap does not make a huge result.
	far := []Interval{{T: 0, Secs: 1}, {T: 1e12, Secs: 1}}
	if out := Rebinned(far, 0.001); len(out) > 4 {
		t.Fatalf("%d intervals for 2", len(out))
	}
}

func TestRebinRefusesLengthsThatDoNotDivide(t *testing.T) {
	for _, tc := range []struct{ from, to float64 }{{0.1, 0.25}, {1, 0.1}, {0.3, 1}, {0, 1}, {1, math.Inf(1)}, {math.NaN(), 1}} {
		e := Envelope{IntervalSecs: tc.from, Intervals: fine(0, 3)}
		err := e.Rebin(tc.to)
		if err == nil || !strings.Contains(err.Error(), "cannot be joined") {
			t.Errorf("%g → %g: %v", tc.from, tc.to, err)
		}
	}
	e := Envelope{IntervalSecs: 0.1, Intervals: fine(0, 12)}
	if err := e.Rebin(1); err != nil || e.IntervalSecs != 1 || len(e.Intervals) != 2 {
		t.Fatalf("%v: %g s, %d intervals", err, e.IntervalSecs, len(e.Intervals))
	}
}

func part(secs float64, ivs []Interval) *Envelope {
	e := &Envelope{Format: Format, Harness: "h", Command: "c", IntervalSecs: secs, Intervals: ivs, Totals: map[string]int64{}}
	for _, iv := range ivs {
		e.Totals["success"] += iv.Counts["success"]
	}
	return e
}

func TestMergeSumsGaugesAcrossParts(t *testing.T) {
	a, b := part(0.1, fine(0, 5)), part(0.1, fine(0, 3))
	var m Envelope
	for _, p := range []*Envelope{a, b} {
		if err := m.Merge(p); err != nil {
			t.Fatal(err)
		}
	}
	// Both parts hold at the same instants: their gauges add; where b has ended, a's alone count.
	for i, want := range []int64{0, 2, 4, 3, 4} {
		if got := m.Intervals[i].Gauges["held"]; got != want {
			t.Fatalf("interval %d held %d, want %d", i, got, want)
		}
	}
	if m.Totals["success"] != 15+6 || m.Validate() != nil {
		t.Fatalf("totals %v: %v", m.Totals, m.Validate())
	}
}

func TestMergeAcrossIntervalLengths(t *testing.T) {
	// A part that ended before 30 s kept 100 ms intervals; another ran on and has seconds.
	short := part(0.1, fine(0, 25))
	long := part(1, Rebinned(fine(0, 40), 1))
	for _, order := range [][]*Envelope{{short, long}, {long, short}} {
		var m Envelope
		for _, p := range order {
			if err := m.Merge(p); err != nil {
				t.Fatal(err)
			}
		}
		if m.IntervalSecs != 1 || len(m.Intervals) != 4 {
			t.Fatalf("%g s, %d intervals", m.IntervalSecs, len(m.Intervals))
		}
		n, c := countsOf(m.Intervals)
		if n != short.Totals["success"]+long.Totals["success"] || c != 65 || m.Validate() != nil {
			t.Fatalf("counts %d counters %d: %v", n, c, m.Validate())
		}
		// Second 1: the gauges at its end, 19 held by each part.
		if m.Intervals[1].Gauges["held"] != 38 || m.Intervals[3].Gauges["held"] != 39 {
			t.Fatalf("gauges %v %v", m.Intervals[1].Gauges, m.Intervals[3].Gauges)
		}
	}
	// The inputs are untouched.
	if len(short.Intervals) != 25 || short.IntervalSecs != 0.1 {
		t.Fatal("merging rebinned a part in place")
	}
	odd := part(0.25, []Interval{{T: 0, Secs: 0.25, Counts: map[string]int64{"success": 1}}})
	var m Envelope
	if err := m.Merge(short); err != nil {
		t.Fatal(err)
	}
	if err := m.Merge(odd); err == nil || !strings.Contains(err.Error(), "whole multiple") {
		t.Fatalf("merged 0.25 s intervals into 0.1 s ones: %v", err)
	}
}

// FuzzMergeParts: any two result files Validate accepts merge, at whatever interval lengths, into
// intervals whose counts and counters add up to both parts' exactly, or are refused with a reason;
// the merge is bounded by the parts' size.
func FuzzMergeParts(f *testing.F) {
	a, _ := json.Marshal(part(0.1, fine(0, 25)))
	b, _ := json.Marshal(part(1, Rebinned(fine(0, 40), 1)))
	f.Add(a, b)
	f.Add(b, a)
	f.Add(a, []byte(`{"format":"loadproof.result/v2","harness":"h","command":"c","interval_secs":0.25,"intervals":[{"t":1e300,"secs":0.25,"counts":{"success":1},"gauges":{"held":3}}]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var pa, pb Envelope
		if json.Unmarshal(a, &pa) != nil || pa.Validate() != nil || json.Unmarshal(b, &pb) != nil || pb.Validate() != nil {
			return
		}
		na, ca := countsOf(pa.Intervals)
		nb, cb := countsOf(pb.Intervals)
		var m Envelope
		if err := m.Merge(&pa); err != nil {
			return
		}
		if err := m.Merge(&pb); err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		if len(m.Intervals) > 2*(len(pa.Intervals)+len(pb.Intervals)) {
			t.Fatalf("%d intervals from %d and %d", len(m.Intervals), len(pa.Intervals), len(pb.Intervals))
		}
		if n, c := countsOf(m.Intervals); n != na+nb || c != ca+cb {
			t.Fatalf("merged counts %d counters %d, want %d %d", n, c, na+nb, ca+cb)
		}
	})
}

// TestMergeAlignsALateCollectorByTime: a part whose collector ran late once (its second interval
// lasts two ticks, so it has one interval fewer) merges with a part on the grid slot by slot in
// time: the merged timeline stays in time order (by index its later intervals landed a slot early
// and behind the other part's) and every count is kept.
func TestMergeAlignsALateCollectorByTime(t *testing.T) {
	onGrid := fine(0, 5)
	late := fine(0, 5)
	late[1].Secs = 0.2
	late = append(late[:2], late[3:]...) // T 0, 0.1 (two ticks long), 0.3, 0.4
	for _, order := range [][]*Envelope{{part(0.1, late), part(0.1, onGrid)}, {part(0.1, onGrid), part(0.1, late)}} {
		var m Envelope
		for _, p := range order {
			if err := m.Merge(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("merged timeline: %v", err)
		}
		if len(m.Intervals) != 5 {
			t.Fatalf("%d intervals, want 5", len(m.Intervals))
		}
		n, c := countsOf(m.Intervals)
		if n != 15+12 || c != 9 {
			t.Fatalf("counts %d counters %d, want 27 and 9", n, c)
		}
		// Slot 3 holds the on-grid part's fourth interval (4) and the late part's third (4).
		if got := m.Intervals[3].Counts["success"]; got != 8 {
			t.Fatalf("slot 3 counts %d, want 8", got)
		}
	}
}
