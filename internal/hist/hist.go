// Package hist holds loadproof's latency histograms: HDR histograms (microsecond resolution, 1 µs to
// 10 min, 3 significant figures) that merge exactly, so results from many workers, processes or
// machines combine into the same percentiles one process would have measured.
//
// The JSON form carries the summary figures for people and the standard compressed HDR encoding
// (the HdrHistogram V2 "HISTFIAAA…" base64 form) for machines; reports read the encoding back and
// never trust the summary alone.
package hist

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	// Lowest is the smallest trackable value in microseconds.
	Lowest = 1
	// Highest is the largest trackable value in microseconds (10 minutes); larger samples are clamped.
	Highest = 600_000_000
	// SigFigs is the number of significant decimal digits kept.
	SigFigs = 3
)

// Histogram records latencies in microseconds. The zero value is ready to use. It is not safe for
// concurrent use; give each worker its own and Merge them, or use Concurrent.
type Histogram struct {
	h *hdr.Histogram
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{h: newHDR()} }

func newHDR() *hdr.Histogram { return hdr.New(Lowest, Highest, SigFigs) }

func (h *Histogram) init() {
	if h.h == nil {
		h.h = newHDR()
	}
}

// Record adds one sample. Durations below 1 µs count as 1 µs; above 10 min as 10 min.
func (h *Histogram) Record(d time.Duration) { h.RecordMicros(d.Microseconds()) }

// RecordMicros adds one sample given in microseconds.
func (h *Histogram) RecordMicros(us int64) {
	h.init()
	if us < Lowest {
		us = Lowest
	} else if us > Highest {
		us = Highest
	}
	// Cannot fail: the value is clamped into range.
	_ = h.h.RecordValue(us)
}

// Merge adds every sample of o into h. It is exact: merging per-worker histograms gives the same
// histogram as recording every sample into one.
//
// Every Histogram holds this package's layout (New, and UnmarshalJSON re-records any other), so
// Merge reads o's counts array once (one 172 KB copy: hdrhistogram-go exposes the counts only
// through Export) and records each non-zero count at its index's value. hdrhistogram-go's own Merge
// walks every index up to o's largest value and works out each one's value range on the way: it
// takes five times as long for a ramp's second of latencies up to 7 s and 1.7 times for a
// generator's (BenchmarkMerge, docs/benchmarks.md). FuzzMergeMatchesHDR holds the two to the same
// result.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.h == nil || o.h.TotalCount() == 0 {
		return
	}
	h.init()
	for idx, c := range o.h.Export().Counts {
		if c != 0 {
			// Cannot fail: the value is the start of an index of the same layout.
			_ = h.h.RecordValues(valueAtIndex(idx), c)
		}
	}
}

// The geometry hdrhistogram-go gives this package's layout (Lowest 1, SigFigs 3): a value's unit is
// 2^unitMagnitude (floor(log2(Lowest))), and each bucket after the first holds 2^halfMagnitude
// sub-buckets (ceil(log2(2 × 10^SigFigs)) − 1). TestValueAtIndexMatchesHDR checks every index.
const (
	unitMagnitude = 0
	halfMagnitude = 10
)

// valueAtIndex is the lowest value that hdrhistogram-go counts at index idx of this layout's counts
// array: index (b+1)·2^halfMagnitude + s − 2^halfMagnitude is sub-bucket s of bucket b, whose
// values start at s << (b + unitMagnitude).
func valueAtIndex(idx int) int64 {
	const half = 1 << halfMagnitude
	if idx < half {
		return int64(idx) << unitMagnitude
	}
	b := idx>>halfMagnitude - 1
	s := idx&(half-1) + half
	return int64(s) << (b + unitMagnitude)
}

// Clone returns an independent copy. It copies the counts (hdrhistogram-go's Clone) instead of
// merging them into a new histogram, which walks every bucket up to the largest value: the engine
// clones each interval's histograms into the timeline every second.
func (h *Histogram) Clone() *Histogram {
	if h == nil || h.h == nil {
		return New()
	}
	return &Histogram{h: h.h.Clone()}
}

// Reset removes every sample.
func (h *Histogram) Reset() {
	if h.h != nil {
		h.h.Reset()
	}
}

// Count returns the number of samples.
func (h *Histogram) Count() int64 {
	if h.h == nil {
		return 0
	}
	return h.h.TotalCount()
}

// Quantile returns the value at quantile q (0..1) as a duration; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.ValueAtQuantile(q*100)) * time.Microsecond
}

// Min returns the smallest sample (at histogram resolution); 0 when empty.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Min()) * time.Microsecond
}

// Max returns the largest sample (at histogram resolution); 0 when empty.
func (h *Histogram) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Max()) * time.Microsecond
}

// Mean returns the mean sample; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Mean() * float64(time.Microsecond))
}

// Summary is the human-facing digest of a histogram, in milliseconds.
type Summary struct {
	Count   int64   `json:"count"`
	MinMs   float64 `json:"min_ms"`
	MeanMs  float64 `json:"mean_ms"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P95Ms   float64 `json:"p95_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p99_9_ms"`
	P9999Ms float64 `json:"p99_99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary computes the digest.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count:   h.Count(),
		MinMs:   ms(h.Min()),
		MeanMs:  ms(h.Mean()),
		P50Ms:   ms(h.Quantile(0.50)),
		P90Ms:   ms(h.Quantile(0.90)),
		P95Ms:   ms(h.Quantile(0.95)),
		P99Ms:   ms(h.Quantile(0.99)),
		P999Ms:  ms(h.Quantile(0.999)),
		P9999Ms: ms(h.Quantile(0.9999)),
		MaxMs:   ms(h.Max()),
	}
}

// jsonForm is the stable on-disk form. Encoded is authoritative; the rest is for readers.
type jsonForm struct {
	Unit    string `json:"unit"`
	Lowest  int64  `json:"lowest"`
	Highest int64  `json:"highest"`
	SigFigs int    `json:"significant_figures"`
	Summary
	Encoded string `json:"hdr"`
}

// MarshalJSON writes the summary and the compressed HDR encoding.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	h.init()
	enc, err := h.h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("hist: encoding histogram: %w", err)
	}
	return json.Marshal(jsonForm{
		Unit: "us", Lowest: Lowest, Highest: Highest, SigFigs: SigFigs,
		Summary: h.Summary(), Encoded: string(enc),
	})
}

// ErrBadEncoding reports a histogram JSON whose HDR encoding cannot be read.
var ErrBadEncoding = errors.New("hist: bad histogram encoding")

// UnmarshalJSON reads the form written by MarshalJSON. The HDR encoding is authoritative; a file
// whose encoding is missing or corrupt is rejected rather than trusted on its summary.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var f jsonForm
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("hist: reading histogram: %w", err)
	}
	if f.Encoded == "" {
		return fmt.Errorf("%w: the \"hdr\" field is missing or empty", ErrBadEncoding)
	}
	if len(f.Encoded) > 64<<20 {
		return fmt.Errorf("%w: encoding of %d bytes exceeds the 64 MiB limit", ErrBadEncoding, len(f.Encoded))
	}
	d, err := decode([]byte(f.Encoded))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadEncoding, err)
	}
	// An encoding of this package's own layout is used as decoded (reports read thousands of
	// interval histograms); any other layout is re-recorded into it, refusing samples out of range.
	n := d
	if d.LowestTrackableValue() != Lowest || d.HighestTrackableValue() != Highest || d.SignificantFigures() != SigFigs {
		n = newHDR()
		if dropped := n.Merge(d); dropped != 0 {
			return fmt.Errorf("%w: %d samples outside the range 1 µs..10 min", ErrBadEncoding, dropped)
		}
	}
	if f.Count != 0 && f.Count != n.TotalCount() {
		return fmt.Errorf("%w: summary count %d disagrees with encoded count %d", ErrBadEncoding, f.Count, n.TotalCount())
	}
	h.h = n
	return nil
}

// decode guards the HDR decoder, which can panic or allocate without bound on hostile input.
func decode(b []byte) (d *hdr.Histogram, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("decoder failed: %v", r)
		}
	}()
	// The geometry is judged from the header before hdrhistogram-go allocates the counts array
	// the blob declares (a few characters can declare tens of MiB).
	g, err := ReadGeometry(b)
	if err != nil {
		return nil, err
	}
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", errGeometry, err)
	}
	d, err = hdr.Decode(b)
	if err == nil && d == nil {
		err = errors.New("empty histogram")
	}
	if err == nil && (d.LowestTrackableValue() < 1 || d.HighestTrackableValue() > math.MaxInt64/2) {
		err = errors.New("trackable range out of bounds")
	}
	return d, err
}

// Concurrent is a histogram safe for concurrent Record and Snapshot. Hot loops should prefer one
// Histogram per worker merged at the end; Concurrent is for live views (progress, stop conditions).
type Concurrent struct {
	mu sync.Mutex
	h  Histogram
}

// Record adds one sample.
func (c *Concurrent) Record(d time.Duration) {
	c.mu.Lock()
	c.h.Record(d)
	c.mu.Unlock()
}

// Merge adds every sample of o.
func (c *Concurrent) Merge(o *Histogram) {
	c.mu.Lock()
	c.h.Merge(o)
	c.mu.Unlock()
}

// Snapshot returns a copy of the samples so far.
func (c *Concurrent) Snapshot() *Histogram {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h.Clone()
}

// Bucket is one non-empty bucket of a histogram: the lowest value (µs) it holds and its count.
type Bucket struct {
	Micros, Count int64
}

// Buckets returns the non-empty buckets in value order: a sparse form (a few hundred pairs where
// the full HDR form spans the whole 1 µs..10 min range) that AddBuckets merges back exactly, for
// live snapshots sent many times a second.
func (h *Histogram) Buckets() []Bucket {
	if h == nil || h.h == nil || h.h.TotalCount() == 0 {
		return nil
	}
	var out []Bucket
	for _, b := range h.h.Distribution() {
		if b.Count > 0 {
			out = append(out, Bucket{Micros: b.From, Count: b.Count})
		}
	}
	return out
}

// AddBuckets adds buckets (from Buckets) into h; values outside the trackable range are clamped.
func (h *Histogram) AddBuckets(bs []Bucket) {
	h.init()
	for _, b := range bs {
		if b.Count <= 0 {
			continue
		}
		us := min(max(b.Micros, Lowest), Highest)
		_ = h.h.RecordValues(us, b.Count)
	}
}
