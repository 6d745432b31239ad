package linkkeysload

import (
	"context"
	"crypto/tls"
	"errors"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loadproof/loadproof/internal/engine"
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
}

// holdFunc blocks while the connections are held (this process's share).
type holdFunc func(ctx context.Context, held []*tls.Conn)

// runConnectionsSegment runs one segment: its Range of the attempt indexes with its Share of the
// concurrency, holds what it established until hold returns, then closes everything.
func runConnectionsSegment(ctx context.Context, cfg ConnectionsConfig, seg engine.Segment, p Progress, hold holdFunc) (Result, error) {
	cpu0 := processCPU()
	runtime.GC()
	rss0, _ := machine.RSSBytes()
	start, count := seg.Range(int64(cfg.Count))
	conc := max(seg.Share(int64(cfg.Concurrency)), 1)
	t := newTally(p)
	var mu sync.Mutex
	conns := make([]*tls.Conn, 0, count)
	d := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	pool := attemptPool{
		dialer: d, start: start, count: count, concurrency: int(conc),
		source: cfg.Sources.In(seg).For, // this segment's own addresses
		onSuccess: func(c *tls.Conn) {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		},
		tally: t,
	}
	began := time.Now()
	restoreGC := tuneGC(gcPercentRamp)
	pool.run(ctx)
	restoreGC()
	ramp := time.Since(began)
	// Return the ramp's garbage (handshake buffers, finished goroutine stacks) to the OS, so the
	// held RSS is what the connections themselves cost.
	debug.FreeOSMemory()
	rss1, _ := machine.RSSBytes()
	hold(ctx, conns)
	open := countOpen(conns)
	closeAll(conns)
	end := time.Now()
	res := Result{
		Command: CmdConnections, Target: cfg.Target, Start: began, End: end,
		Segments: []engine.Segment{seg}, Attempts: t.a,
		Hold: &Hold{HoldSecs: cfg.HoldSecs, Held: int64(len(conns)), StillOpen: open, RampTime: Duration(ramp),
			RSSBaseline: rss0, RSSHeld: rss1},
		ClientCPU: Duration(processCPU() - cpu0),
	}
	res.finish()
	return res, nil
}

// tcpEstablished is Linux's TCP_ESTABLISHED socket state (tcp_states.h).
const tcpEstablished = 1

// countOpen returns how many connections are still established from the kernel's point of view.
// A connection the server closed while the client held it without reading (a server-side
// handshake timeout after the client's own handshake had completed, an idle timeout) sits in
// CLOSE_WAIT; TCP_INFO tells the two apart without reading, which would consume the TLS records
// the server may have queued (session tickets).
func countOpen(conns []*tls.Conn) int64 {
	var n int64
	for _, c := range conns {
		sc, ok := c.NetConn().(syscall.Conn)
		if !ok {
			continue
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			continue
		}
		_ = raw.Control(func(fd uintptr) {
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && info.State == tcpEstablished {
				n++
			}
		})
	}
	return n
}

// closeAll closes connections from a few goroutines: each close writes a close_notify record.
func closeAll(conns []*tls.Conn) {
	const closers = 8
	var wg sync.WaitGroup
	for w := range closers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(conns); i += closers {
				closeConn(conns[i])
				conns[i] = nil
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

// Connections runs the connections command: prints the header, runs in this process or fans out to
// r.Workers processes, holds every established connection at once for HoldSecs, prints the DONE
// lines, and reads the server's accounting when r.Metrics is set.
func Connections(ctx context.Context, cfg ConnectionsConfig, r Run) (Result, error) {
	out := r.stdout()
	WriteConnectionsHeader(out, cfg)
	var progress Progress = &SeedProgress{W: out, Every: int64(max(cfg.ProgressEvery, 1)), OKName: "success", NoName: "failed"}
	if r.Bar {
		progress = NewBarProgress(out, "connections", int64(cfg.Count), "success", "failed")
	}
	before, metricsErr := r.metricsBefore(ctx)
	meter := r.startCPU(cfg.Target)
	hold := time.Duration(cfg.HoldSecs) * time.Second
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runConnectionsSegment(ctx, cfg, r.seg(), progress, func(ctx context.Context, _ []*tls.Conn) {
			progress.Close()
			sleepCtx(ctx, hold)
		})
	} else {
		var b *barrier
		b, err = newBarrier(r.Workers)
		if err != nil {
			return Result{}, err
		}
		go func() {
			select {
			case <-b.allReady():
				progress.Close()
				r.log().Info("all workers ready; holding", "held", b.heldTotal(), "hold", hold)
				sleepCtx(ctx, hold)
			case <-ctx.Done():
			}
			b.release()
		}()
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdConnections, Barrier: b.path, Connections: &cfg}, newAggregate(progress))
		b.release()
	}
	progress.Close()
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res, cfg.Target)
	WriteConnectionsDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	return res, r.writeJSON(res)
}

// stamp adds what the parent knows: flags, machine record, the whole run's span.
func (r *Run) stamp(res *Result, t Target) {
	res.Flags = r.Flags
	res.Target = t
	res.Machine = machine.Collect("TCP_", "PUBLIC_READ_")
	res.finish()
}

func (r *Run) writeJSON(res Result) error {
	if r.JSONPath == "" {
		return nil
	}
	return res.WriteJSON(r.JSONPath)
}

func (r *Run) settleWait() time.Duration {
	if r.SettleWait <= 0 {
		return 15 * time.Second
	}
	return r.SettleWait
}

// metricsBefore reads the server's counters before the run, once every earlier attempt is counted
// (a reading with no handshake in progress).
func (r *Run) metricsBefore(ctx context.Context) (Snapshot, error) {
	if r.Metrics == nil {
		return Snapshot{}, nil
	}
	s, err := r.Metrics.Quiet(ctx, r.settleWait())
	if errors.Is(err, ErrNoQuietReading) {
		err = nil // the best reading there is; the after reading says whether the totals add up
	}
	return s, err
}

// accounting reads the server's counters after the run and prints them next to the client's.
func (r *Run) accounting(ctx context.Context, res *Result, before Snapshot, beforeErr error) {
	if r.Metrics == nil || res.Attempts == nil {
		return
	}
	out := r.stdout()
	fail := func(note string) {
		res.Server = &ServerAccounting{Source: r.Metrics.Location, Note: note}
		WriteAccountingError(out, res.Server)
	}
	if beforeErr != nil {
		fail("no reading before the run: " + beforeErr.Error())
		return
	}
	after, err := r.Metrics.Quiet(ctx, r.settleWait())
	settled := err == nil
	switch {
	case errors.Is(err, ErrNoQuietReading):
	case errors.Is(err, ErrNoReading):
		fail("no server METRICS reading arrived within " + FormatRustDuration(r.settleWait()) + " after the run")
		return
	case err != nil:
		fail("no reading after the run: " + err.Error())
		return
	}
	a := res.Attempts
	res.Server = NewServerAccounting(r.Metrics.Location, before, after, a.Attempted, a.Succeeded, a.Failed, settled)
	WriteAccounting(out, res.Server)
}
