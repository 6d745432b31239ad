package remotewrite

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
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

// receiver is an HTTP remote-write endpoint that decodes each request with Prometheus's own types.
type receiver struct {
	mu   sync.Mutex
	reqs []prompb.WriteRequest
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	raw, err := snappy.Decode(nil, b)
	var req prompb.WriteRequest
	if err == nil {
		err = req.Unmarshal(raw)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, req)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// last returns, from the newest request holding it, the value of the series named name whose
// labels include want.
func (rc *receiver) last(name string, want map[string]string) (float64, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i := len(rc.reqs) - 1; i >= 0; i-- {
	series:
		for _, ts := range rc.reqs[i].Timeseries {
			got := map[string]string{}
			for _, l := range ts.Labels {
				got[l.Name] = l.Value
			}
			if got["__name__"] != name {
				continue
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return ts.Samples[0].Value, true
		}
	}
	return 0, false
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// TestPhasesCountApartAndFlushDelivers: intervals closing faster than Every are carried by the next
// request; Flush sends what is pending and returns once it is delivered; after SetPhase the series
// carry the new phase and count from zero; PhaseStats counts the phase's requests only.
func TestPhasesCountApartAndFlushDelivers(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	w, err := New(Config{URL: srv.URL + "/api/v1/write", Labels: map[string]string{"run_id": "r1", "phase": "warm"}, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		w.Observe(&result.Interval{Counts: map[string]int64{"ok": 3, "refused_rate": 1}})
	}
	st := w.Flush(ctx)
	if st.Sent != 2 || rc.count() != 2 { // the first interval, then the flush of the other four
		t.Fatalf("after flush: stats %+v, %d requests received; want 2 sent", st, rc.count())
	}
	if v, ok := rc.last("loadproof_operations_total", map[string]string{"phase": "warm", "outcome": "ok", "run_id": "r1"}); !ok || v != 15 {
		t.Fatalf("warm ok total %v (found %v); want 15", v, ok)
	}
	w.SetPhase("step 2")
	w.Observe(&result.Interval{Counts: map[string]int64{"ok": 7}})
	st = w.Flush(ctx)
	if st.Sent != 1 {
		t.Fatalf("phase stats %+v; want 1 sent in the second phase", st)
	}
	if v, ok := rc.last("loadproof_operations_total", map[string]string{"phase": "step 2", "outcome": "ok"}); !ok || v != 7 {
		t.Fatalf("step 2 ok total %v (found %v); want 7, counted from zero", v, ok)
	}
	if _, ok := rc.last("loadproof_operations_total", map[string]string{"phase": "step 2", "outcome": "refused_rate"}); ok {
		t.Fatal("the second phase carries the first phase's refusals")
	}
	final := w.Close(ctx)
	if final.Sent != 3 || final.Dropped != 0 || final.Failed != 0 {
		t.Fatalf("close: %+v; want 3 sent, nothing lost", final)
	}
}

func TestParseLabel(t *testing.T) {
	if k, v, err := ParseLabel("search=knee 2"); err != nil || k != "search" || v != "knee 2" {
		t.Fatalf("%q %q %v", k, v, err)
	}
	if k, _, err := ParseLabel("phase=step 1"); err != nil || k != "phase" {
		t.Fatalf("phase: %q %v", k, err)
	}
	for in, want := range map[string]string{"x": "want name=value", "=v": "want name=value", "a=": "want name=value",
		"1a=v": "Prometheus label name", "a-b=v": "Prometheus label name", "__name__=v": "Prometheus's own",
		"run_id=x": "loadproof sets it", "a=\xff": "UTF-8", "a=" + strings.Repeat("v", 2000): "at most"} {
		if _, _, err := ParseLabel(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLabel(%.20q) = %v; want %q", in, err, want)
		}
	}
}

func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"a=b", "phase=x", "__x=1", "run_id=1", "é=1", "a=\xff", "=", "a==b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := ParseLabel(s)
		if err != nil {
			return
		}
		if k == "" || v == "" || strings.HasPrefix(k, "__") || reservedLabels[k] || !utf8.ValidString(v) || strings.ContainsAny(k, "=-. ") {
			t.Fatalf("accepted %q: %q %q", s, k, v)
		}
	})
}
