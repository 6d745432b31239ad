package result

import (
	"fmt"
	"maps"
	"math"
)

// Rebin joins the envelope's intervals into intervals of secs each, a whole multiple of
// IntervalSecs, exactly (Rebinned): counts, causes, counters and histograms add; the server sample
// and the gauges are the last ones read in the group, the state at its end. It is how a merge joins
// parts whose interval lengths differ; lengths that are not whole multiples of each other are
// refused. A secs equal to IntervalSecs changes nothing.
func (e *Envelope) Rebin(secs float64) error {
	k, err := rebinFactor(e.IntervalSecs, secs)
	if err != nil {
		return err
	}
	if k > 1 {
		e.Intervals = Rebinned(e.Intervals, secs)
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

// Rebinned returns ivs (in time order) joined by the slot of secs their start falls in: interval i
// of the result holds every interval of ivs that starts in [i·secs, (i+1)·secs) of the run, starts
// where the first of them starts and lasts as long as they do together. Slots are by time, not by
// count, so a snapshot the runtime delivered late (one fine interval longer than the others) never
// moves the intervals after it into another slot, and parts rebinned alike merge by index at the
// same instants. A slot in which no interval starts (ivs skipped it) is kept, empty, at its start
// with length 0 (at most len(ivs) of them in all). The intervals returned share nothing with ivs.
// It is also how the engine joins a run's 100 ms snapshots into seconds.
func Rebinned(ivs []Interval, secs float64) []Interval {
	if len(ivs) == 0 || !(secs > 0) || math.IsInf(secs, 0) {
		return ivs
	}
	return rebinnedFrom(ivs, secs, max(timeSlot(ivs[0].T, secs), 0))
}

// timeSlot is the slot of secs that an interval starting at t falls in (-1 for a t no run writes).
func timeSlot(t, secs float64) int64 {
	if math.IsNaN(t) || t < 0 {
		return -1
	}
	return int64(math.Floor(min(t/secs, 1<<40) + 1e-9))
}

// slotted returns ivs joined into slots of secs counted from the run's start: interval i of the
// result is slot i, [i·secs, (i+1)·secs), whatever instant the first of ivs starts at. Parts
// slotted alike merge by index at the same instants even when one part's collector was late and
// its intervals do not fall on the grid (Envelope.Merge).
func slotted(ivs []Interval, secs float64) []Interval {
	if len(ivs) == 0 || !(secs > 0) || math.IsInf(secs, 0) {
		return ivs
	}
	return rebinnedFrom(ivs, secs, 0)
}

// rebinnedFrom is Rebinned with out[0] at slot first.
func rebinnedFrom(ivs []Interval, secs float64, first int64) []Interval {
	slot := func(t float64) int64 { return timeSlot(t, secs) }
	out := make([]Interval, 0, len(ivs))
	budget := int64(len(ivs)) // empty slots kept at most, which bounds the result by twice ivs
	for i := range ivs {
		k := slot(ivs[i].T) - first
		if k < int64(len(out))-1 || k < 0 {
			k = max(int64(len(out))-1, 0) // out of order: joined to the slot at hand
		}
		if gap := k - int64(len(out)); gap > 0 {
			if gap > budget {
				k = int64(len(out)) // a gap no run leaves (a damaged file): no more empty slots for it
			} else {
				budget -= gap
			}
		}
		for int64(len(out)) < k {
			out = append(out, Interval{T: float64(first+int64(len(out))) * secs}) // a slot ivs skipped
		}
		if int64(len(out)) == k {
			out = append(out, Interval{T: ivs[i].T})
		}
		out[k].JoinLater(&ivs[i])
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
