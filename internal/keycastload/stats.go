package keycastload

import (
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/keycastresult"
)

// cacheHitUnder is upstream's cache-hit heuristic: a successful request faster than this was
// probably served from the handler cache.
const cacheHitUnder = 15 * time.Millisecond

// stats accumulates requests: counts, latency histograms, failure causes and open-model figures.
type stats struct {
	counts keycastresult.Counts
	lat    *hist.Histogram // latency (from the intended time in the open model)
	unc    *hist.Histogram // open model: latency from the actual send
	causes map[string]int64
	late   uint64 // open model: sends later than LateThreshold
	sent   uint64 // open model: tickets sent
}

func newStats(open bool) *stats {
	s := &stats{lat: hist.New(), causes: map[string]int64{}}
	if open {
		s.unc = hist.New()
	}
	return s
}

func (s *stats) reset() {
	s.counts = keycastresult.Counts{}
	s.lat.Reset()
	if s.unc != nil {
		s.unc.Reset()
	}
	clear(s.causes)
	s.late, s.sent = 0, 0
}

// mergeInto adds s into o.
func (s *stats) mergeInto(o *stats) {
	o.counts.Add(s.counts)
	o.lat.Merge(s.lat)
	if s.unc != nil && o.unc != nil {
		o.unc.Merge(s.unc)
	}
	for k, v := range s.causes {
		o.causes[k] += v
	}
	o.late += s.late
	o.sent += s.sent
}

// shard is one lock-protected stats bucket shared by a few workers. The collector swaps cur out
// under the lock, so every sample lands in exactly one swapped-out bucket.
type shard struct {
	mu  sync.Mutex
	cur *stats
	_   [48]byte // keep shards on separate cache lines
}

// sample is one finished request.
type sample struct {
	class Class
	cause string
	lat   time.Duration // from the intended time (open model) or the send (closed model)
	unc   time.Duration // from the actual send (open model)
	late  bool
}

func (sh *shard) record(smp *sample, open bool) {
	sh.mu.Lock()
	s := sh.cur
	addClass(&s.counts, smp.class)
	s.lat.Record(smp.lat)
	svc := smp.lat
	if open {
		s.unc.Record(smp.unc)
		s.sent++
		if smp.late {
			s.late++
		}
		svc = smp.unc
	}
	if smp.class == Success && svc < cacheHitUnder {
		s.counts.CacheHitEstimate++
	}
	if smp.cause != "" {
		s.causes[smp.cause]++
	}
	sh.mu.Unlock()
}

// window is the ring of one-second buckets that live stop conditions judge.
type window struct {
	slots []winSlot
	pos   int
	tmp   *hist.Histogram
}

type winSlot struct {
	counts keycastresult.Counts
	lat    *hist.Histogram
}

func newWindow(seconds int) *window {
	w := &window{slots: make([]winSlot, max(seconds, 1)), tmp: hist.New()}
	for i := range w.slots {
		w.slots[i].lat = hist.New()
	}
	return w
}

func (w *window) add(s *stats) {
	sl := &w.slots[w.pos]
	sl.counts.Add(s.counts)
	sl.lat.Merge(s.lat)
}

// advance starts a new one-second slot, dropping the oldest.
func (w *window) advance() {
	w.pos = (w.pos + 1) % len(w.slots)
	w.slots[w.pos].counts = keycastresult.Counts{}
	w.slots[w.pos].lat.Reset()
}

// totals returns the window's counts and latency histogram (valid until the next call).
func (w *window) totals() (keycastresult.Counts, *hist.Histogram) {
	var c keycastresult.Counts
	w.tmp.Reset()
	for i := range w.slots {
		c.Add(w.slots[i].counts)
		w.tmp.Merge(w.slots[i].lat)
	}
	return c, w.tmp
}
