package remotewrite

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
)

// TestNativeHistogramKeepsCountsAndBuckets: the conversion keeps every sample, places each in the
// native bucket whose bounds hold its value, and encodes spans and deltas that add back up.
func TestNativeHistogramKeepsCountsAndBuckets(t *testing.T) {
	h := hist.New()
	for _, d := range []time.Duration{50 * time.Microsecond, 51 * time.Microsecond, time.Millisecond, time.Millisecond, 3 * time.Second} {
		h.Record(d)
	}
	nh := NativeHistogram(h)
	if nh.GetCountInt() != 5 || nh.Schema != Schema {
		t.Fatalf("count %d schema %d", nh.GetCountInt(), nh.Schema)
	}
	var idx int32
	var count, total int64
	base := math.Pow(2, math.Pow(2, -Schema))
	d := 0
	for si, sp := range nh.PositiveSpans {
		if si == 0 {
			idx = sp.Offset
		} else {
			idx += sp.Offset
		}
		for range sp.Length {
			count += nh.PositiveDeltas[d]
			total += count
			lo, hi := math.Pow(base, float64(idx-1)), math.Pow(base, float64(idx))
			if count <= 0 || hi <= lo {
				t.Fatalf("bucket %d: count %d", idx, count)
			}
			d++
			idx++
		}
	}
	if total != 5 || d != len(nh.PositiveDeltas) {
		t.Fatalf("buckets add to %d of 5 (%d deltas of %d)", total, d, len(nh.PositiveDeltas))
	}
	for _, v := range []float64{1e-6, 0.00005, 0.001, 1, 3, 1.5} {
		i := nativeIndex(v)
		if lo, hi := math.Pow(base, float64(i-1)), math.Pow(base, float64(i)); !(v > lo*(1-1e-12) && v <= hi*(1+1e-12)) {
			t.Errorf("%v in bucket %d (%v, %v]", v, i, lo, hi)
		}
	}
}

func TestParseHeaderAndURL(t *testing.T) {
	if k, v, err := ParseHeader("Authorization: Bearer abc"); err != nil || k != "Authorization" || v != "Bearer abc" {
		t.Fatalf("%q %q %v", k, v, err)
	}
	for in, want := range map[string]string{"nocolon": "want 'Name: value'", ": x": "want 'Name: value'", "Bad Name: x": "not a valid HTTP header name",
		"X: a\nb": "line break", strings.Repeat("x", 9000): "at most"} {
		if _, _, err := ParseHeader(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHeader(%.20q) = %v; want %q", in, err, want)
		}
	}
	for in, want := range map[string]string{"ftp://x/": "want http", "http://": "want http", "http://u:p@h/": "credentials", "::": "missing protocol scheme"} {
		if _, err := CheckURL(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v; want %q", in, err, want)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"Authorization: Bearer x", "X-Scope-OrgID:1", ":", "a\r\nb: c", "é: v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := ParseHeader(s)
		if err != nil {
			return
		}
		if k == "" || strings.ContainsAny(k+v, "\r\n\x00") || strings.ContainsAny(k, " :") {
			t.Fatalf("accepted %q: %q %q", s, k, v)
		}
	})
}
