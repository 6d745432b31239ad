package coord

import (
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// taskState is the live merge of one task: a merged interval is the sum of every worker's
// intervals that fall in it, each worker counting from its own engine start, which the coordinated
// start makes one instant. Intervals are placed by time, not by number: a worker's interval goes to
// the merged interval whose start is nearest its own, within half that interval's length, else to
// the one its start falls in, else it opens the next one. So workers whose snapshots differ in
// length (one delivered a tick late; one joined its 100 ms snapshots into seconds a tick before
// another, engine.AutoInterval) still merge exactly: counts, causes, counters and histograms add;
// a gauge (and a server sample) is each worker's last reading in the merged interval, summed over
// workers, the state of the whole run at the interval's end; the merged length is the longest any
// one worker's intervals in it add up to. A merged interval is complete when every worker has sent
// an interval ending past its middle or has finished; complete intervals are printed and judged in
// order. Callers hold the coordinator's lock.
type taskState struct {
	id       int
	opts     TaskOptions
	startAt  time.Time
	merged   []result.Interval
	nominal  []float64             // per merged interval: the length of the first worker interval placed in it
	open     []map[int]*workerLast // per merged interval not yet complete: each worker's last readings in it
	last     []reading             // per worker: its latest interval's readings and end (seconds from the start)
	seen     []int                 // per worker: intervals received
	finished []bool                // per worker: result delivered
	good     []bool                // per worker: a good result was fetched (repeats are ignored)
	next     int                   // first interval not yet complete
	stopped  bool
	proxies  []net.Conn // hold barrier relays, by worker
	results  chan arrival
	events   chan any
	progress io.Writer

	total    int64
	failures int64
	lat      *hist.Histogram
	lineAt   float64 // run time of the last progress line
	lineN    int64   // operations since it
	lineSecs float64 // interval time since it
}

// workerLast is what one worker put into one merged interval that is replaced rather than added:
// its latest gauges and server sample there (or those of its interval that spans it), and the
// length of its intervals there together.
type workerLast struct {
	gauges map[string]int64
	server map[string]float64
	secs   float64
}

// reading is a worker's latest interval's gauges and server sample, and where that interval ended.
type reading struct {
	gauges map[string]int64
	server map[string]float64
	end    float64
}

// maxMerged bounds the merged intervals of a task (a run of twelve days at one a second).
const maxMerged = 1 << 20

// add merges one interval snapshot.
func (ts *taskState) add(c *Coordinator, s *Snapshot) {
	if s.Seq < 0 || s.Seq > maxMerged || s.Seq != ts.seen[s.Index] {
		return // out of order or repeated: NATS keeps one publisher's order, so this is a stray
	}
	ts.seen[s.Index]++
	w := s.Interval
	if !finiteNonNeg(w.T) || !finiteNonNeg(w.Secs) {
		return // no interval of a run: a worker's clock cannot give it
	}
	if len(ts.last) < len(ts.seen) {
		ts.last = append(ts.last, make([]reading, len(ts.seen)-len(ts.last))...)
	}
	end := w.T + w.Secs
	r := reading{gauges: w.Gauges, server: w.Server, end: max(ts.last[s.Index].end, end)}
	k := ts.place(w.T, w.Secs)
	iv := &ts.merged[k]
	plain := *w
	plain.Gauges, plain.Server, plain.Secs = nil, nil, 0
	plain.AddTo(iv)
	last := ts.entry(k, s.Index)
	last.secs += w.Secs
	iv.Secs = max(iv.Secs, last.secs)
	ts.apply(k, last, r)
	// An interval longer than the merged ones it spans (a late tick) is the worker's state at the
	// end of each of them too.
	for j := k + 1; j < len(ts.merged) && ts.mid(j) < end; j++ {
		if j >= ts.next {
			ts.apply(j, ts.entry(j, s.Index), r)
		}
	}
	ts.last[s.Index] = r
	if ts.opts.ObserveWorker != nil && s.Index < len(c.workers) && c.workers[s.Index] != nil {
		var own result.Interval
		w.AddTo(&own)
		own.T = w.T
		ts.opts.ObserveWorker(s.Index, c.workers[s.Index].Name, &own)
	}
	ts.advance()
}

// entry returns worker i's entry in open merged interval k.
func (ts *taskState) entry(k, i int) *workerLast {
	if ts.open[k] == nil {
		ts.open[k] = map[int]*workerLast{}
	}
	e := ts.open[k][i]
	if e == nil {
		e = &workerLast{}
		ts.open[k][i] = e
	}
	return e
}

// apply makes r the worker's reading in merged interval k, in place of the one it had there.
func (ts *taskState) apply(k int, e *workerLast, r reading) {
	iv := &ts.merged[k]
	if r.gauges != nil {
		iv.Gauges = replaceReading(iv.Gauges, e.gauges, r.gauges)
		e.gauges = r.gauges
	}
	if r.server != nil {
		iv.Server = replaceReading(iv.Server, e.server, r.server)
		e.server = r.server
	}
}

func (ts *taskState) mid(k int) float64 { return ts.merged[k].T + ts.nominal[k]/2 }

func finiteNonNeg(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

// replaceReading returns sum with one worker's old reading taken out and its new one put in.
func replaceReading[V int64 | float64](sum, old, cur map[string]V) map[string]V {
	if sum == nil {
		sum = make(map[string]V, len(cur))
	}
	for k, v := range old {
		sum[k] -= v
	}
	for k, v := range cur {
		sum[k] += v
	}
	return sum
}

// place returns the index of the merged interval a worker's interval starting at t and lasting
// secs goes to: the next one when it starts within a little of t (jitter: 40 % of the shorter of
// the two lengths), else the one t falls in (all but that little of its end), else a new one after
// the last. An interval that would go to a merged interval already complete goes to the first one
// not yet complete: its figures still count, a moment late. A new merged interval takes the
// readings of the workers whose latest interval spans its middle.
func (ts *taskState) place(t, secs float64) int {
	tol := func(j int) float64 {
		if secs > 0 {
			return 0.4 * min(secs, ts.nominal[j])
		}
		return 0.4 * ts.nominal[j]
	}
	n := len(ts.merged)
	i := sort.Search(n, func(i int) bool { return ts.merged[i].T > t }) // ts.merged[i-1].T <= t < ts.merged[i].T
	k := n
	switch {
	case i < n && ts.merged[i].T-t < tol(i):
		k = i
	case i == 0 && n > 0:
		k = 0 // before the first: a start a little early
	case i > 0 && (i < n || t < ts.merged[i-1].T+ts.nominal[i-1]-tol(i-1)):
		k = i - 1
	}
	k = max(k, ts.next)
	if k == n {
		if n >= maxMerged {
			return n - 1
		}
		ts.merged = append(ts.merged, result.Interval{T: t})
		ts.nominal = append(ts.nominal, secs)
		ts.open = append(ts.open, nil)
		for w, r := range ts.last {
			if r.end > ts.mid(k) {
				ts.apply(k, ts.entry(k, w), r)
			}
		}
	}
	return k
}

// finish marks a worker's result as delivered: its missing intervals no longer hold the merge up.
func (ts *taskState) finish(c *Coordinator, i int) {
	ts.finished[i] = true
	ts.advance()
	if n := len(ts.merged); ts.lineSecs > 0 && ts.next == n && !slices.Contains(ts.finished, false) {
		ts.line(ts.merged[n-1].T + ts.merged[n-1].Secs) // the run's last intervals
	}
}

func (ts *taskState) complete(k int) bool {
	if k >= len(ts.merged) {
		return false
	}
	mid := ts.mid(k)
	for i := range ts.seen {
		if !ts.finished[i] && (i >= len(ts.last) || ts.last[i].end <= mid) {
			return false
		}
	}
	return true
}

func (ts *taskState) advance() {
	for ts.complete(ts.next) {
		k := ts.next
		ts.next++
		ts.open[k] = nil // nothing more goes into it
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

// report counts merged interval k into the task's progress and prints a progress line once a
// second of the run has passed since the last one (snapshots of 100 ms make ten intervals a
// second; the line's "+n" and rate are over the intervals since the last line). The run's last
// intervals get theirs when the last worker finishes.
func (ts *taskState) report(k int) {
	iv := &ts.merged[k]
	n := iv.Total()
	ts.total += n
	ts.failures += n - iv.Counts[result.ClassSuccess]
	ts.lineN += n
	ts.lineSecs += iv.Secs
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
	if end := iv.T + iv.Secs; end >= ts.lineAt+lineEvery {
		ts.line(end)
	}
}

// line prints the progress line at run time end.
func (ts *taskState) line(end float64) {
	rate := 0.0
	if ts.lineSecs > 0 {
		rate = float64(ts.lineN) / ts.lineSecs
	}
	q := func(p float64) float64 {
		if ts.lat == nil {
			return 0
		}
		return float64(ts.lat.Quantile(p)) / 1e6
	}
	fmt.Fprintf(ts.progress, "coordinate: %s t=%.0fs  %d ops (+%d, %.0f/s)  failures %d  p50=%.1fms p99=%.1fms\n",
		ts.opts.Describe, end, ts.total, ts.lineN, rate, ts.failures, q(0.5), q(0.99))
	ts.lineAt, ts.lineN, ts.lineSecs = end, 0, 0
}

// lineEvery is the run time between two progress lines, less a little for a tick's jitter.
const lineEvery = 0.95
