package hist

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPercentilesMicrosMatchQuantile(t *testing.T) {
	h := New()
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i*37%9973+1) * time.Microsecond)
	}
	ps := []float64{99.9, 50, 90, 99}
	got := h.PercentilesMicros(ps)
	if top := h.PercentilesMicros([]float64{100}); top[0] != h.MaxMicros() {
		t.Errorf("100th percentile %d µs, max %d µs", top[0], h.MaxMicros())
	}
	for i, p := range ps {
		if want := h.Quantile(p / 100).Microseconds(); got[i] != want {
			t.Errorf("p%g: one-pass %d µs, Quantile %d µs", p, got[i], want)
		}
	}
	if got := New().PercentilesMicros(ps); len(got) != 4 || got[0] != 0 {
		t.Errorf("empty histogram: %v, want four zeros", got)
	}
	var zero Histogram
	if zero.MaxMicros() != 0 || len(zero.Distribution(5)) != 0 {
		t.Error("the zero histogram has a max or a distribution")
	}
}

func TestDistributionEndsAtTheWhole(t *testing.T) {
	h := New()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	d := h.Distribution(5)
	if len(d) < 20 {
		t.Fatalf("%d points, want a distribution of many steps", len(d))
	}
	last := d[len(d)-1]
	if last.Percentile != 1 || last.Count != 1000 || last.ValueUs != h.MaxMicros() {
		t.Errorf("last point %+v, want 100%% of 1000 at the max %d", last, h.MaxMicros())
	}
	for i := 1; i < len(d); i++ {
		if d[i].Percentile < d[i-1].Percentile || d[i].ValueUs < d[i-1].ValueUs {
			t.Fatalf("point %d %+v goes backwards from %+v", i, d[i], d[i-1])
		}
	}
}

// TestHGRMLayout checks the text against HdrHistogram's outputPercentileDistribution layout, and
// the footer's bucket counts against the HDR library's own.
func TestHGRMLayout(t *testing.T) {
	h := New()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	var b bytes.Buffer
	if err := h.WriteHGRM(&b, 1000); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if lines[0] != "       Value     Percentile TotalCount 1/(1-Percentile)" || lines[1] != "" {
		t.Fatalf("header %q %q", lines[0], lines[1])
	}
	row := regexp.MustCompile(`^ *\d+\.\d{3} \d\.\d{12} +\d+ +\d+\.\d{2}$`)
	lastRow := regexp.MustCompile(`^ *\d+\.\d{3} 1\.000000000000 +1000$`)
	n := len(lines)
	for _, l := range lines[2 : n-4] {
		if !row.MatchString(l) {
			t.Errorf("row %q is not in the hgrm layout", l)
		}
	}
	if !lastRow.MatchString(lines[n-4]) {
		t.Errorf("last row %q", lines[n-4])
	}
	if !strings.HasPrefix(lines[n-3], "#[Mean    = ") || !strings.Contains(lines[n-2], "Total count    =         1000]") {
		t.Errorf("footer %q %q", lines[n-3], lines[n-2])
	}
	var lib bytes.Buffer
	if _, err := h.h.PercentilesPrint(&lib, 5, 1000); err != nil {
		t.Fatal(err)
	}
	libLines := strings.Split(strings.TrimSuffix(lib.String(), "\n"), "\n")
	if got, want := strings.Fields(lines[n-1]), strings.Fields(libLines[len(libLines)-1]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bucket footer %v, the library says %v", got, want)
	}
}
