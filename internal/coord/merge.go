package coord

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// taskState is the live merge of one task: interval k of the run is the sum of interval k of every
// worker (each counted from its own engine start, which the coordinated start makes one instant).
// Interval k is complete when every worker has sent it or has finished; complete intervals are
// printed and judged in order. Callers hold the coordinator's lock.
type taskState struct {
	id       int
	opts     TaskOptions
	startAt  time.Time
	merged   []result.Interval
	seen     []int  // per worker: intervals received
	finished []bool // per worker: result delivered
	good     []bool // per worker: a good result was fetched (repeats are ignored)
	next     int    // first interval not yet complete
	stopped  bool
	proxies  []net.Conn // hold barrier relays, by worker
	results  chan arrival
	events   chan any
	progress io.Writer

	total    int64
	failures int64
	lat      *hist.Histogram
}

// add merges one interval snapshot.
func (ts *taskState) add(c *Coordinator, s *Snapshot) {
	if s.Seq < 0 || s.Seq > 1<<20 || s.Seq != ts.seen[s.Index] {
		return // out of order or repeated: NATS keeps one publisher's order, so this is a stray
	}
	ts.seen[s.Index]++
	for len(ts.merged) <= s.Seq {
		ts.merged = append(ts.merged, result.Interval{T: s.Interval.T, Secs: s.Interval.Secs})
	}
	s.Interval.AddTo(&ts.merged[s.Seq])
	if ts.opts.ObserveWorker != nil && s.Index < len(c.workers) && c.workers[s.Index] != nil {
		var own result.Interval
		s.Interval.AddTo(&own)
		own.T = s.Interval.T
		ts.opts.ObserveWorker(s.Index, c.workers[s.Index].Name, &own)
	}
	ts.advance()
}

// finish marks a worker's result as delivered: its missing intervals no longer hold the merge up.
func (ts *taskState) finish(c *Coordinator, i int) {
	ts.finished[i] = true
	ts.advance()
}

func (ts *taskState) complete(k int) bool {
	if k >= len(ts.merged) {
		return false
	}
	for i := range ts.seen {
		if ts.seen[i] <= k && !ts.finished[i] {
			return false
		}
	}
	return true
}

func (ts *taskState) advance() {
	for ts.complete(ts.next) {
		k := ts.next
		ts.next++
		ts.report(k)
		if ts.opts.Observe != nil {
			ts.opts.Observe(&ts.merged[k])
		}
		if ts.stopped || ts.opts.Judge == nil || ts.anyFinished() {
			continue
		}
		iv := &ts.merged[k]
		if ts.opts.IntervalSecs > 0 && iv.Secs < ts.opts.IntervalSecs/2 {
			continue // the short last interval of a run is not judged, as the engine does not judge it
		}
		w := max(ts.opts.Window, 1)
		if ev := ts.opts.Judge(ts.merged[max(0, k+1-w) : k+1]); ev != nil {
			ts.stopped = true
			if ev.ElapsedSecs == 0 {
				ev.ElapsedSecs = iv.T + iv.Secs
			}
			if ev.At == "" {
				ev.At = ts.startAt.Add(time.Duration((iv.T + iv.Secs) * float64(time.Second))).UTC().Format(time.RFC3339Nano)
			}
			if ev.WindowSecs == 0 {
				ev.WindowSecs = float64(w) * iv.Secs
			}
			ts.signal(ev)
		}
	}
}

func (ts *taskState) anyFinished() bool {
	for _, f := range ts.finished {
		if f {
			return true
		}
	}
	return false
}

// signal hands an event to the task's wait loop without blocking the NATS handler.
func (ts *taskState) signal(ev any) {
	select {
	case ts.events <- ev:
	default:
	}
}

// report prints the progress line of merged interval k.
func (ts *taskState) report(k int) {
	iv := &ts.merged[k]
	n := iv.Total()
	ts.total += n
	ts.failures += n - iv.Counts[result.ClassSuccess]
	if ts.lat == nil {
		ts.lat = hist.New()
	}
	kind := ts.opts.LatencyKind
	if kind == "" {
		kind = "latency"
	}
	if h := iv.Latency[kind]; h != nil {
		ts.lat.Merge(h)
	}
	rate := 0.0
	if iv.Secs > 0 {
		rate = float64(n) / iv.Secs
	}
	fmt.Fprintf(ts.progress, "coordinate: %s t=%.0fs  %d ops (+%d, %.0f/s)  failures %d  p50=%.1fms p99=%.1fms\n",
		ts.opts.Describe, iv.T+iv.Secs, ts.total, n, rate, ts.failures,
		float64(ts.lat.Quantile(0.5))/1e6, float64(ts.lat.Quantile(0.99))/1e6)
}
