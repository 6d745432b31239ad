package result

import (
	"fmt"
	"strconv"
	"strings"
)

// Segment identifies one share of a run split into Count parts; Index runs from 0 to Count-1.
// The zero value (Count 0) means "the whole run" and behaves like Segment{Index: 0, Count: 1}.
type Segment struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Whole is the single segment that covers a whole run.
var Whole = Segment{Index: 0, Count: 1}

// MaxSegments bounds the segment count of a run (a --segment flag, a coordinated task): beyond it a
// segment's share of a run is too small to mean anything.
const MaxSegments = 10000

// ParseSegment reads "I/N", 1-based as String prints it (spaces around I and N allowed); empty is
// the whole run (the zero Segment). Anything else is an error that quotes the input and says what
// is wanted.
func ParseSegment(s string) (Segment, error) {
	if s == "" {
		return Segment{}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(strings.TrimSpace(i))
	b, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 1 || a > b {
		return Segment{}, fmt.Errorf("%q: want I/N with 1 <= I <= N, e.g. 2/4", s)
	}
	if b > MaxSegments {
		return Segment{}, fmt.Errorf("%q: at most %d segments", s, MaxSegments)
	}
	return Segment{Index: a - 1, Count: b}, nil
}

func (s Segment) norm() Segment {
	if s.Count <= 0 {
		return Whole
	}
	return s
}

// Validate reports whether the segment is well formed.
func (s Segment) Validate() error {
	if s.Count < 0 || (s.Count > 0 && (s.Index < 0 || s.Index >= s.Count)) {
		return fmt.Errorf("result: segment %d of %d is out of range: index must be 0..count-1", s.Index, s.Count)
	}
	return nil
}

// String renders "i/n" (1-based for people).
func (s Segment) String() string {
	s = s.norm()
	return fmt.Sprintf("%d/%d", s.Index+1, s.Count)
}

// Share returns this segment's part of total: total/n, plus one for the first total%n segments. The
// parts of all n segments add up to total exactly.
func (s Segment) Share(total int64) int64 {
	s = s.norm()
	n := int64(s.Count)
	q, r := total/n, total%n
	if int64(s.Index) < r {
		return q + 1
	}
	return q
}

// Range returns the contiguous part [start, start+count) of a key space 0..total-1 that this segment
// owns. The ranges of all segments tile the key space without gaps or overlap.
func (s Segment) Range(total int64) (start, count int64) {
	s = s.norm()
	n := int64(s.Count)
	q, r := total/n, total%n
	i := int64(s.Index)
	start = i*q + min(i, r)
	return start, s.Share(total)
}

// Rate returns this segment's part of an aggregate rate (requests or connections per second). The
// parts add up to rate up to floating-point rounding.
func (s Segment) Rate(rate float64) float64 {
	s = s.norm()
	return rate / float64(s.Count)
}

// Offset returns the phase offset, in [0, 1), at which this segment's evenly paced sends start, so
// that N segments each pacing rate/N interleave into one even stream of rate.
func (s Segment) Offset() float64 {
	s = s.norm()
	return float64(s.Index) / float64(s.Count)
}

// Split returns all n segments.
func Split(n int) []Segment {
	if n < 1 {
		n = 1
	}
	out := make([]Segment, n)
	for i := range out {
		out[i] = Segment{Index: i, Count: n}
	}
	return out
}

// Sub splits this segment again into n sub-segments (for a machine that fans out to processes): the
// result is a segment of the whole run, so the same key space and totals still tile exactly.
func (s Segment) Sub(n, i int) Segment {
	s = s.norm()
	if n < 1 {
		n = 1
	}
	return Segment{Index: s.Index*n + i, Count: s.Count * n}
}
