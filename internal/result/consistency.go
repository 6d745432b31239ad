package result

import (
	"fmt"
	"math"
	"sort"
)

// MaxCount bounds any count a result file may carry: 2^53, the largest integer a JSON reader in
// any language holds exactly, and more operations than a run at 10^8 a second would count in two
// years. A larger total (2^63-1, say) is not a measurement and is refused.
const MaxCount = 1 << 53

// consistency checks the figures of a result against each other, as a reader relies on them:
// no count, cause, counter or gauge is negative or above MaxCount; interval times and lengths are
// finite and not negative, and interval_secs is at least 1 ms where there are intervals; each class the intervals count totals the sum of the intervals' counts of it;
// no histogram, whole-run or interval, holds more samples than operations were counted. Each
// problem names its field.
func (e *Envelope) consistency() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	checkCounts := func(field string, m map[string]int64) int64 {
		var sum int64
		for _, k := range sortedKeys(m) {
			v := m[k]
			switch {
			case v < 0:
				bad("%s[%q] is negative (%d)", field, k, v)
			case v > MaxCount:
				bad("%s[%q] is %d, above the %d any run can count", field, k, v, int64(MaxCount))
			default:
				sum += v
			}
		}
		return sum
	}
	total := checkCounts("totals", e.Totals)
	checkCounts("causes", e.Causes)
	for _, k := range sortedKeys(e.Histograms) {
		// A Keycast envelope counts its requests in the summary (checked there), not in totals.
		if h := e.Histograms[k]; h != nil && len(e.Totals) > 0 && h.Count() > total {
			bad("histograms[%q] holds %d samples, more than the %d operations in totals", k, h.Count(), total)
		}
	}
	if s := e.IntervalSecs; math.IsNaN(s) || math.IsInf(s, 0) || s < 0 || (len(e.Intervals) > 0 && s > 0 && s < 0.001) {
		bad("interval_secs %g: want a finite length of at least 1 ms", s)
	}
	if len(e.Intervals) == 0 || len(errs) > 0 {
		return errs
	}
	sums := map[string]int64{}
	for i := range e.Intervals {
		iv := &e.Intervals[i]
		at := fmt.Sprintf("intervals[%d]", i)
		if math.IsNaN(iv.T) || math.IsInf(iv.T, 0) || iv.T < 0 || math.IsNaN(iv.Secs) || math.IsInf(iv.Secs, 0) || iv.Secs < 0 {
			bad("%s: t %g, secs %g: want finite, not negative", at, iv.T, iv.Secs)
		}
		n := checkCounts(at+".counts", iv.Counts)
		checkCounts(at+".causes", iv.Causes)
		checkCounts(at+".counters", iv.Counters)
		checkCounts(at+".gauges", iv.Gauges)
		// An interval's histograms are not held to its counts: a driver may record a latency in the
		// interval its operation ended while its outcome is counted in the next (a LinkKeys
		// handshake stream's connect latency, one sample across a boundary in a real capacity
		// run). The whole run's histograms are held to the totals above.
		_ = n
		for k, v := range iv.Counts {
			if v > 0 && sums[k] <= MaxCount {
				sums[k] += v
			}
		}
		if len(errs) >= 8 {
			return errs
		}
	}
	// A class the intervals never count (a combined run's held/… classes, counted at the end) is
	// not compared; one they do count must total the same.
	for _, k := range sortedKeys(sums) {
		if v, ok := e.Totals[k]; ok && v != sums[k] {
			bad("totals[%q] is %d but the intervals count %d", k, v, sums[k])
		}
	}
	for _, k := range sortedKeys(sums) {
		if _, ok := e.Totals[k]; !ok && sums[k] != 0 {
			bad("the intervals count %d of class %q that totals lacks", sums[k], k)
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
