package linkkeysload

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// The connection-attempt commands (connections, ddos, handshake-bench) run their attempts through
// engine.Execute: the engine owns the workers, the bounds, the interval snapshots, the server samples
// and the progress hook; attemptDriver makes one attempt per operation and classifies it. Its outcome
// classes are the seed's failure stages in Stage order (linkkeysresult.AttemptClasses), its causes
// the detailed reasons, and its latency kinds the attempt's time (every attempt) and the connect plus
// handshake time of the successful ones, which is what the seed's figures and our latency lines use.

// Latency kinds of the attempt commands, as indexes into attemptKinds.
const (
	kindAttempt = iota
	kindConnectHandshake
	kindResumed // handshake-bench only
)

var attemptKinds = []string{linkkeysresult.KindAttempt, linkkeysresult.KindConnectHandshake, linkkeysresult.KindResumed}

// attemptDriver makes one connection attempt per operation.
type attemptDriver struct {
	dialer *Dialer
	// source returns the source address of operation n (the segment's n-th attempt) on worker w.
	source func(w *engine.Worker, n int64) IPv4
	// config, when set, returns worker w's TLS configuration (handshake-bench's session caches).
	config func(w *engine.Worker) *tls.Config
	// success takes over an established connection (keep it, or close it); took is the attempt's
	// connect plus handshake time.
	success func(w *engine.Worker, c *tls.Conn, took time.Duration)
}

// Do implements engine.Driver.
func (d *attemptDriver) Do(ctx context.Context, w *engine.Worker, n int64) engine.Outcome {
	var cfg *tls.Config
	if d.config != nil {
		cfg = d.config(w)
	}
	t0 := time.Now()
	c, f := d.dialer.Dial(ctx, d.source(w, n), cfg)
	took := time.Since(t0)
	if f.Stage != StageNone {
		return engine.Outcome{Class: uint8(f.Stage), Cause: f.Reason(), Took: took}
	}
	w.Observe(kindConnectHandshake, took)
	if d.success != nil {
		d.success(w, c, took)
	}
	return engine.Outcome{Took: took}
}

// attemptConfig is the engine configuration of an attempt run: workers concurrent attempts, count
// of them (0: until the duration or ctx ends), progress told after each one.
func attemptConfig(d *attemptDriver, workers int, count int64, p Progress) engine.Config {
	cfg := engine.Config{Driver: d, Classes: linkkeysresult.AttemptClasses, Kinds: attemptKinds, Workers: workers, Count: count}
	if p != nil {
		cfg.Progress = func(c []int64) {
			var total int64
			for _, v := range c {
				total += v
			}
			p.Update(total, c[0], total-c[0])
		}
	}
	return cfg
}

// execute runs cfg through the engine, or, when the run has nothing to do (no workers, a zero count
// bound, or a zero duration where the duration is the bound), runs cfg.After (with a nil worker)
// and returns an empty run: the engine reads zero bounds as "no bound". An interval cfg leaves at
// 0 is engine.IntervalFor the run's duration: 100 ms snapshots for a run under 30 s.
func execute(ctx context.Context, cfg engine.Config, nothing bool) (*engine.Run, error) {
	if cfg.Start.IsZero() {
		cfg.Start = startOf(ctx) // a coordinated start (RunSpec)
	}
	if cfg.Interval == 0 {
		cfg.Interval = engine.IntervalFor(cfg.Duration)
	}
	if !nothing {
		r, err := engine.Execute(ctx, cfg)
		if err != nil {
			return nil, errorf("%w", err)
		}
		return r, nil
	}
	if cfg.After != nil {
		cfg.After(ctx, nil)
	}
	return emptyRun(cfg), nil
}

// emptyRun is the engine's outcome of a run that made no operations.
func emptyRun(cfg engine.Config) *engine.Run {
	now := time.Now()
	r := &engine.Run{Totals: &engine.Totals{Counts: make([]int64, len(cfg.Classes)), Causes: map[string]int64{},
		Counters: make([]int64, len(cfg.Counters)+3)}}
	r.Classes = cfg.Classes
	r.StartedAt, r.EndedAt = now, now
	r.Envelope.Totals = map[string]int64{}
	if cfg.Rate > 0 {
		r.Open = &engine.OpenFigures{}
	}
	return r
}

// workload is one command's load made ready for the engine: the configuration it runs (nothing:
// there is nothing to run, see execute) and its segment result from what the engine measured. A
// command runs it alone (execute); the combined command runs several as scenarios of one run.
type workload struct {
	cfg     engine.Config
	nothing bool
	finish  func(run *engine.Run) (Result, error)
}

// execute runs the workload alone and makes its result.
func (w workload) execute(ctx context.Context) (Result, error) {
	run, err := execute(ctx, w.cfg, w.nothing)
	if err != nil {
		w.finish(emptyRun(w.cfg)) // what it set up is released
		return Result{}, err
	}
	return w.finish(run)
}

// segmentResult starts the Result of one segment from what the engine measured: the envelope (with
// this command, the target's address, the segment and this process's machine record) and the stop
// event.
func segmentResult(command string, t Target, seg engine.Segment, run *engine.Run) Result {
	r := Result{Envelope: run.Envelope, TargetInfo: t, Stop: run.Stop}
	r.Command = command
	r.Target = t.Addr.String()
	r.Segments = []engine.Segment{seg}
	m := collectMachine()
	m.Run = judgeRun(run.Kernel, r.Target)
	r.Machines = append(r.Machines[:0:0], m)
	return r
}

// judgeRun marks a run's kernel and CPU figures generator-limited or not (machine.Judge); the
// TCP counters are the client's own only when the target is not on this host's stack.
func judgeRun(rs *machine.RunStats, target string) *machine.RunStats {
	if rs == nil {
		return nil
	}
	rs.SharedStack = machine.OnThisStack(target)
	return machine.Judge(rs)
}

// attemptsOf reads the attempt counts of a run of attempts from its envelope.
func attemptsOf(r *Result) *Attempts { return linkkeysresult.AttemptsOf(&r.Envelope) }

// cloneHist returns a copy of h (an empty histogram for nil), so a section never shares a histogram
// with the envelope.
func cloneHist(h *hist.Histogram) *hist.Histogram {
	c := hist.New()
	c.Merge(h)
	return c
}

// collectMachine is the machine record of this process, with the server-limit variables it sees.
func collectMachine() machine.Record { return machine.Collect("TCP_", "PUBLIC_READ_") }
