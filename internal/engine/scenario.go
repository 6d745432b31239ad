package engine

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Several workloads in one run, as k6's scenarios are: each scenario has its own driver, workers
// or rate, bound, classes, kinds, counters, gauges and After, and starts at its own offset from the
// run's start; the run has one clock. Every interval closes at the same instant for every scenario
// that is running, the target is sampled once per interval for the whole run, stop conditions are
// judged on that one clock and end every scenario, and a signal cuts the whole run off. A scenario
// that reaches its bound ends alone; the run ends when the last one has. Execute is the
// one-scenario case.

// Scenario is one workload of a Plan.
type Scenario struct {
	// Name names the scenario in errors (and, for the caller, in what it makes of the result).
	Name string
	// Offset is when the scenario starts, from the run's start.
	Offset time.Duration
	// Config is the scenario's workload. The run-wide settings are the Plan's: a scenario's
	// Interval, Sample, MaxServerSeries and Start must be zero. A Config without a Driver makes no
	// operations: only its After runs (a segment whose share of the workload is empty). Its Stop,
	// judged on its own window, ends the whole run, as a ctx signal does.
	Config Config
	// Setup, when set, runs at the scenario's start (after Offset), before its first operation,
	// and returns the Config the scenario runs in Config's place: work that belongs to the
	// scenario's own time, such as opening the connections it will use. Its ctx ends with the run
	// (ctx, a stop condition). An error ends the scenario before any operation (ScenarioRun.Err);
	// the others go on. The scenario's clock starts when Setup returns.
	Setup func(ctx context.Context) (Config, error)
}

// Plan is a run of several scenarios (ExecuteScenarios).
type Plan struct {
	Scenarios []Scenario
	// Interval is the run's interval length, as Config.Interval; AutoInterval takes one scenario.
	Interval time.Duration
	// Sample, when set, reads the target's counters once per interval for the whole run, as
	// Config.Sample, into Runs.Intervals (and, with one scenario, into its own intervals).
	Sample func(ctx context.Context) (map[string]float64, error)
	// MaxServerSeries bounds the distinct series kept from Sample, as Config.MaxServerSeries.
	MaxServerSeries int
	// StopOnSample, when set, is judged on every server sample as its interval closes (elapsed
	// from the run's start); a non-nil event ends every scenario and is the run's stop.
	StopOnSample func(elapsed time.Duration, server map[string]float64) *result.StopEvent
	// Start, when set, is the run's coordinated start; the engine waits for it.
	Start time.Time
}

// Runs is what ExecuteScenarios measured.
type Runs struct {
	// Scenarios holds each scenario's outcome, in plan order.
	Scenarios []ScenarioRun
	// StartedAt and EndedAt bound the run; IntervalSecs is its interval length.
	StartedAt, EndedAt time.Time
	IntervalSecs       float64
	// Intervals is the run's own interval stream: T (from StartedAt) and Secs, the server's
	// samples (Server) and result.CounterServerSeriesDropped. A scenario's interval i is the run's
	// interval FirstInterval+i: they share their boundaries (a scenario's first interval runs
	// from its start to the run's next boundary, its last one to its end).
	Intervals []result.Interval
	// Stop is why the run ended early (nil when every scenario reached its bound).
	Stop *result.StopEvent
}

// ScenarioRun is one scenario's outcome.
type ScenarioRun struct {
	Name string
	// Run is what the scenario measured, as Execute returns it. A scenario the run ended before
	// its start made no operations: its Run is empty, with StartedAt at the run's end.
	Run *Run
	// Started says the scenario began.
	Started bool
	// FirstInterval is the index in Runs.Intervals of the scenario's first interval.
	FirstInterval int
	// Err is why the scenario could not run (its Setup's error, or the Config Setup returned).
	Err error
}

// Scenario phases, as the collector sees them.
const (
	phaseWaiting  = iota // before its offset
	phaseSetup           // its Setup is running
	phaseRunning         // operations
	phaseTail            // its After
	phaseFinished        // ended (or never started)
)

type scenState struct {
	sc      Scenario
	e       *engine
	phase   int
	started bool
	closed  bool // its last interval is closed
	endAt   time.Time
	err     error
	timers  []*time.Timer
	others  chan struct{}
	cancel  context.CancelFunc // the open model's schedule
}

type scenEventKind int

const (
	evBegin scenEventKind = iota
	evDone
	evDeadline
	evDrain
	evTail
)

type scenEvent struct {
	i    int
	kind scenEventKind
	cfg  Config
	err  error
}

// runner is the state of one run of a plan: the clock, the sampler, the stop, the scenarios.
type runner struct {
	plan      Plan
	interval  time.Duration
	auto      bool
	scen      []*scenState
	ctx       context.Context // the caller's, for observers and the tails
	runCtx    context.Context // ends with a stop (Setup's context)
	cancelRun context.CancelFunc
	evCh      chan scenEvent
	start     time.Time
	last      time.Time
	intervals []result.Interval
	stop      *result.StopEvent
	stopped   bool
}

// ExecuteScenarios runs the plan's scenarios in one run and returns what each measured, on the
// run's one clock. It returns an error only for a plan it cannot run (a scenario's configuration
// is checked up front, or, for one with Setup, as it begins: ScenarioRun.Err).
func ExecuteScenarios(ctx context.Context, p Plan) (*Runs, error) {
	if len(p.Scenarios) == 0 {
		return nil, fmt.Errorf("engine: a plan needs at least one scenario")
	}
	if p.Interval < 0 && p.Interval != AutoInterval {
		return nil, fmt.Errorf("engine: interval %v must be positive, 0 for 1 s, or AutoInterval", p.Interval)
	}
	if p.Interval == AutoInterval && len(p.Scenarios) > 1 {
		return nil, fmt.Errorf("engine: AutoInterval joins fine intervals into seconds, which takes a plan of one scenario; give %d scenarios a fixed Interval", len(p.Scenarios))
	}
	r := &runner{plan: p, ctx: ctx, interval: cmp.Or(p.Interval, time.Second), evCh: make(chan scenEvent, 5*len(p.Scenarios))}
	if r.interval == AutoInterval {
		r.auto, r.interval = true, FineInterval
	}
	for _, sc := range p.Scenarios {
		name := func(err error) error {
			if sc.Name == "" {
				return err
			}
			return fmt.Errorf("engine: scenario %s: %w", sc.Name, err)
		}
		if sc.Offset < 0 {
			return nil, name(fmt.Errorf("engine: start offset %v must not be negative", sc.Offset))
		}
		s := &scenState{sc: sc, others: make(chan struct{})}
		if len(p.Scenarios) == 1 {
			close(s.others)
		}
		if sc.Setup == nil {
			e, err := r.newScenario(sc.Config)
			if err != nil {
				return nil, name(err)
			}
			s.e = e
		}
		r.scen = append(r.scen, s)
	}
	return r.run(), nil
}

// newScenario checks a scenario's configuration and makes its engine.
func (r *runner) newScenario(cfg Config) (*engine, error) {
	if cfg.Interval != 0 || cfg.Sample != nil || cfg.MaxServerSeries != 0 || !cfg.Start.IsZero() {
		return nil, fmt.Errorf("engine: a scenario's Interval, Sample, MaxServerSeries and Start are the plan's; leave them zero")
	}
	e, err := newEngine(observe(r.ctx, cfg))
	if err != nil {
		return nil, err
	}
	e.cfg.Interval = r.interval
	return e, nil
}

func (r *runner) send(ev scenEvent) { r.evCh <- ev } // never blocks: at most 5 events a scenario

func (r *runner) run() *Runs {
	ctx := r.ctx
	r.runCtx, r.cancelRun = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelRun()
	if !r.plan.Start.IsZero() {
		if d := time.Until(r.plan.Start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	r.start = time.Now()
	r.last = r.start
	for i, s := range r.scen {
		switch {
		case s.sc.Setup != nil:
			s.phase = phaseSetup
			go func() {
				if s.sc.Offset > 0 {
					t := time.NewTimer(s.sc.Offset)
					select {
					case <-t.C:
					case <-r.runCtx.Done():
						t.Stop()
					}
				}
				cfg, err := s.sc.Setup(r.runCtx)
				r.send(scenEvent{i: i, kind: evBegin, cfg: cfg, err: err})
			}()
		case s.sc.Offset <= 0:
			r.begin(i, r.start)
		default:
			s.timers = append(s.timers, time.AfterFunc(s.sc.Offset, func() { r.send(scenEvent{i: i, kind: evBegin}) }))
		}
	}
	smp := newSampling(r.plan, r.runCtx, r.interval)
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	// The stop window's slot: one interval, or 1 s of fine ones (AutoInterval).
	slot, perSlot := r.interval, 1
	if r.auto {
		slot, perSlot = time.Second, int(time.Second/FineInterval)
	}
	fine := r.auto
	smp.take()
	ctxDone := ctx.Done()
	for r.unfinished() > 0 {
		select {
		case ev := <-r.evCh:
			r.handle(ev)
		case <-ctxDone:
			ctxDone = nil
			if r.anyBefore(phaseTail) {
				now := time.Now()
				r.setStop(&result.StopEvent{Reason: StopSignal, ElapsedSecs: now.Sub(r.start).Seconds(), At: now.UTC().Format(time.RFC3339Nano)}, now)
			} // else every scenario left is in its After, which handles a signal itself
		case now := <-tick.C:
			srv, dropped := smp.pending()
			for _, s := range r.scen {
				if s.phase == phaseRunning || s.phase == phaseTail {
					s.e.closeInterval(now, r.mirror(srv), r.mirrorDropped(dropped))
				}
			}
			r.closeInterval(now, srv, dropped)
			if fine && now.Sub(r.start) >= FineFor {
				// The run outgrew its fine snapshots: join them into seconds and go on by seconds.
				fine = false
				r.intervals = coarsen(r.intervals)
				for _, s := range r.scen {
					if s.e != nil {
						s.e.intervals = coarsen(s.e.intervals)
						s.e.cfg.Interval, s.e.inSlot = time.Second, 0
					}
				}
				r.interval, perSlot = time.Second, 1
				tick.Reset(time.Second)
			}
			for _, s := range r.scen {
				if s.phase != phaseRunning && s.phase != phaseTail {
					continue
				}
				e := s.e
				if e.inSlot++; e.win != nil && e.inSlot >= perSlot {
					e.inSlot = 0
					if ev := e.cfg.Stop(now.Sub(e.start), e.win); ev != nil {
						ev.ElapsedSecs = cmp.Or(ev.ElapsedSecs, now.Sub(r.start).Seconds())
						ev.At = cmp.Or(ev.At, now.UTC().Format(time.RFC3339Nano))
						ev.WindowSecs = cmp.Or(ev.WindowSecs, float64(e.win.Len())*slot.Seconds())
						r.setStop(ev, now)
					}
					e.win.advance()
				}
			}
			if srv != nil && r.plan.StopOnSample != nil && !r.stopped {
				if ev := r.plan.StopOnSample(now.Sub(r.start), srv); ev != nil {
					ev.ElapsedSecs = cmp.Or(ev.ElapsedSecs, now.Sub(r.start).Seconds())
					ev.At = cmp.Or(ev.At, now.UTC().Format(time.RFC3339Nano))
					r.setStop(ev, now)
				}
			}
			smp.take()
		}
	}
	end := time.Now()
	// A last sample of the target after the load, so the timeline ends with the server's state.
	smp.last(ctx)
	srv, dropped := smp.pending()
	for _, s := range r.scen {
		if s.started && !s.closed {
			s.endAt = end
			s.e.closeInterval(end, r.mirror(srv), r.mirrorDropped(dropped))
			s.closed = true
		}
	}
	r.closeInterval(end, srv, dropped)
	out := &Runs{StartedAt: r.start, EndedAt: end, IntervalSecs: r.interval.Seconds(), Intervals: r.intervals, Stop: r.stop}
	for _, s := range r.scen {
		sr := ScenarioRun{Name: s.sc.Name, Started: s.started, Err: s.err}
		if s.started {
			sr.Run = s.e.finish(s.endAt)
			sr.FirstInterval = s.e.first
		} else {
			sr.Run = r.emptyRun(s, end)
			sr.FirstInterval = len(r.intervals)
		}
		out.Scenarios = append(out.Scenarios, sr)
	}
	return out
}

// mirror is what a scenario's interval carries of the run's sample: all of it in a run of one
// scenario (Execute's result keeps its samples), nothing in a run of several (the run's
// intervals carry them once).
func (r *runner) mirror(srv map[string]float64) map[string]float64 {
	if len(r.scen) == 1 {
		return srv
	}
	return nil
}

func (r *runner) mirrorDropped(n int64) int64 {
	if len(r.scen) == 1 {
		return n
	}
	return 0
}

func (r *runner) unfinished() int {
	n := 0
	for _, s := range r.scen {
		if s.phase != phaseFinished {
			n++
		}
	}
	return n
}

// anyBefore reports whether a scenario has not reached phase p yet.
func (r *runner) anyBefore(p int) bool {
	for _, s := range r.scen {
		if s.phase < p {
			return true
		}
	}
	return false
}

func (r *runner) handle(ev scenEvent) {
	s := r.scen[ev.i]
	switch ev.kind {
	case evBegin:
		if s.phase != phaseWaiting && s.phase != phaseSetup {
			return // ended by a stop before its start
		}
		if s.sc.Setup != nil {
			if ev.err == nil {
				s.e, ev.err = r.newScenario(ev.cfg)
			}
			if ev.err != nil {
				s.err = ev.err
				r.finish(s, time.Now())
				return
			}
		}
		if r.stopped {
			r.finish(s, time.Now())
			return
		}
		r.begin(ev.i, time.Now())
	case evDone:
		r.opsDone(ev.i)
	case evDeadline:
		if s.phase != phaseRunning {
			return
		}
		s.e.end()
		if s.e.cfg.Drain > 0 {
			s.timers = append(s.timers, time.AfterFunc(s.e.cfg.Drain, func() { r.send(scenEvent{i: ev.i, kind: evDrain}) }))
		}
	case evDrain:
		if s.phase == phaseRunning {
			s.e.cutOff()
		}
	case evTail:
		r.finish(s, time.Now())
	}
}

// begin starts scenario i's workers at start.
func (r *runner) begin(i int, start time.Time) {
	s := r.scen[i]
	e := s.e
	e.others = s.others
	e.opCtx, e.cancelOps = context.WithCancel(context.WithoutCancel(r.ctx))
	workers := make([]*Worker, 0, e.cfg.Workers)
	if e.cfg.Driver != nil {
		for id := range e.cfg.Workers {
			w := &Worker{ID: id, sh: &e.shards[id%len(e.shards)], e: e}
			if e.cfg.NewState != nil {
				w.State = e.cfg.NewState(id)
			}
			workers = append(workers, w)
		}
	}
	e.kernelBefore = machine.ReadKernel()
	e.start = start
	e.first, e.last = len(r.intervals), start
	e.total, e.spare, e.ivStats = e.newTotals(), e.newStats(), e.newStats()
	if e.cfg.Stop != nil {
		e.win = newWindow(e.cfg.StopWindow, len(e.classes))
	}
	s.phase, s.started = phaseRunning, true
	if len(workers) == 0 {
		r.opsDone(i)
		return
	}
	var sched <-chan Ticket
	if e.open {
		schedCtx, cancelSched := context.WithCancel(e.opCtx)
		s.cancel = cancelSched
		go func() {
			select {
			case <-e.endCh:
				cancelSched()
			case <-schedCtx.Done():
			}
		}()
		sched = Schedule(schedCtx, e.start, e.pacer, e.cfg.Count, e.cfg.Duration)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if e.open {
				e.openWorker(w, sched)
			} else {
				e.closedWorker(w)
			}
		})
	}
	go func() { wg.Wait(); r.send(scenEvent{i: i, kind: evDone}) }()
	if e.cfg.Duration > 0 {
		s.timers = append(s.timers, time.AfterFunc(e.cfg.Duration, func() { r.send(scenEvent{i: i, kind: evDeadline}) }))
	}
}

// opsDone follows the end of scenario i's operations: its After, or its end.
func (r *runner) opsDone(i int) {
	s := r.scen[i]
	if s.e.cfg.After == nil {
		r.finish(s, time.Now())
		return
	}
	s.phase = phaseTail
	go func() {
		s.e.tail(r.ctx)
		r.send(scenEvent{i: i, kind: evTail})
	}()
}

// finish ends a scenario at now. Its last interval closes now unless it is the run's last
// scenario: that one closes with the run, after the last server sample.
func (r *runner) finish(s *scenState, now time.Time) {
	s.phase = phaseFinished
	s.endAt = now
	for _, t := range s.timers {
		t.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.started && r.unfinished() > 0 {
		s.e.closeInterval(now, nil, 0)
		s.closed = true
	}
	for _, o := range r.scen {
		if o == s || isClosed(o.others) {
			continue
		}
		all := true
		for _, x := range r.scen {
			if x != o && x.phase != phaseFinished {
				all = false
			}
		}
		if all {
			close(o.others)
		}
	}
	if s.started {
		s.e.cancelOps()
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// setStop ends the run early: the first reason is the run's stop and every scenario's that had
// not ended; scenarios still waiting for their offset never start.
func (r *runner) setStop(ev *result.StopEvent, now time.Time) {
	if r.stopped {
		return
	}
	r.stopped, r.stop = true, ev
	r.cancelRun()
	at := time.Duration(ev.ElapsedSecs * float64(time.Second))
	for _, s := range r.scen {
		switch s.phase {
		case phaseWaiting:
			r.finish(s, now)
		case phaseRunning, phaseTail:
			s.e.setStop(ev, max(at-s.e.start.Sub(r.start), 0))
		}
	}
}

// closeInterval closes the run's own interval at now.
func (r *runner) closeInterval(now time.Time, srv map[string]float64, dropped int64) {
	iv := result.Interval{T: r.last.Sub(r.start).Seconds(), Secs: now.Sub(r.last).Seconds(), Server: srv}
	if dropped > 0 {
		iv.Counters = map[string]int64{CounterServerSeriesDropped: dropped}
	}
	r.intervals = append(r.intervals, iv)
	r.last = now
}

// emptyRun is the outcome of a scenario that never started.
func (r *runner) emptyRun(s *scenState, end time.Time) *Run {
	var cfg Config
	if s.e != nil {
		cfg = s.e.cfg
	}
	e := s.e
	if e == nil {
		e, _ = newEngine(Config{Classes: cfg.Classes}) // a Setup that failed: the default names
	}
	run := &Run{Totals: e.newTotals(), Stop: r.stop}
	run.Classes = e.classes
	run.StartedAt, run.EndedAt = end, end
	run.IntervalSecs = r.interval.Seconds()
	run.Envelope.Totals = map[string]int64{}
	if e.open {
		run.Open = &OpenFigures{}
	}
	return run
}

// closeInterval closes the scenario's interval in progress at now: the shards' figures, its
// gauges, and srv, the server's sample where it carries one.
func (e *engine) closeInterval(now time.Time, srv map[string]float64, dropped int64) {
	e.ivStats.reset()
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		s := sh.cur
		sh.cur = e.spare
		sh.mu.Unlock()
		e.ivStats.merge(s)
		s.reset()
		e.spare = s
	}
	e.ivStats.addTo(e.total)
	if e.win != nil {
		e.win.add(e.ivStats)
	}
	iv := e.interval(e.ivStats, e.last, now)
	iv.Server = srv
	if e.cfg.Gauges != nil {
		iv.Gauges = e.cfg.Gauges()
	}
	if dropped > 0 {
		if iv.Counters == nil {
			iv.Counters = map[string]int64{}
		}
		iv.Counters[CounterServerSeriesDropped] += dropped
	}
	e.intervals = append(e.intervals, iv)
	e.last = now
	e.total.Elapsed = now.Sub(e.start)
	if e.cfg.OnInterval != nil {
		e.cfg.OnInterval(&e.intervals[len(e.intervals)-1], e.total)
	}
}

// tail runs Config.After on a worker of its own, under a context that ends with ctx or with a
// stop condition.
func (e *engine) tail(ctx context.Context) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.opCtx, cancel)
	defer stop()
	e.cfg.After(tctx, &Worker{ID: -1, sh: &e.shards[0], e: e})
}

// sampling is the run's one server sampler: one sample at a time in the background, each given at
// most max(interval, 1 s); a sample lands in the interval that closes after it is back.
type sampling struct {
	fn      func(ctx context.Context) (map[string]float64, error)
	ctx     context.Context
	timeout time.Duration
	series  *seriesCap
	busy    atomic.Bool
	ch      chan takenSample
	held    map[string]float64
	dropped int64
}

type takenSample struct {
	m       map[string]float64
	dropped int64
}

func newSampling(p Plan, ctx context.Context, interval time.Duration) *sampling {
	return &sampling{fn: p.Sample, ctx: ctx, timeout: max(interval, time.Second), series: newSeriesCap(p.MaxServerSeries), ch: make(chan takenSample, 1)}
}

// take starts a sample unless one is under way.
func (s *sampling) take() {
	if s.fn == nil || !s.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.busy.Store(false)
		sctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		defer cancel()
		if m, err := s.fn(sctx); err == nil && m != nil {
			m, dropped := s.series.limit(m)
			select {
			case s.ch <- takenSample{m, dropped}:
			default:
			}
		}
	}()
}

// pending returns the sample back since the last interval closed (nil when none) and the series
// it dropped.
func (s *sampling) pending() (map[string]float64, int64) {
	select {
	case t := <-s.ch:
		s.held, s.dropped = t.m, t.dropped
	default:
	}
	m, d := s.held, s.dropped
	s.held, s.dropped = nil, 0
	return m, d
}

// last takes the sample after the load: it waits for one under way, and supersedes one taken when
// the last interval began and not yet attached (a report's rate over the last interval counts the
// growth up to its end, not to its start).
func (s *sampling) last(ctx context.Context) {
	if s.fn == nil {
		return
	}
	for s.busy.Load() {
		time.Sleep(time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	if m, err := s.fn(sctx); err == nil && m != nil {
		select {
		case <-s.ch:
		default:
		}
		s.held, s.dropped = s.series.limit(m)
	}
}
