package result

import (
	"fmt"
	"maps"
	"math"
)

// Rebin joins the envelope's intervals into intervals of secs each, a whole multiple k of
// IntervalSecs: every k consecutive intervals become one, exactly (counts, causes, counters and
// histograms add; the server sample and the gauges are the last ones read in the group, the state
// at its end). It is how the engine coarsens a run that outgrows its fine intervals, and how a
// merge joins parts whose interval lengths differ. A secs equal to IntervalSecs changes nothing.
func (e *Envelope) Rebin(secs float64) error {
	k, err := rebinFactor(e.IntervalSecs, secs)
	if err != nil {
		return err
	}
	if k > 1 {
		e.Intervals = Rebinned(e.Intervals, k)
	}
	e.IntervalSecs = secs
	return nil
}

// rebinFactor returns how many intervals of from make one of to: a whole number, at least 1.
func rebinFactor(from, to float64) (int, error) {
	if from == to {
		return 1, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("intervals of %gs cannot be joined into intervals of %gs: %s", from, to, why)
	}
	if !(from > 0) || !(to > 0) || math.IsInf(from, 0) || math.IsInf(to, 0) {
		return 0, bad("both lengths must be positive and finite")
	}
	r := to / from
	k := math.Round(r)
	if k < 1 || math.Abs(r-k) > 1e-6*k || k > 1<<20 {
		return 0, bad("the longer must be a whole multiple of the shorter")
	}
	return int(k), nil
}

// Rebinned returns ivs joined k at a time into new intervals (the last group may hold fewer), each
// starting where its first interval starts and lasting as long as its intervals together. The
// intervals returned share nothing with ivs.
func Rebinned(ivs []Interval, k int) []Interval {
	k = max(k, 1)
	out := make([]Interval, 0, (len(ivs)+k-1)/k)
	for i := 0; i < len(ivs); i += k {
		g := ivs[i:min(i+k, len(ivs))]
		iv := Interval{T: g[0].T}
		for j := range g {
			iv.JoinLater(&g[j])
		}
		out = append(out, iv)
	}
	return out
}

// JoinLater appends o, the interval that follows iv in time, to iv: lengths, counts, causes,
// counters and histograms add; o's gauges and server sample, when it has them, replace iv's (a
// gauge or a sample is a reading at one instant, and o's is the later).
func (iv *Interval) JoinLater(o *Interval) {
	secs := iv.Secs + o.Secs
	iv.Counts = addCounts(iv.Counts, o.Counts)
	iv.Causes = addCounts(iv.Causes, o.Causes)
	iv.Counters = addCounts(iv.Counters, o.Counters)
	iv.Latency = addHists(iv.Latency, o.Latency)
	if o.Gauges != nil {
		iv.Gauges = maps.Clone(o.Gauges)
	}
	if o.Server != nil {
		iv.Server = maps.Clone(o.Server)
	}
	iv.Secs = secs
}
