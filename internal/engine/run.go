package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Outcome is what a driver says about one operation.
type Outcome struct {
	// Class is an index into Config.Classes; class 0 is success.
	Class uint8
	// Cause, when set, is counted by name (failures: "http_503_admission_rejected", "tls:TIMEOUT").
	Cause string
	// Took, when positive, replaces the engine's own measurement of the operation's service time
	// (for a driver whose operation includes work that is not part of what it measures, such as
	// closing a connection after the handshake being timed).
	Took time.Duration
	// Start is when the operation began, for a driver that times itself (Config.DriverTimed); the
	// open model measures the wait behind schedule up to it.
	Start time.Time
	// Tally, when positive, adds one to driver counter Tally-1 together with this outcome (one
	// lock instead of two for a per-operation flag such as a cache-hit estimate).
	Tally int
	// Skip says the operation was cut off by the end of the run (stop condition, signal): its
	// outcome is unknown, so it is not counted.
	Skip bool
	// NoLatency counts the outcome in its class but in no latency histogram: an attempt that never
	// became the operation being timed (a refused connect) or one cut off in flight.
	NoLatency bool
	// Retire ends this worker after this operation (counted unless Skip): it can make no more,
	// typically because the connection it owns has failed. The other workers go on; in the open
	// model they take the retired worker's share of the schedule.
	Retire bool
}

// Driver performs one operation. It is called concurrently from every worker; w carries the
// worker's identity and scratch state, n the operation's sequence number within this segment
// (Global maps it to the run-wide number), or -1 for a call that drains an operation already in
// flight after the end of the run (see Worker.Pending). Do must return when ctx ends.
type Driver interface {
	Do(ctx context.Context, w *Worker, n int64) Outcome
}

// DriverFunc adapts a function to Driver.
type DriverFunc func(ctx context.Context, w *Worker, n int64) Outcome

// Do implements Driver.
func (f DriverFunc) Do(ctx context.Context, w *Worker, n int64) Outcome { return f(ctx, w, n) }

// Worker is one request loop. A driver keeps its per-worker scratch state in State.
type Worker struct {
	ID    int
	State any
	// Intended is the open model's intended send time of the operation in progress (zero in the
	// closed model).
	Intended time.Time
	// Pending is the number of operations the driver has started on this worker and not yet
	// returned: a driver that keeps a window of operations in flight on one connection (pipelined
	// requests) starts several in one call and returns one per call. At the end of a closed-model
	// run the engine keeps calling Do (with n = -1) while Pending > 0, so operations in flight at
	// the end are counted rather than lost; a cut-off (stop condition or ctx) abandons them. A Count
	// bound hands out one ticket per call and knows nothing of the window, so such a driver suits
	// duration-bounded runs.
	Pending int
	sh      *shard
	e       *engine
}

// Started is the instant the run started (its intervals count from it).
func (w *Worker) Started() time.Time { return w.e.start }

// Ending reports whether the run has ended (its duration is up, or it was cut off): a driver that
// keeps operations in flight starts no new ones and drains what it has (see Pending).
func (w *Worker) Ending() bool { return w.e.ending.Load() }

// Done is closed when the run stops starting operations (its bound, a stop condition, a signal):
// a driver waiting between operations (a backoff) selects on it.
func (w *Worker) Done() <-chan struct{} { return w.e.endCh }

// OthersDone is closed once every other scenario of the run (ExecuteScenarios) has ended, its
// After included; in a run of one scenario it is closed from the start. An After that holds what
// its operations built until the rest of the run is over (a held population beside other
// workloads) waits on it.
func (w *Worker) OthersDone() <-chan struct{} { return w.e.others }

// Observe records a latency sample of an extra kind (an index into Config.Kinds, above 0).
func (w *Worker) Observe(kind int, d time.Duration) {
	w.sh.mu.Lock()
	w.sh.cur.lat[kind].Record(d)
	w.sh.mu.Unlock()
}

// Add adds n to a driver counter (an index into Config.Counters).
func (w *Worker) Add(counter int, n int64) {
	w.sh.mu.Lock()
	w.sh.cur.counters[counter] += n
	w.sh.mu.Unlock()
}

// Window is the sliding window of recent intervals that stop conditions judge.
type Window struct {
	slots  []winSlot
	pos    int
	filled int
	tmp    *hist.Histogram
	counts []int64
}

type winSlot struct {
	counts []int64
	lat    *hist.Histogram
}

// Seconds returns the window's length in intervals filled so far.
func (w *Window) Seconds() int { return w.filled }

// Len returns the window's configured length in intervals.
func (w *Window) Len() int { return len(w.slots) }

// Counts returns the window's operations by class (valid until the next call).
func (w *Window) Counts() []int64 {
	clear(w.counts)
	for i := range w.slots {
		for c, v := range w.slots[i].counts {
			w.counts[c] += v
		}
	}
	return w.counts
}

// Latency returns the window's primary latency histogram (valid until the next call).
func (w *Window) Latency() *hist.Histogram {
	w.tmp.Reset()
	for i := range w.slots {
		w.tmp.Merge(w.slots[i].lat)
	}
	return w.tmp
}

func newWindow(n, classes int) *Window {
	w := &Window{slots: make([]winSlot, max(n, 1)), tmp: hist.New(), counts: make([]int64, classes)}
	for i := range w.slots {
		w.slots[i] = winSlot{counts: make([]int64, classes), lat: hist.New()}
	}
	return w
}

func (w *Window) add(s *stats) {
	sl := &w.slots[w.pos]
	for c, v := range s.counts {
		sl.counts[c] += v
	}
	sl.lat.Merge(s.lat[0])
}

func (w *Window) advance() {
	w.filled = min(w.filled+1, len(w.slots))
	w.pos = (w.pos + 1) % len(w.slots)
	clear(w.slots[w.pos].counts)
	w.slots[w.pos].lat.Reset()
}

// Config describes one run of one segment. Zero values are documented defaults.
type Config struct {
	// Driver performs the operations (required).
	Driver Driver
	// NewState, when set, makes each worker's State.
	NewState func(id int) any
	// Classes names the outcome classes; class 0 is success. Empty means {"success", "failure"}.
	Classes []string
	// Kinds names the latency kinds; kind 0 ("latency" when empty) is measured by the engine: from
	// the send in the closed model, from the intended send time in the open model. The open model
	// adds a kind "uncorrected" (from the actual send) after the driver's kinds.
	Kinds []string
	// Counters names driver counters (Worker.Add). The open model adds "scheduled", "sent" and
	// "late" after them.
	Counters []string

	// Workers is the closed model's concurrency, or the open model's most operations in flight;
	// it is this segment's share already. 0 means 1.
	Workers int
	// Rate, when positive, selects the open model: operations per second for this segment.
	Rate float64
	// RateFrom is the open model's starting rate when RampUp is set (0 means start from nothing).
	RateFrom float64
	// RampUp is, in the closed model, the time over which workers start linearly (worker w starts
	// at RampUp·w/(Workers−1)); in the open model, the time over which the rate rises from RateFrom
	// to Rate.
	RampUp time.Duration
	// Phase offsets the open model's sends by Phase/Rate, in [0,1), so that segments interleave
	// (see Segment.Offset).
	Phase float64
	// Duration bounds the run in time (0: no bound).
	Duration time.Duration
	// Count bounds the run in operations for this segment (0: no bound). With neither bound the run
	// lasts until ctx ends.
	Count int64
	// LateThreshold is how late an open-model send may be before it counts as late; 0 means 1 ms.
	LateThreshold time.Duration

	// Drain, when positive, is how long operations still in flight at the end of the duration get
	// to finish; then they are cut off (ctx cancelled, OnCutOff called) as at a stop condition, so a
	// run against a target that stops answering still ends at Duration + Drain. 0 waits for them.
	Drain time.Duration
	// DriverTimed says the driver sets Outcome.Took (and Outcome.Start) itself, so the engine takes
	// no clock readings of its own per operation: two fewer per request on the generator's hot
	// path.
	DriverTimed bool

	// Interval is the length of one interval snapshot; 0 means 1 s. AutoInterval takes
	// FineInterval snapshots while the run is younger than FineFor and joins them into 1 s ones
	// (result.Rebinned) once it is older, so a short run has a timeline worth drawing and a long
	// one a result of the usual size.
	Interval time.Duration
	// StopWindow is the number of intervals a stop condition judges; 0 means 10. With
	// AutoInterval it counts seconds: the window's slots are 1 s whatever the snapshot length,
	// and the condition is judged once a second.
	StopWindow int
	// Stop, when set, is called after every interval with the window of recent intervals; a
	// non-nil event ends the run early and cuts off operations in flight.
	Stop func(elapsed time.Duration, w *Window) *result.StopEvent
	// OnInterval, when set, is called after every interval (and once at the end with the last,
	// possibly shorter one) with that interval and the cumulative figures so far. It runs on the
	// engine's collector goroutine: keep it short.
	OnInterval func(iv *result.Interval, total *Totals)
	// Sample, when set, reads the target's own counters once per interval (in the background, one
	// at a time, each given at most max(Interval, 1 s); a sample lands in the interval that closes
	// after it is back) into Interval.Server.
	Sample func(ctx context.Context) (map[string]float64, error)
	// MaxServerSeries bounds the distinct series kept from Sample over the run (0 means
	// DefaultMaxServerSeries): the first ones seen are kept, later new names are dropped and
	// counted in the interval's CounterServerSeriesDropped, so a target exposing thousands of
	// series cannot grow the result or the client's memory without bound.
	MaxServerSeries int
	// Progress, when set, is called after every counted operation with the run's cumulative counts
	// by class (valid during the call only), one call at a time and in the order the operations
	// were counted, so progress output can fall on exact counts (the LinkKeys seed's progress line
	// every 5,000 attempts). Every operation then also passes one run-wide lock: use it where
	// operations are slow (connection attempts), not on a hot request loop.
	Progress func(counts []int64)
	// Gauges, when set, is read as every interval closes (on the collector goroutine: keep it
	// quick) into Interval.Gauges: values at that instant, such as the connections a driver holds.
	// It returns a map of its own each call.
	Gauges func() map[string]int64
	// After, when set, runs once every operation has finished (the run's bound reached, or it was
	// cut off), and the run ends when it returns: the engine keeps closing intervals, reading
	// gauges, taking server samples and calling OnInterval meanwhile, so the timeline covers what
	// the driver does after its operations (the connections command's hold and close). w adds
	// driver counters to the interval current at the time (w.Add); ctx ends with the run's context
	// or a stop condition. A signal during After is After's to handle (it is not a stop: every
	// operation was counted).
	After func(ctx context.Context, w *Worker)
	// OnCutOff, when set, is called once when the run is cut off (stop condition or ctx), after
	// the operation context is cancelled, so a driver can interrupt blocking I/O.
	OnCutOff func()
	// Start, when set, is the instant the run starts (a coordinated start); the engine waits for it.
	Start time.Time
}

// Totals is the cumulative state of a run: counts by class, causes, counters and histograms.
type Totals struct {
	Counts   []int64
	Causes   map[string]int64
	Counters []int64
	Latency  []*hist.Histogram
	// Elapsed is the time since the run started.
	Elapsed time.Duration
}

// Total returns the number of operations counted.
func (t *Totals) Total() int64 {
	var n int64
	for _, v := range t.Counts {
		n += v
	}
	return n
}

// Run is the outcome of Engine.Run: the envelope's measured part plus what the open model and
// the stop condition add.
type Run struct {
	result.Envelope
	// Totals holds the final cumulative figures in the engine's index form.
	Totals *Totals
	// Stop is the reason the run ended early (nil when it ran to its bound).
	Stop *result.StopEvent
	// Open holds the open model's schedule figures (nil in the closed model).
	Open *OpenFigures
	// Kernel is what the kernel and this process counted from the run's start to its end (network
	// counters of this namespace, CPU, the open model's late and dropped starts), not yet judged:
	// the driver knows whether the target shares this host's stack and calls machine.Judge.
	Kernel *machine.RunStats
}

// OpenFigures are the open model's schedule figures.
type OpenFigures struct {
	// Scheduled is the number of sends due by the end of the run.
	Scheduled int64
	// Sent is the number of sends made.
	Sent int64
	// Late counts sends more than LateThreshold after their intended time.
	Late int64
	// Dropped counts sends due but never made because the run ended first.
	Dropped int64
}

// StopSignal is the reason recorded when ctx ends the run.
const StopSignal = result.StopSignal

// stats is one shard's figures for the current interval.
type stats struct {
	counts   []int64
	causes   map[string]int64
	counters []int64
	lat      []*hist.Histogram
}

func newStats(classes, kinds, counters int) *stats {
	s := &stats{counts: make([]int64, classes), causes: map[string]int64{}, counters: make([]int64, counters), lat: make([]*hist.Histogram, kinds)}
	for i := range s.lat {
		s.lat[i] = hist.New()
	}
	return s
}

func (s *stats) reset() {
	clear(s.counts)
	clear(s.causes)
	clear(s.counters)
	for _, h := range s.lat {
		h.Reset()
	}
}

func (s *stats) addTo(t *Totals) {
	for i, v := range s.counts {
		t.Counts[i] += v
	}
	for k, v := range s.causes {
		t.Causes[k] += v
	}
	for i, v := range s.counters {
		t.Counters[i] += v
	}
	for i, h := range s.lat {
		t.Latency[i].Merge(h)
	}
}

// shard is one lock-protected stats bucket shared by a few workers; the collector swaps cur out
// under the lock, so every sample lands in exactly one interval.
type shard struct {
	mu  sync.Mutex
	cur *stats
	_   [40]byte // keep shards on separate cache lines
}

// engine is the state of one run.
type engine struct {
	cfg                     Config
	classes, kinds, ctrs    []string
	kUnc, cSched, cSent, cL int // open model indexes
	open                    bool
	shards                  []shard
	tickets                 atomic.Int64
	ending                  atomic.Bool
	endCh                   chan struct{}
	endOnce                 sync.Once
	opCtx                   context.Context
	cancelOps               context.CancelFunc
	cutOnce                 sync.Once
	stopMu                  sync.Mutex
	stop                    *result.StopEvent
	start                   time.Time
	late                    time.Duration
	kernelBefore            machine.Kernel
	pacer                   Pacer
	progMu                  sync.Mutex
	progCounts              []int64

	// The collector's side of the scenario (ExecuteScenarios), touched by the collector only.
	total          *Totals
	spare, ivStats *stats
	win            *Window
	intervals      []result.Interval
	last           time.Time // the start of the interval in progress
	first          int       // the run's interval the scenario's first one is
	inSlot         int       // intervals into the stop window's current slot
	stopAt         time.Duration
	others         chan struct{} // closed once every other scenario of the run has ended
}

// ErrNoDriver is returned by Execute for a Config without a Driver.
var ErrNoDriver = errors.New("engine: no driver: Config.Driver is required")

// Execute runs one segment's load as cfg describes and returns what it measured. It returns an
// error only for a configuration it cannot run; a run cut short by ctx or a stop condition returns
// its partial figures with Stop set. It is the one-scenario case of ExecuteScenarios: cfg's
// Interval, Sample, MaxServerSeries and Start are the plan's.
func Execute(ctx context.Context, cfg Config) (*Run, error) {
	if cfg.Driver == nil {
		return nil, ErrNoDriver
	}
	p := Plan{Interval: cfg.Interval, Sample: cfg.Sample, MaxServerSeries: cfg.MaxServerSeries, Start: cfg.Start}
	cfg.Interval, cfg.Sample, cfg.MaxServerSeries, cfg.Start = 0, nil, 0, time.Time{}
	p.Scenarios = []Scenario{{Config: cfg}}
	runs, err := ExecuteScenarios(ctx, p)
	if err != nil {
		return nil, err
	}
	return runs.Scenarios[0].Run, nil
}

// newEngine checks one scenario's configuration and makes its state; the run's clock
// (Interval) is the plan's, set as the scenario begins.
func newEngine(cfg Config) (*engine, error) {
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("engine: rate %v must be a finite number of operations per second, 0 for the closed model", cfg.Rate)
	}
	if cfg.Count < 0 || cfg.Duration < 0 {
		return nil, fmt.Errorf("engine: count %d and duration %v must not be negative", cfg.Count, cfg.Duration)
	}
	e := &engine{cfg: cfg, open: cfg.Rate > 0, endCh: make(chan struct{})}
	e.classes = cfg.Classes
	if len(e.classes) == 0 {
		e.classes = []string{result.ClassSuccess, "failure"}
	}
	if len(e.classes) > 256 {
		return nil, fmt.Errorf("engine: %d outcome classes; at most 256", len(e.classes))
	}
	e.kinds = append([]string(nil), cfg.Kinds...)
	if len(e.kinds) == 0 {
		e.kinds = []string{"latency"}
	}
	e.ctrs = append([]string(nil), cfg.Counters...)
	if e.open {
		e.kUnc = len(e.kinds)
		e.kinds = append(e.kinds, "uncorrected")
		e.cSched, e.cSent, e.cL = len(e.ctrs), len(e.ctrs)+1, len(e.ctrs)+2
		e.ctrs = append(e.ctrs, "scheduled", "sent", "late")
		if cfg.RampUp > 0 {
			e.pacer = LinearPacer{From: cfg.RateFrom, To: cfg.Rate, Over: cfg.RampUp, Phase: cfg.Phase}
		} else {
			e.pacer = ConstantPacer{PerSecond: cfg.Rate, Phase: cfg.Phase}
		}
	}
	e.cfg.Workers = max(cfg.Workers, 1)
	e.cfg.StopWindow = cmp.Or(cfg.StopWindow, 10)
	e.late = cmp.Or(cfg.LateThreshold, time.Millisecond)
	e.progCounts = make([]int64, len(e.classes))
	e.shards = make([]shard, min(e.cfg.Workers, max(4, 4*runtime.GOMAXPROCS(0))))
	for i := range e.shards {
		e.shards[i].cur = e.newStats()
	}
	return e, nil
}

func (e *engine) newStats() *stats { return newStats(len(e.classes), len(e.kinds), len(e.ctrs)) }

func (e *engine) newTotals() *Totals {
	t := &Totals{Counts: make([]int64, len(e.classes)), Causes: map[string]int64{}, Counters: make([]int64, len(e.ctrs)),
		Latency: make([]*hist.Histogram, len(e.kinds))}
	for i := range t.Latency {
		t.Latency[i] = hist.New()
	}
	return t
}

// end stops new operations; those in flight finish.
func (e *engine) end() {
	e.ending.Store(true)
	e.endOnce.Do(func() { close(e.endCh) })
}

// setStop records the first reason the run ended early (at offset at from this scenario's start)
// and cuts off operations in flight.
func (e *engine) setStop(ev *result.StopEvent, at time.Duration) {
	e.stopMu.Lock()
	first := e.stop == nil
	if first {
		e.stop, e.stopAt = ev, at
	}
	e.stopMu.Unlock()
	if first {
		e.cutOff()
	}
}

// cutOff stops new operations and interrupts those in flight.
func (e *engine) cutOff() {
	e.end()
	e.cutOnce.Do(func() {
		e.cancelOps()
		if e.cfg.OnCutOff != nil {
			e.cfg.OnCutOff()
		}
	})
}

func (s *stats) merge(o *stats) {
	for i, v := range o.counts {
		s.counts[i] += v
	}
	for k, v := range o.causes {
		s.causes[k] += v
	}
	for i, v := range o.counters {
		s.counters[i] += v
	}
	for i, h := range o.lat {
		s.lat[i].Merge(h)
	}
}

// interval renders one interval's stats in the result form (names, zeros omitted).
func (e *engine) interval(s *stats, from, to time.Time) result.Interval {
	iv := result.Interval{T: from.Sub(e.start).Seconds(), Secs: to.Sub(from).Seconds()}
	for i, v := range s.counts {
		if v != 0 {
			if iv.Counts == nil {
				iv.Counts = map[string]int64{}
			}
			iv.Counts[e.classes[i]] += v
		}
	}
	if len(s.causes) > 0 {
		iv.Causes = make(map[string]int64, len(s.causes))
		for k, v := range s.causes {
			iv.Causes[k] = v
		}
	}
	for i, v := range s.counters {
		if v != 0 {
			if iv.Counters == nil {
				iv.Counters = map[string]int64{}
			}
			iv.Counters[e.ctrs[i]] += v
		}
	}
	for i, h := range s.lat {
		if h.Count() > 0 {
			if iv.Latency == nil {
				iv.Latency = map[string]*hist.Histogram{}
			}
			iv.Latency[e.kinds[i]] = h.Clone()
		}
	}
	return iv
}

// finish renders the scenario's outcome once it has ended at end.
func (e *engine) finish(end time.Time) *Run {
	total := e.total
	r := &Run{Totals: total}
	r.Classes = e.classes
	r.StartedAt, r.EndedAt = e.start, end
	r.IntervalSecs = e.cfg.Interval.Seconds()
	r.Intervals = e.intervals
	r.Totals.Elapsed = end.Sub(e.start)
	r.Envelope.Totals = make(map[string]int64, len(e.classes))
	for i, v := range total.Counts {
		r.Envelope.Totals[e.classes[i]] += v
	}
	if len(total.Causes) > 0 {
		r.Causes = total.Causes
	}
	r.Histograms = make(map[string]*hist.Histogram, len(e.kinds))
	for i, h := range total.Latency {
		r.Histograms[e.kinds[i]] = h
	}
	e.stopMu.Lock()
	r.Stop = e.stop
	stopAt := e.stopAt
	e.stopMu.Unlock()
	if e.open {
		if r.Stop == nil {
			stopAt = end.Sub(e.start)
			if e.cfg.Duration > 0 {
				stopAt = min(stopAt, e.cfg.Duration)
			}
		}
		sent := total.Counters[e.cSent]
		due := DueBy(e.pacer, stopAt, e.cfg.Count)
		if e.cfg.Count == 0 && e.cfg.Duration == 0 && r.Stop == nil {
			due = sent
		}
		due = max(due, sent)
		total.Counters[e.cSched] = due
		r.Open = &OpenFigures{Scheduled: due, Sent: sent, Late: total.Counters[e.cL], Dropped: due - sent}
	}
	r.Kernel = machine.Delta(e.kernelBefore, machine.ReadKernel(), runtime.NumCPU())
	if r.Open != nil {
		r.Kernel.Scheduled, r.Kernel.Late, r.Kernel.Dropped = r.Open.Scheduled, r.Open.Late, r.Open.Dropped
	}
	return r
}

// DueBy counts the sends a pacer schedules before offset end, at most limit when limit > 0.
func DueBy(p Pacer, end time.Duration, limit int64) int64 {
	if limit > 0 && p.At(limit-1) < end {
		return limit
	}
	// Smallest n with At(n) >= end, by doubling then bisection.
	lo, hi := int64(0), int64(1)
	for p.At(hi) < end {
		lo = hi
		hi *= 2
		if hi > 1<<50 {
			break
		}
	}
	if p.At(lo) >= end {
		return lo
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if p.At(mid) < end {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// rampDelay is the closed model's linear worker start: RampUp·w/(Workers−1).
func (e *engine) rampDelay(w int) time.Duration {
	if e.cfg.RampUp <= 0 || e.cfg.Workers <= 1 {
		return 0
	}
	return time.Duration(float64(e.cfg.RampUp) * float64(w) / float64(e.cfg.Workers-1))
}

func (e *engine) closedWorker(w *Worker) {
	if d := e.rampDelay(w.ID); d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-e.endCh: // the run ended before this worker's turn came
			tm.Stop()
			return
		}
	}
	for {
		n := int64(-1)
		if e.ending.Load() {
			// Operations still in flight on this worker are drained, unless the run was cut off.
			if w.Pending <= 0 || e.opCtx.Err() != nil {
				return
			}
		} else {
			n = e.tickets.Add(1) - 1
			if e.cfg.Count > 0 && n >= e.cfg.Count {
				e.end() // every ticket is out: workers still waiting for their ramp-up turn need not start
				return
			}
		}
		var start time.Time
		if !e.cfg.DriverTimed {
			start = time.Now()
		}
		out := e.cfg.Driver.Do(e.opCtx, w, n)
		if !out.Skip {
			took := out.Took
			if took <= 0 && !e.cfg.DriverTimed {
				took = time.Since(start)
			}
			e.record(w, &out, took, 0, false)
		}
		if out.Retire {
			return
		}
	}
}

func (e *engine) openWorker(w *Worker, sched <-chan Ticket) {
	for tk := range sched {
		if e.opCtx.Err() != nil {
			return
		}
		w.Intended = tk.Intended
		var start time.Time
		if !e.cfg.DriverTimed {
			start = time.Now()
		}
		out := e.cfg.Driver.Do(e.opCtx, w, tk.N)
		if !out.Skip {
			if e.cfg.DriverTimed {
				start = out.Start
			}
			took := out.Took
			if took <= 0 && !e.cfg.DriverTimed {
				took = time.Since(start)
			}
			wait := start.Sub(tk.Intended)
			e.record(w, &out, took, max(wait, 0), true)
		}
		if out.Retire {
			return
		}
	}
}

// record counts one operation: its class, cause, and latency (service time plus, in the open
// model, the wait behind schedule).
func (e *engine) record(w *Worker, out *Outcome, took, wait time.Duration, open bool) {
	class := int(out.Class)
	if class >= len(e.classes) {
		class = len(e.classes) - 1
	}
	sh := w.sh
	sh.mu.Lock()
	s := sh.cur
	s.counts[class]++
	if out.Cause != "" {
		s.causes[out.Cause]++
	}
	if out.Tally > 0 && out.Tally <= len(s.counters) {
		s.counters[out.Tally-1]++
	}
	if !out.NoLatency {
		s.lat[0].Record(took + wait)
	}
	if open {
		if !out.NoLatency {
			s.lat[e.kUnc].Record(took)
		}
		s.counters[e.cSent]++
		if wait > e.late && !out.NoLatency {
			s.counters[e.cL]++
		}
	}
	sh.mu.Unlock()
	if e.cfg.Progress != nil {
		e.progMu.Lock()
		e.progCounts[class]++
		e.cfg.Progress(e.progCounts)
		e.progMu.Unlock()
	}
}

// Global maps a segment-local operation number to the run-wide one: segments interleave, so
// operation n of segment i of N is run-wide operation n·N+i.
func Global(seg Segment, local int64) uint64 {
	if seg.Count <= 0 {
		return uint64(local)
	}
	return uint64(local)*uint64(seg.Count) + uint64(seg.Index)
}
