package linkkeysload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// ConnectionsConfig is the seed's connections command (docs/protocol-linkkeys.md, connections).
// Zero values are not defaults: the command line fills every field (see the cli defaults).
type ConnectionsConfig struct {
	Target         Target        `json:"target"`
	Count          uint32        `json:"count"`
	Concurrency    uint32        `json:"concurrency"`
	HoldSecs       uint64        `json:"hold_secs"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	Sources        SourceAddrs   `json:"sources"`
	ProgressEvery  uint32        `json:"progress_every"`
	// Rate, when > 0, paces the attempts at this total rate per second (a ramp of Count/Rate
	// seconds) with at most Concurrency in flight; 0 makes them Concurrency at a time, as the seed.
	Rate float64 `json:"rate,omitempty"`
	// KeepTLS holds each connection with its whole TLS client state (keys, record buffers, the
	// server's parsed certificate) and closes it with a close_notify. By default a held connection
	// keeps only its socket once the handshake is done: the hold never sends, so the TLS state
	// would only cost memory (about 6 KiB a connection; docs/benchmarks.md), and the server sees
	// the same established session either way. Without it the close is a plain TCP close (FIN).
	KeepTLS bool `json:"keep_tls,omitempty"`
	// WorkersInTurn runs worker processes one after another, each with the whole Concurrency (the
	// next starts when the one before has finished its attempts), instead of all at once with a
	// share each. Workers exist for their open files; in turn, one process at a time does the
	// handshakes, and the ramp is the parent's, from the first worker's start to the last one's end.
	WorkersInTurn bool `json:"workers_in_turn,omitempty"`
}

// holdFunc blocks while the connections are held (this process's share); gone is closed when every
// one of them has ended (nil when that cannot be watched), so a hold with nothing left may end early.
// A held connection is a *tls.Conn with ConnectionsConfig.KeepTLS, else its bare socket. w is the
// engine's worker of the hold (nil when the segment made no attempts on its own): it adds interval
// counters, and tells when the run's other workloads have ended (w.OthersDone).
type holdFunc func(ctx context.Context, w *engine.Worker, held []net.Conn, gone <-chan struct{})

// The connections command's interval counters, as indexes into linkkeysresult.ConnectionsCounters.
const (
	ctrClosedByServer = iota
	ctrClosedError
	ctrClosedUnseen
	ctrClosedByClient
)

// runConnectionsSegment runs one segment: its Range of the attempt indexes with its Share of the
// concurrency, holds what it established until hold returns, then closes everything. The hold and
// the close run inside the engine's run (Config.After), so the segment's timeline spans all three:
// attempts while they last, the connections held (a gauge) throughout, and the held connections
// that end, by how, as they end.
func runConnectionsSegment(ctx context.Context, cfg ConnectionsConfig, seg engine.Segment, p Progress, sample *MetricsSource, hold holdFunc) (Result, error) {
	return prepareConnections(cfg, seg, p, sample, hold).execute(ctx)
}

// prepareConnections is runConnectionsSegment's workload: the engine configuration of the attempts
// and the hold, and the segment's result from what the engine measured.
func prepareConnections(cfg ConnectionsConfig, seg engine.Segment, p Progress, sample *MetricsSource, hold holdFunc) workload {
	cpu0 := processCPU()
	runtime.GC()
	rss0, split0 := readRSS()
	start, count := seg.Range(int64(cfg.Count))
	conc := max(seg.Share(int64(cfg.Concurrency)), 1)
	if cfg.WorkersInTurn {
		conc = max(int64(cfg.Concurrency), 1)
	}
	var mu sync.Mutex
	conns := make([]net.Conn, 0, count)
	var held atomic.Int64          // established and not yet ended: the timeline's gauge
	sources := cfg.Sources.In(seg) // this segment's own addresses
	d := &attemptDriver{
		dialer: &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout},
		source: func(_ *engine.Worker, n int64) IPv4 { return sources.For(start + n) },
		success: func(_ *engine.Worker, c *tls.Conn, _ time.Duration) {
			var kept net.Conn = c
			if !cfg.KeepTLS {
				kept = c.NetConn() // the TLS state goes to the collector; the socket stays open
			}
			mu.Lock()
			conns = append(conns, kept)
			mu.Unlock()
			held.Add(1)
		},
	}
	ec := attemptConfig(d, int(min(conc, max(count, 1))), count, p)
	ec.Sample = serverSampler(sample)
	ec.Counters = linkkeysresult.ConnectionsCounters
	ec.Gauges = func() map[string]int64 { return map[string]int64{linkkeysresult.GaugeHeld: held.Load()} }
	if cfg.Rate > 0 {
		ec.Rate, ec.Phase, ec.LateThreshold = seg.Rate(cfg.Rate), seg.Offset(), LateThreshold
	}
	// Held connections grow the live heap whether they keep their TLS state or only the socket:
	// the ramp pacing (docs/load-testing.md, where the ramp's CPU goes).
	restoreGC := sync.OnceFunc(tuneGC(gcPercentRamp))
	var t heldPhase
	ec.After = func(ctx context.Context, w *engine.Worker) {
		restoreGC()
		t.hold(ctx, w, conns, &held, hold)
	}
	return workload{cfg: ec, nothing: count == 0, finish: func(run *engine.Run) (Result, error) {
		restoreGC()
		res := segmentResult(CmdConnections, cfg.Target, seg, run)
		res.Attempts = attemptsOf(&res)
		res.Hold = &Hold{HoldSecs: cfg.HoldSecs, Held: int64(len(conns)), StillOpen: t.open, RampTime: Duration(t.ramp),
			RSSBaseline: rss0, RSSHeld: t.rss, RSSBaselineSplit: split0, RSSHeldSplit: t.split, Start: t.start, Lasted: Duration(t.lasted),
			Loss: holdLoss(int64(len(conns))-t.open, t.seen)}
		res.ClientCPU = Duration(processCPU() - cpu0)
		res.Finish()
		return res, nil
	}}
}

// heldPhase is what the hold and the close of a connections segment measured.
type heldPhase struct {
	ramp   time.Duration
	rss    uint64
	split  *machine.RSS
	start  time.Time
	lasted time.Duration
	open   int64
	seen   HoldLoss
}

// hold runs after the last attempt (the engine's Config.After; w is nil when the segment made no
// attempts): it reads the client's held RSS, holds conns until hold returns while watching them
// end, counts what is still open, and closes everything, keeping the held gauge and the interval
// counters of how they ended up to date as it goes.
func (t *heldPhase) hold(ctx context.Context, w *engine.Worker, conns []net.Conn, held *atomic.Int64, hold holdFunc) {
	add := func(ctr int, n int64) {
		if w != nil && n > 0 {
			w.Add(ctr, n)
		}
	}
	if w != nil {
		t.ramp = time.Since(w.Started())
	}
	// Return the ramp's garbage (handshake buffers, finished goroutine stacks) to the OS, so the
	// held RSS is what the connections themselves cost.
	debug.FreeOSMemory()
	t.rss, t.split = readRSS()
	watch := watchHeld(conns, func(reason string) {
		held.Add(-1)
		if reason == linkkeysresult.LossReset {
			add(ctrClosedError, 1)
		} else {
			add(ctrClosedByServer, 1)
		}
	})
	t.start = time.Now()
	hold(ctx, w, conns, watch.gone())
	t.lasted = time.Since(t.start)
	t.open = countOpen(conns)
	t.seen = watch.stop()
	// The count at the end is authoritative (holdLoss): ends the watcher did not see are counted
	// now, and the gauge is what is open.
	var seen int64
	for _, n := range t.seen.Reasons {
		seen += n
	}
	add(ctrClosedUnseen, int64(len(conns))-t.open-seen)
	held.Store(t.open)
	closeEach(conns, func() {
		for {
			v := held.Load()
			if v <= 0 {
				return // a connection the server had already closed
			}
			if held.CompareAndSwap(v, v-1) {
				add(ctrClosedByClient, 1)
				return
			}
		}
	})
}

// readRSS returns this process's RSS and, from the same reading, its split by kind (nil where the
// split cannot be read: then the RSS is 0 too, as it is off Linux).
func readRSS() (uint64, *machine.RSS) {
	if r, ok := machine.RSSSplit(); ok {
		return r.Total, &r
	}
	rss, _ := machine.RSSBytes()
	return rss, nil
}

// countOpen returns how many connections are still established from the kernel's point of view.
// A connection the server closed while the client held it without reading (a server-side
// handshake timeout after the client's own handshake had completed, an idle timeout) sits in
// CLOSE_WAIT; the socket's TCP state (tcpEstablished) tells the two apart without reading, which
// would consume the TLS records the server may have queued (session tickets). Where the state
// cannot be read, every connection counts as open.
func countOpen(conns []net.Conn) int64 {
	var n int64
	for _, c := range conns {
		sc, ok := socketOf(c).(syscall.Conn)
		if !ok {
			continue
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			continue
		}
		_ = raw.Control(func(fd uintptr) {
			if est, known := tcpEstablished(fd); est || !known {
				n++
			}
		})
	}
	return n
}

// socketOf returns a held connection's TCP socket.
func socketOf(c net.Conn) net.Conn {
	if t, ok := c.(*tls.Conn); ok {
		return t.NetConn()
	}
	return c
}

// closeAll closes connections from a few goroutines: a TLS connection's close writes a
// close_notify record first, a bare socket's is a plain close.
func closeAll[C net.Conn](conns []C) { closeEach(conns, nil) }

// closeEach is closeAll telling closed (when set) after each close, from the closing goroutines.
func closeEach[C net.Conn](conns []C, closed func()) {
	const closers = 8
	var wg sync.WaitGroup
	for w := range closers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(conns); i += closers {
				var c net.Conn = conns[i]
				if t, ok := c.(*tls.Conn); ok {
					closeConn(t)
				} else {
					_ = c.Close()
				}
				var none C
				conns[i] = none
				if closed != nil {
					closed()
				}
			}
		}()
	}
	wg.Wait()
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ErrHoldBroken is returned (wrapped) by Connections when held connections ended before the hold
// did: the count asked for was not held at once for HoldSecs. The result is complete and written.
var ErrHoldBroken = errors.New("linkkeysload: the hold was not held")

// Connections runs the connections command: prints the header, runs in this process or fans out to
// r.Workers processes, holds every established connection at once for HoldSecs, prints the DONE
// lines, and reads the server's accounting when r.Metrics is set. When held connections end during
// the hold it says how many, when and why (as far as the client can tell), and returns
// ErrHoldBroken.
func Connections(ctx context.Context, cfg ConnectionsConfig, r Run) (Result, error) {
	out := r.stdout()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	WriteConnectionsHeader(out, cfg)
	progress := r.attemptProgress("connections", int64(cfg.Count), cfg.ProgressEvery, "success", "failed")
	before, metricsErr := r.metricsBefore(ctx)
	if metricsErr == nil && r.Metrics != nil && r.OnServerBefore != nil {
		r.OnServerBefore(before)
	}
	meter := r.startCPU(cfg.Target)
	hold := time.Duration(cfg.HoldSecs) * time.Second
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runConnectionsSegment(ctx, cfg, r.seg(), progress, r.Metrics, func(ctx context.Context, _ *engine.Worker, held []net.Conn, gone <-chan struct{}) {
			progress.Close()
			r.log().Info("holding", "held", len(held), "hold", hold)
			if r.OnHold != nil {
				r.OnHold(int64(len(held)), time.Now().Add(hold))
			}
			t := time.NewTimer(hold)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			case <-gone:
				r.log().Warn("every held connection has ended; the hold stops early", "held", len(held))
			}
		})
	} else {
		if cfg.WorkersInTurn && (r.Remote != nil || cfg.Rate > 0) {
			return Result{}, errorf("workers in turn need local worker processes and unpaced attempts (no --rate, no distributed run)")
		}
		var b *barrier
		b, err = newBarrier(r.Workers, cfg.WorkersInTurn)
		if err != nil {
			return Result{}, err
		}
		var holdStart, holdEnd atomic.Pointer[time.Time]
		go func() {
			select {
			case <-b.allReady():
				progress.Close()
				now := time.Now()
				holdStart.Store(&now)
				r.log().Info("all workers ready; holding", "held", b.heldTotal(), "hold", hold)
				if r.OnHold != nil {
					r.OnHold(int64(b.heldTotal()), now.Add(hold))
				}
				sleepCtx(ctx, hold)
				end := time.Now()
				holdEnd.Store(&end)
			case <-ctx.Done():
			}
			b.release()
		}()
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdConnections, Barrier: b.path, Connections: &cfg}, newAggregate(progress))
		b.release()
		// The workers each count from their own readiness; the hold is the parent's.
		if start, end := holdStart.Load(), holdEnd.Load(); start != nil && end != nil && res.Hold != nil {
			res.Hold.Start, res.Hold.Lasted = *start, Duration(end.Sub(*start))
		}
		if t := b.turns(); cfg.WorkersInTurn && t > 0 && res.Hold != nil {
			res.Hold.RampTime = Duration(t) // each worker's own ramp is its turn alone
		}
	}
	progress.Close()
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res)
	if h := res.Hold; h != nil && h.Loss != nil {
		running, known := processRunning(int(cfg.Target.PID))
		h.Loss.ServerGone = known && !running
	}
	WriteConnectionsDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	WriteHeadline(out, res)
	if err := r.writeJSON(ctx, res); err != nil {
		return res, err
	}
	if h := res.Hold; h != nil && h.Loss != nil {
		return res, fmt.Errorf("%w: %d of %d held connections ended before the %ds hold did (see the LOST line)",
			ErrHoldBroken, h.Loss.Lost, h.Held, h.HoldSecs)
	}
	return res, nil
}

// stamp adds what the parent knows: the flags as given and the run ID.
func (r *Run) stamp(res *Result) {
	res.Flags = r.Flags
	res.RunID = r.RunID
	res.Finish()
}

func (r *Run) writeJSON(ctx context.Context, res Result) error {
	if r.JSONPath == "" {
		return nil
	}
	if h := engine.ResultHook(ctx); h != nil {
		h(&res.Envelope)
	}
	if err := res.Write(r.JSONPath); err != nil {
		return err
	}
	if r.AfterWrite != nil {
		return r.AfterWrite(r.JSONPath)
	}
	return nil
}

func (r *Run) settleWait() time.Duration {
	if r.SettleWait <= 0 {
		return 15 * time.Second
	}
	return r.SettleWait
}

// metricsBefore reads the server's counters before the run, once every earlier attempt is counted
// (a reading with no handshake in progress).
func (r *Run) metricsBefore(ctx context.Context) (linkkeys.MetricsLine, error) {
	if r.Metrics == nil {
		return linkkeys.MetricsLine{}, nil
	}
	s, err := r.Metrics.Quiet(ctx, r.settleWait())
	if errors.Is(err, ErrNoQuietReading) {
		err = nil // the best reading there is; the after reading says whether the totals add up
	}
	return s, err
}

// metricsBeforeOf is metricsBefore for a run against t: a stopped server (SIGSTOP) is not read
// (its scrape would only time out); the error then says so and the after reading is skipped too.
func (r *Run) metricsBeforeOf(ctx context.Context, t Target) (linkkeys.MetricsLine, error) {
	if r.Metrics != nil {
		if why := serverStopped(t); why != "" {
			return linkkeys.MetricsLine{}, errors.New(why)
		}
	}
	return r.metricsBefore(ctx)
}

// accounting reads the server's counters after the run and prints them next to the client's.
func (r *Run) accounting(ctx context.Context, res *Result, before linkkeys.MetricsLine, beforeErr error) {
	r.readAccounting(ctx, res, before, beforeErr)
	if res.Server == nil {
		return
	}
	if len(res.Server.Checks) == 0 && res.Server.Note != "" {
		WriteAccountingError(r.stdout(), res.Server)
		return
	}
	WriteAccounting(r.stdout(), res.Server)
}

// readAccounting reads the server's counters after the run into res.Server: the deltas and their
// checks against the client's attempts, or a note saying why they could not be read.
func (r *Run) readAccounting(ctx context.Context, res *Result, before linkkeys.MetricsLine, beforeErr error) {
	if r.Metrics == nil || res.Attempts == nil {
		return
	}
	fail := func(note string) {
		res.Server = &ServerAccounting{Source: r.Metrics.Location, Note: note}
	}
	if beforeErr != nil {
		fail("no reading before the run: " + beforeErr.Error())
		return
	}
	if why := serverStopped(res.TargetInfo); why != "" {
		fail("no reading after the run: " + why)
		return
	}
	after, err := r.Metrics.Quiet(ctx, r.settleWait())
	settled := err == nil
	switch {
	case errors.Is(err, ErrNoQuietReading):
	case errors.Is(err, ErrNoReading):
		fail("no server METRICS reading arrived within " + linkkeysresult.FormatRustDuration(r.settleWait()) + " after the run")
		return
	case err != nil:
		fail("no reading after the run: " + err.Error())
		return
	}
	a := res.Attempts
	res.Server = NewServerAccounting(r.Metrics.Location, before, after, a.Attempted, a.Succeeded, a.Failed, settled)
	if q := res.Requests; q != nil {
		CheckRateLimited(res.Server, before, after, q.Statuses[linkkeys.StatusUnavailable.String()])
	}
}
