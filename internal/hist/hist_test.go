package hist

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestMergeIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	whole := New()
	parts := []*Histogram{New(), New(), New()}
	for i := 0; i < 30000; i++ {
		d := time.Duration(r.IntN(5_000_000)) * time.Microsecond
		whole.Record(d)
		parts[i%3].Record(d)
	}
	var merged Histogram // zero value must work
	for _, p := range parts {
		merged.Merge(p)
	}
	if merged.Count() != whole.Count() {
		t.Fatalf("count %d != %d", merged.Count(), whole.Count())
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		if a, b := merged.Quantile(q), whole.Quantile(q); a != b {
			t.Errorf("q%.4f: merged %v, whole %v", q, a, b)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	h := New()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Summary() != h.Summary() {
		t.Fatalf("summary changed: %+v vs %+v", back.Summary(), h.Summary())
	}
	if p := back.Quantile(0.5); p < 499*time.Millisecond || p > 501*time.Millisecond {
		t.Fatalf("p50 %v, want about 500ms", p)
	}
}

func TestClampsOutOfRange(t *testing.T) {
	var h Histogram
	h.Record(0)
	h.Record(time.Hour)
	if h.Count() != 2 || h.Max() < 599*time.Second || h.Min() != time.Microsecond {
		t.Fatalf("count %d min %v max %v", h.Count(), h.Min(), h.Max())
	}
}

func TestUnmarshalRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       `{`,
		"missing hdr":    `{"unit":"us"}`,
		"garbage hdr":    `{"hdr":"!!!notbase64"}`,
		"count mismatch": "",
	} {
		if name == "count mismatch" {
			h := New()
			h.Record(time.Millisecond)
			b, _ := json.Marshal(h)
			in = strings.Replace(string(b), `"count":1`, `"count":7`, 1)
		}
		var h Histogram
		err := json.Unmarshal([]byte(in), &h)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if name != "not json" && !errors.Is(err, ErrBadEncoding) {
			t.Errorf("%s: error %v is not ErrBadEncoding", name, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	h := New()
	h.Record(3 * time.Millisecond)
	b, _ := json.Marshal(h)
	f.Add(b)
	f.Add([]byte(`{"hdr":"HISTFAAAACR4nJNpmSzMwMDAwgABzFCaEUzOmQQRAAA0oQJB"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Histogram
		if err := json.Unmarshal(b, &h); err != nil {
			return
		}
		// Whatever is accepted must survive a round trip unchanged.
		out, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		var back Histogram
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if back.Count() != h.Count() {
			t.Fatalf("count changed %d -> %d", h.Count(), back.Count())
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	for i := 0; i < b.N; i++ {
		h.Record(time.Duration(i%100000) * time.Microsecond)
	}
}

func TestBucketsRoundTripExactly(t *testing.T) {
	h := New()
	for i := range 5000 {
		h.Record(time.Duration(i*i%900_000+1) * time.Microsecond)
	}
	h.Record(time.Hour) // clamped
	back := New()
	back.AddBuckets(h.Buckets())
	back.AddBuckets(nil)
	if back.Count() != h.Count() || back.Summary() != h.Summary() {
		t.Fatalf("sparse round trip: %+v; want %+v", back.Summary(), h.Summary())
	}
	if New().Buckets() != nil {
		t.Error("an empty histogram has buckets")
	}
}

// TestCloneIsIndependent checks Clone copies every count and shares nothing with the original.
func TestCloneIsIndependent(t *testing.T) {
	h := New()
	for i := range 3000 {
		h.Record(time.Duration(i*i%7_000_000+1) * time.Microsecond)
	}
	c := h.Clone()
	if c.Summary() != h.Summary() || !c.h.Equals(h.h) {
		t.Fatalf("clone %+v, original %+v", c.Summary(), h.Summary())
	}
	c.Record(time.Hour)
	h.Record(time.Microsecond)
	if c.Count() != 3001 || h.Count() != 3001 || c.Max() <= h.Max() {
		t.Fatalf("clone and original share state: %d %d", c.Count(), h.Count())
	}
	var zero Histogram
	if zero.Clone().Count() != 0 || (*Histogram)(nil).Clone().Count() != 0 {
		t.Fatal("clone of an empty histogram has samples")
	}
}

// TestValueAtIndexMatchesHDR records the value valueAtIndex gives for every index of this layout's
// counts array once, and checks hdrhistogram-go counted each exactly at that index.
func TestValueAtIndexMatchesHDR(t *testing.T) {
	h := newHDR()
	n := len(h.Export().Counts)
	for idx := 0; idx < n; idx++ {
		if v := valueAtIndex(idx); v >= Lowest && v <= Highest {
			if err := h.RecordValue(v); err != nil {
				t.Fatalf("index %d: value %d refused: %v", idx, v, err)
			}
		}
	}
	for idx, c := range h.Export().Counts {
		v := valueAtIndex(idx)
		want := int64(1)
		if v < Lowest || v > Highest {
			want = 0
		}
		if c != want {
			t.Fatalf("index %d (value %d) holds %d, want %d", idx, v, c, want)
		}
	}
}

// mergeSamples builds a histogram from fuzz bytes: each 3-byte group is a value spread over the
// whole range (log scale) and a repeat count.
func mergeSamples(b []byte) *Histogram {
	h := New()
	for len(b) >= 3 {
		v := int64(math.Exp(float64(binary.BigEndian.Uint16(b)) / 65535 * math.Log(Highest*2)))
		h.h.RecordValues(min(max(v, Lowest), Highest), int64(b[2])+1)
		b = b[3:]
	}
	return h
}

// FuzzMergeMatchesHDR: merging through the counts array gives exactly what hdrhistogram-go's Merge
// gives, into an empty histogram and into one with samples of its own.
func FuzzMergeMatchesHDR(f *testing.F) {
	f.Add([]byte{0, 0, 0}, []byte{})
	f.Add([]byte{255, 255, 9, 128, 0, 1, 12, 34, 200}, []byte{200, 1, 0, 0, 1, 7})
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 300), []byte{9, 9, 9})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		src, dst := mergeSamples(a), mergeSamples(b)
		want := dst.h.Clone()
		want.Merge(src.h)
		dst.Merge(src)
		if !dst.h.Equals(want) || dst.Count() != want.TotalCount() {
			t.Fatalf("merge differs from hdrhistogram-go's: %+v against %d samples", dst.Summary(), want.TotalCount())
		}
	})
}

// BenchmarkMerge compares hdrhistogram-go's Merge (hdr) with this package's (hist) on two shapes
// of one second of a shard's samples: a ramp's (200 latencies from 1 ms to 7 s) and a generator's
// (20,000 from 100 µs to 50 ms).
func BenchmarkMerge(b *testing.B) {
	for _, c := range []struct {
		name   string
		n      int
		lo, hi float64
	}{{"ramp", 200, 1e3, 7e6}, {"generator", 20000, 100, 5e4}} {
		src := New()
		r := rand.New(rand.NewPCG(1, 2))
		for range c.n {
			src.RecordMicros(int64(c.lo * math.Pow(c.hi/c.lo, r.Float64())))
		}
		b.Run(c.name+"/hdr", func(b *testing.B) {
			dst := newHDR()
			for i := 0; i < b.N; i++ {
				dst.Merge(src.h)
			}
		})
		b.Run(c.name+"/hist", func(b *testing.B) {
			dst := New()
			for i := 0; i < b.N; i++ {
				dst.Merge(src)
			}
		})
	}
}
