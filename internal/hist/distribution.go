package hist

import (
	"bufio"
	"fmt"
	"io"
	"math"
)

// PercentilesMicros returns the values at the given percentiles (0..100, any order) in
// microseconds, in the order given, from one pass over the histogram; all zeros when it is empty.
// Reports that draw percentiles over time call it once per interval, so it must not cost one scan
// per percentile.
func (h *Histogram) PercentilesMicros(percentiles []float64) []int64 {
	if h.Count() == 0 {
		return make([]int64, len(percentiles))
	}
	return h.h.ValueAtPercentilesSlice(percentiles)
}

// MaxMicros returns the largest sample in microseconds (at histogram resolution); 0 when empty.
func (h *Histogram) MaxMicros() int64 {
	if h.Count() == 0 {
		return 0
	}
	return h.h.Max()
}

// Point is one step of the percentile distribution: the highest value (µs) at or below which
// Percentile (0..1) of the samples lie, and how many samples that is.
type Point struct {
	Percentile float64
	ValueUs    int64
	Count      int64
}

// Distribution returns the percentile distribution in HdrHistogram's form: steps that halve the
// distance to 100 % ticksPerHalfDistance times each (5 is HdrHistogram's usual choice), ending at
// 100 %. Empty for an empty histogram.
func (h *Histogram) Distribution(ticksPerHalfDistance int) []Point {
	if h.Count() == 0 {
		return nil
	}
	br := h.h.CumulativeDistributionWithTicks(int32(max(ticksPerHalfDistance, 1)))
	out := make([]Point, len(br))
	for i, b := range br {
		out[i] = Point{Percentile: b.Quantile / 100, ValueUs: b.ValueAt, Count: b.Count}
	}
	return out
}

// bucketCounts are the HDR layout's bucket and sub-bucket counts for this package's fixed range
// (as HdrHistogram computes them), which the hgrm footer reports.
func bucketCounts() (buckets, subBuckets int) {
	largestSingleUnit := 2 * math.Pow10(SigFigs)
	subBuckets = 1 << int(math.Ceil(math.Log2(largestSingleUnit)))
	smallestUntrackable := int64(subBuckets)
	buckets = 1
	for smallestUntrackable <= Highest {
		smallestUntrackable <<= 1
		buckets++
	}
	return buckets, subBuckets
}

// WriteHGRM writes the percentile distribution as HdrHistogram's outputPercentileDistribution
// does (the ".hgrm" text that the HdrHistogram plotter reads), with values divided by unitScale
// (1000 gives milliseconds) and 5 ticks per half distance.
func (h *Histogram) WriteHGRM(w io.Writer, unitScale float64) error {
	if unitScale <= 0 {
		unitScale = 1
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")
	for _, p := range h.Distribution(5) {
		v := float64(p.ValueUs) / unitScale
		if p.Percentile < 1 {
			fmt.Fprintf(bw, "%12.3f %2.12f %10d %14.2f\n", v, p.Percentile, p.Count, 1/(1-p.Percentile))
		} else {
			fmt.Fprintf(bw, "%12.3f %2.12f %10d\n", v, p.Percentile, p.Count)
		}
	}
	var mean, std, maxv float64
	if h.Count() > 0 {
		mean, std, maxv = h.h.Mean()/unitScale, h.h.StdDev()/unitScale, float64(h.h.Max())/unitScale
	}
	buckets, subBuckets := bucketCounts()
	fmt.Fprintf(bw, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean, std)
	fmt.Fprintf(bw, "#[Max     = %12.3f, Total count    = %12d]\n", maxv, h.Count())
	fmt.Fprintf(bw, "#[Buckets = %12d, SubBuckets     = %12d]\n", buckets, subBuckets)
	return bw.Flush()
}
