package hist

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// blob builds a V2-compressed HDR encoding declaring the given geometry with an empty payload.
func blob(t testing.TB, lowest, highest int64, sig, payload int32) string {
	var inner bytes.Buffer
	for _, v := range []any{int32(v2Cookie | 0x10), payload, int32(0), sig, lowest, highest, float64(1)} {
		if err := binary.Write(&inner, binary.BigEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	w.Write(inner.Bytes())
	w.Close()
	var out bytes.Buffer
	binary.Write(&out, binary.BigEndian, int32(v2CompressedCookie|0x10))
	binary.Write(&out, binary.BigEndian, int32(z.Len()))
	out.Write(z.Bytes())
	return base64.StdEncoding.EncodeToString(out.Bytes())
}

// TestCountsLenMatchesLibrary: countsLen is hdrhistogram-go's own arithmetic.
func TestCountsLenMatchesLibrary(t *testing.T) {
	for _, g := range []Geometry{
		{Lowest: 1, Highest: Highest, SigFigs: 3}, {Lowest: 1, Highest: 2, SigFigs: 1},
		{Lowest: 1000, Highest: 3_600_000_000, SigFigs: 2}, {Lowest: 1, Highest: math.MaxInt64 / 2, SigFigs: 3},
		{Lowest: 7, Highest: 1 << 40, SigFigs: 4}, {Lowest: 1, Highest: 1000, SigFigs: 5},
	} {
		want := int64(len(hdr.New(g.Lowest, g.Highest, int(g.SigFigs)).Export().Counts))
		if got := g.countsLen(); got != want {
			t.Errorf("%+v: countsLen %d, library %d", g, got, want)
		}
	}
}

// TestWideGeometryRefusedBeforeAllocation (issue 27, finding 5): a ~52-character blob declaring
// 1..2^62 at 5 figures made hdrhistogram-go allocate ~49 MB; it is refused from its header.
func TestWideGeometryRefusedBeforeAllocation(t *testing.T) {
	enc := blob(t, 1, math.MaxInt64/2, 5, 0)
	if len(enc) > 64 {
		t.Fatalf("blob is %d characters", len(enc))
	}
	doc := []byte(`{"unit":"us","hdr":"` + enc + `"}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var h Histogram
	err := json.Unmarshal(doc, &h)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "counts") {
		t.Fatalf("wide geometry accepted: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("refusing a %d-character blob allocated %d bytes (bound 4 MiB)", len(enc), alloc)
	}
	// Our own layout's header passes the check.
	if err := (Geometry{Lowest: Lowest, Highest: Highest, SigFigs: SigFigs}).Check(); err != nil {
		t.Fatal(err)
	}
}

func TestGeometryCheck(t *testing.T) {
	for _, tc := range []struct {
		g    Geometry
		want string
	}{
		{Geometry{Lowest: 0, Highest: 10, SigFigs: 3}, "lowest trackable value 0"},
		{Geometry{Lowest: 10, Highest: 15, SigFigs: 3}, "highest trackable value"},
		{Geometry{Lowest: 1, Highest: 1000, SigFigs: 6}, "significant figures"},
		{Geometry{Lowest: 1, Highest: math.MaxInt64, SigFigs: 3}, "highest trackable value"},
		{Geometry{Lowest: 1, Highest: 1 << 40, SigFigs: 5}, "counts"},
		{Geometry{Lowest: 1, Highest: Highest, SigFigs: 3, PayloadLength: 1 << 30}, "payload length"},
		{Geometry{Lowest: 1, Highest: Highest, SigFigs: 3, PayloadLength: -1}, "negative payload"},
	} {
		if err := tc.g.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.g, err, tc.want)
		}
	}
}

// FuzzReadGeometry: any blob is judged in bounded memory; what Check accepts decodes into at most
// MaxCounts counts.
func FuzzReadGeometry(f *testing.F) {
	f.Add([]byte(blob(f, 1, Highest, 3, 0)))
	f.Add([]byte(blob(f, 1, math.MaxInt64/2, 5, 0)))
	f.Add([]byte("HISTFAAAACl4nJNpmSzMwMDAxQABzFCaEUzOmNZg/wEi0NzIyPgTACz8BB0="))
	f.Add([]byte("!!"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ReadGeometry(b)
		if err != nil || g.Check() != nil {
			return
		}
		d, err := decode(b)
		if err == nil && len(d.Export().Counts) > MaxCounts {
			t.Fatalf("accepted geometry %+v decoded into %d counts", g, len(d.Export().Counts))
		}
	})
}

// TestManyWideBlobsStayBounded (issue 27, finding 5): a file of thousands of blobs at the widest
// geometry allowed is read in bounded memory: each costs at most one layout's counts, freed before
// the next. Allocation is bounded per blob; the time is logged, not asserted.
func TestManyWideBlobsStayBounded(t *testing.T) {
	enc := blob(t, 1, math.MaxInt64/2, 5, 0) // refused from its header
	ok := blob(t, 1, 1<<20, 3, 0)            // allowed: fewer counts than our layout
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	const n = 2000
	for i := range n {
		e := enc
		if i%2 == 1 {
			e = ok
		}
		var h Histogram
		_ = json.Unmarshal([]byte(`{"hdr":"`+e+`"}`), &h)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d blobs in %v, %d bytes allocated a blob", n, time.Since(start), per)
	if per > 2*MaxCounts*8+(64<<10) {
		t.Fatalf("%d bytes allocated a blob, above two layouts' counts", per)
	}
}
