package coord

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// simulatedSnapshots returns one signed interval snapshot message per worker, each like a Keycast
// worker's second: a few classes, two causes, two latency kinds of a thousand samples each.
func simulatedSnapshots(b testing.TB, workers int, secret, run, subj string) []*nats.Msg {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]*nats.Msg, workers)
	for i := range msgs {
		lat, unc := hist.New(), hist.New()
		for range 1000 {
			d := time.Duration(200+rng.IntN(20000)) * time.Microsecond
			lat.Record(d)
			unc.Record(d / 2)
		}
		iv := &result.Interval{T: 3, Secs: 1,
			Counts:   map[string]int64{"success": 990, "intentional": 8, "network": 2},
			Causes:   map[string]int64{"http_503_admission_rejected": 8, "network_econnrefused": 2},
			Counters: map[string]int64{"cache_hit_estimate": 700},
			Latency:  map[string]*hist.Histogram{"latency": lat, "uncorrected": unc}}
		sig := newSigner(secret, workerFrom(i))
		sig.bind(run, "")
		m, err := sig.msg(subj, Snapshot{Index: i, Task: 1, Seq: 0, Interval: ToWire(iv), State: "running"})
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	return msgs
}

// BenchmarkMergeSecond1000Workers measures the coordinator's work for one second of a run of 1,000
// workers reporting at 1 Hz: checking each snapshot's signature, decoding it (histograms included)
// and merging it into the live interval. One op is that second's work, so ns/op divided by 1e9 is
// the fraction of a core the coordinator spends merging.
func BenchmarkMergeSecond1000Workers(b *testing.B) {
	const n = 1000
	c := &Coordinator{log: slog.New(slog.DiscardHandler), subj: subjects{"lp", "r"}, cfg: CoordinatorConfig{Workers: n, Progress: io.Discard}}
	msgs := simulatedSnapshots(b, n, "secret", "r", c.subj.sub("snap"))
	var size int
	for _, m := range msgs {
		size += len(m.Data)
	}
	b.ResetTimer()
	for range b.N {
		// A fresh receiver each second: the same messages are new to it.
		c.sig = newSigner("secret", "c")
		c.sig.bind("r", "c")
		c.workers = make([]*WorkerInfo, n)
		for i := range c.workers {
			c.workers[i] = &WorkerInfo{Index: i}
		}
		c.cur = &taskState{id: 1, seen: make([]int, n), finished: make([]bool, n), events: make(chan any, 4), progress: io.Discard}
		for _, m := range msgs {
			c.onSnap(m)
		}
		if c.cur.next != 1 || c.cur.merged[0].Counts["success"] != 990*n {
			b.Fatalf("merge incomplete: next %d, %v", c.cur.next, c.cur.merged[0].Counts)
		}
	}
	b.ReportMetric(float64(size)/n, "bytes/snapshot")
}
