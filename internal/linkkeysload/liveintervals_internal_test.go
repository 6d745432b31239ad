package linkkeysload

import (
	"encoding/json"
	"testing"

	"github.com/loadproof/loadproof/internal/result"
)

// FuzzIntervalLine: a worker's stdout line of any content is either taken as an interval line
// (well-formed or dropped) or left for the other readers; it never panics, and a merger only hands
// on intervals it was sent.
func FuzzIntervalLine(f *testing.F) {
	good, _ := json.Marshal(result.Interval{T: 1, Secs: 1, Counts: map[string]int64{"success": 3}})
	f.Add(0, intervalLinePrefix+string(good))
	f.Add(1, intervalLinePrefix+"{")
	f.Add(7, intervalLinePrefix+string(good))
	f.Add(0, workerLinePrefix+"progress 1 1 0")
	f.Add(-1, intervalLinePrefix+`{"t":1,"latency":{"x":{"hdr":"AAAA"}}}`)
	f.Fuzz(func(t *testing.T, worker int, line string) {
		var got int64
		m := newIntervalMerger(2, func(iv *result.Interval) { got += iv.Total() })
		taken := m.line(worker, line)
		if !taken && len(line) >= len(intervalLinePrefix) && line[:len(intervalLinePrefix)] == intervalLinePrefix {
			t.Fatalf("an interval line was not taken: %q", line)
		}
		m.line(1-worker, line)
		m.flush()
		if got < 0 {
			t.Fatalf("handed on a negative total %d", got)
		}
	})
}

// TestIntervalMergerWaitsForEveryWorker: the k-th intervals merge once every worker sent its k-th,
// in order; flush hands on the rest.
func TestIntervalMergerWaitsForEveryWorker(t *testing.T) {
	var out []result.Interval
	m := newIntervalMerger(2, func(iv *result.Interval) { out = append(out, *iv) })
	send := func(w int, t float64, n int64) {
		b, _ := json.Marshal(result.Interval{T: t, Secs: 1, Counts: map[string]int64{"success": n}})
		m.line(w, intervalLinePrefix+string(b))
	}
	send(0, 0, 1)
	send(0, 1, 2)
	if len(out) != 0 {
		t.Fatalf("handed on before the other worker sent: %+v", out)
	}
	send(1, 0, 10)
	if len(out) != 1 || out[0].Counts["success"] != 11 {
		t.Fatalf("after both sent the first: %+v", out)
	}
	send(0, 2, 3)
	m.flush()
	if len(out) != 3 || out[1].Counts["success"] != 2 || out[2].Counts["success"] != 3 || out[2].T != 2 {
		t.Fatalf("after flush: %+v", out)
	}
}
