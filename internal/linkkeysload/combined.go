package linkkeysload

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// The combined command runs the four kinds of LinkKeys load at once, as scenarios of one engine
// run (engine.ExecuteScenarios), each with its own driver, classes and histograms (the workloads of
// connections, handshake-bench, request-bench and ddos, unchanged), each from its own
// source-address range so the server's figures can be told apart:
//
//   - held: N connections, ramped (Concurrency at a time, or paced at Rate per second), then held
//     idle until every other stream has ended and at least HoldSecs have passed; how many of them
//     the server closed meanwhile, and how they ended, is the held population's survival;
//   - handshakes: connect, handshake, close, Concurrency loops back to back or paced at Rate per
//     second, full or resumed, for DurationSecs from StartSecs;
//   - requests: any op over Connections persistent connections (opened at StartSecs, the
//     scenario's Setup), one at a time, Pipeline in flight, or at Rate per second, for DurationSecs;
//   - ddos waves: one attempt from each of Sources distinct addresses, starting at StartSecs.
//
// The engine owns the schedule (each stream starts at its offset), the one interval clock the
// streams' timelines share, the one server sampler and the live stop condition judged on its
// samples, and the cut-off. The streams' results are merged into one Result whose envelope
// prefixes every class, cause, counter and latency kind with the stream's name ("held/success"),
// so a run fanned out over worker processes merges exactly (linkkeysresult.Merge); the per-stream
// results sit in the Combined section. The command reads the server's accounting before and after
// the run, and attributes the server's counters to streams where the server reports them per
// configured source prefix (source_<stream>_<counter> fields).

// Combined runs the combined command: header, every stream at once (in this process or fanned
// out), the server's accounting before and after (and per stream where the server reports
// counters per source prefix), the streams' DONE lines and the held population's survival.
//
// The run expects the server to count each stream's source range under the stream's name
// (TCP_SOURCE_PREFIXES=cfg.SourcePrefixes(); the capacity command starts its servers so): each
// stream then gets its own server accounting. A server that counts none of them, or not all, is
// still measured, with a line on stderr saying which streams' server figures are not attributed and
// the value that would attribute them.
func Combined(ctx context.Context, cfg CombinedConfig, r Run) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	out := r.stdout()
	WriteCombinedHeader(out, cfg)
	before, metricsErr := r.metricsBefore(ctx)
	if r.Metrics != nil && metricsErr == nil {
		if note := cfg.PrefixNote(before); note != "" {
			fmt.Fprintf(r.stderr(), "combined: %s\n", note)
		}
	}
	meter := r.startCPU(cfg.Target)
	split := r.StreamProcesses && r.Remote == nil && cfg.splitsStreams()
	procs := r.Workers
	if split {
		procs = 2 * max(r.Workers, 1)
		meter.fannedOut = true // the workers' results hold their CPU, not this process's
	}
	// Worker processes need a moment to start: they begin their streams together at Start.
	delay := 50 * time.Millisecond
	if procs > 1 {
		delay = min(time.Second+time.Duration(procs)*200*time.Millisecond, 5*time.Second)
	}
	cfg.Start = time.Now().Add(delay)
	watch := combinedWatch{sample: r.progressSampler(cfg.Start), stop: r.Stop}
	var res Result
	var err error
	if procs <= 1 {
		res, err = runCombinedSegment(ctx, cfg, engine.Whole, r.stderr(), watch)
	} else {
		res, err = r.fanOutCombined(ctx, cfg, split, watch)
	}
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res)
	r.combinedAccounting(ctx, &res, before, metricsErr)
	WriteCombinedDone(out, res)
	return res, r.writeJSON(ctx, res)
}

// combinedWatch is what the run that drives a combined run's clock samples and judges: the
// server's counters once an interval and the live stop condition on each sample. A worker process
// has neither (its parent watches the server).
type combinedWatch struct {
	sample func(ctx context.Context) (map[string]float64, error)
	stop   func(elapsed time.Duration, sample map[string]float64) *result.StopEvent
}

// progressSampler reads the server's counters (nil without Metrics) and prints a progress line
// every fifth reading.
func (r *Run) progressSampler(start time.Time) func(ctx context.Context) (map[string]float64, error) {
	read := serverSampler(r.Metrics)
	if read == nil {
		return nil
	}
	progress := r.stderr()
	n := 0 // the engine samples one reading at a time
	return func(ctx context.Context) (map[string]float64, error) {
		m, err := read(ctx)
		if err != nil || m == nil {
			return m, err
		}
		if n++; n%5 == 0 {
			fmt.Fprintf(progress, "  combined: t=%ds server open_connections=%.0f established_connections=%.0f accepted_connections=%.0f process_rss_bytes=%.0f\n",
				int(time.Since(start).Seconds()), m["open_connections"], m["established_connections"], m["accepted_connections"], m["process_rss_bytes"])
		}
		return m, nil
	}
}

// fanOutCombined runs the combined run in worker processes (with split, the request stream in
// processes of its own: combined_procs.go). This process's own run has one scenario, which waits
// for the workers: the engine samples the server and judges the live stop on the clock the
// workers' streams start on (cfg.Start), and a stop cuts the workers off.
func (r *Run) fanOutCombined(ctx context.Context, cfg CombinedConfig, split bool, watch combinedWatch) (Result, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fanned struct {
		res Result
		err error
	}
	specs, groupOf := combinedSpecs(cfg, split, r.seg(), max(r.Workers, 1))
	var onExit func(i int)
	if split && cfg.Held != nil {
		// The held population (group 0) is held until the request stream's processes have exited.
		gate, err := newOthersGate(len(specs) - slices.Index(groupOf, 1))
		if err != nil {
			return Result{}, err
		}
		defer gate.close()
		for i := range specs {
			if groupOf[i] == 0 {
				c := *specs[i].Combined
				c.OthersGate = gate.path
				specs[i].Combined = &c
			}
		}
		onExit = func(i int) {
			if groupOf[i] != 0 {
				gate.othersExited()
			}
		}
	}
	done := make(chan fanned, 1)
	go func() {
		res, err := r.fanOutSpecs(fctx, WorkerSpec{Command: CmdCombined, Combined: &cfg}, specs, nil, onExit)
		if err == nil && split {
			tidySplit(&res)
		}
		done <- fanned{res, err}
	}()
	var got fanned
	wait := engine.DriverFunc(func(ctx context.Context, _ *engine.Worker, _ int64) engine.Outcome {
		select {
		case got = <-done:
		case <-ctx.Done():
			cancel()
			got = <-done
		}
		return engine.Outcome{Skip: true}
	})
	runs, err := engine.ExecuteScenarios(ctx, engine.Plan{Interval: time.Second, Sample: watch.sample, StopOnSample: watch.stop, Start: cfg.Start,
		Scenarios: []engine.Scenario{{Name: "workers", Config: engine.Config{Driver: wait, Count: 1}}}})
	if err != nil {
		cancel()
		<-done
		return Result{}, errorf("combined: %w", err)
	}
	if got.err != nil {
		return Result{}, got.err
	}
	res := got.res
	attachServer(&res.Envelope, runs.Intervals)
	if s := runs.Stop; s != nil && (res.Stop == nil || s.Reason != engine.StopSignal) {
		res.Stop = s
	}
	return res, nil
}

// attachServer puts the server samples of a run's intervals into the intervals of the same index
// (the workers' timelines run on clocks started at the same instant), adding intervals the
// workers' results end before.
func attachServer(env *result.Envelope, ivs []result.Interval) {
	for i, iv := range ivs {
		if iv.Server == nil {
			continue
		}
		for len(env.Intervals) <= i {
			t := 0.0
			if n := len(env.Intervals); n > 0 {
				t = env.Intervals[n-1].T + env.Intervals[n-1].Secs
			}
			env.Intervals = append(env.Intervals, result.Interval{T: t, Secs: ivs[len(env.Intervals)].Secs})
		}
		env.Intervals[i].Server = iv.Server
	}
}

// combinedStream is one stream of a combined segment: its record in the result, its scenario, and
// how its result is made from what the engine measured.
type combinedStream struct {
	stream   linkkeysresult.Stream
	scenario engine.Scenario
	finish   func(run *engine.Run) (Result, error)
	survival *linkkeysresult.Survival // held only
}

// scenarioOf is a workload as a scenario starting at offset at seconds: one with nothing to run
// makes no operations (its After still runs).
func scenarioOf(name string, at float64, w workload) engine.Scenario {
	sc := engine.Scenario{Name: name, Offset: secs(at), Config: w.cfg}
	if w.nothing {
		sc.Config.Driver = nil
	}
	return sc
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// combinedStreams makes the segment's share of every stream, in stream order.
func combinedStreams(cfg CombinedConfig, seg engine.Segment, debugOut io.Writer) []*combinedStream {
	timeout := cfg.AttemptTimeout
	if timeout <= 0 {
		timeout = time.Duration(DefaultAttemptTimeoutSecs) * time.Second
	}
	ddosTimeout := cmpOr(cfg.DDoSTimeout, timeout)
	var out []*combinedStream
	if h := cfg.Handshakes; h != nil {
		hc := HandshakeConfig{Target: cfg.Target, DurationSecs: h.DurationSecs, Concurrency: h.Concurrency, AttemptTimeout: timeout,
			Sources: h.Sources, Resume: h.Resume, Rate: h.Rate}
		w := prepareHandshakes(hc, seg, nil)
		out = append(out, &combinedStream{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamHandshakes, Kind: CmdHandshakeBench, Params: hc.params(), StartSecs: h.StartSecs},
			scenario: scenarioOf(linkkeysresult.StreamHandshakes, h.StartSecs, w), finish: w.finish})
	}
	if q := cfg.Requests; q != nil {
		rc := RequestConfig{Target: cfg.Target, Connections: q.Connections, DurationSecs: q.DurationSecs, Op: q.Op, Sources: q.Sources,
			AttemptTimeout: timeout, Pipeline: q.Pipeline, Rate: q.Rate}
		s := &combinedStream{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamRequests, Kind: CmdRequestBench, Params: rc.params(), StartSecs: q.StartSecs},
			scenario: engine.Scenario{Name: linkkeysresult.StreamRequests, Offset: secs(q.StartSecs)}}
		// The connections open at the stream's start, in the scenario's Setup.
		s.scenario.Setup = func(ctx context.Context) (engine.Config, error) {
			conns, a := setupConnsTolerant(ctx, rc, seg)
			w, err := prepareRequests(ctx, rc, seg, conns, a, debugOut, nil, nil)
			if err != nil {
				return engine.Config{}, err
			}
			s.finish = w.finish
			return scenarioOf(linkkeysresult.StreamRequests, 0, w).Config, nil
		}
		out = append(out, s)
	}
	for i, wv := range cfg.DDoS {
		dc := DDoSConfig{Target: cfg.Target, Sources: wv.Sources, Concurrency: wv.Concurrency, AttemptTimeout: ddosTimeout, Base: wv.Base}
		w := prepareDDoS(dc, seg, nil, nil)
		out = append(out, &combinedStream{stream: linkkeysresult.Stream{Name: cfg.WaveName(i), Kind: CmdDDoS, Params: dc.params(), StartSecs: wv.StartSecs},
			scenario: scenarioOf(cfg.WaveName(i), wv.StartSecs, w), finish: w.finish})
	}
	if h := cfg.Held; h != nil {
		cc := ConnectionsConfig{Target: cfg.Target, Count: h.Count, Concurrency: h.Concurrency, HoldSecs: h.HoldSecs, AttemptTimeout: timeout,
			Sources: h.Sources, Rate: h.Rate, KeepTLS: true} // how a lost connection ended needs its TLS state (howClosed)
		s := &combinedStream{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamHeld, Kind: CmdConnections, Params: cc.params(), StartSecs: h.StartSecs}}
		lostCtr := len(linkkeysresult.ConnectionsCounters)
		w := prepareConnections(cc, seg, nil, nil, func(ctx context.Context, hw *engine.Worker, held []net.Conn, _ <-chan struct{}) {
			s.survival = holdAndWatch(ctx, hw, held, time.Duration(h.HoldSecs)*time.Second, lostCtr)
		})
		w.cfg.Counters = append(slices.Clone(w.cfg.Counters), counterLost)
		s.scenario, s.finish = scenarioOf(linkkeysresult.StreamHeld, h.StartSecs, w), w.finish
		out = append(out, s)
	}
	return out
}

// runCombinedSegment runs the segment's share of every stream as scenarios of one engine run and
// merges their results; watch samples the server and judges the live stop (a worker process has
// none).
func runCombinedSegment(ctx context.Context, cfg CombinedConfig, seg engine.Segment, debugOut io.Writer, watch combinedWatch) (Result, error) {
	if cfg.Handshakes != nil || len(cfg.DDoS) > 0 {
		defer tuneGC(gcPercentChurn)()
	}
	cpu0 := processCPU()
	streams := combinedStreams(cfg, seg, debugOut)
	plan := engine.Plan{Interval: time.Second, Sample: watch.sample, StopOnSample: watch.stop, Start: cfg.Start}
	if plan.Start.IsZero() {
		plan.Start = startOf(ctx) // a coordinated start (RunSpec)
	}
	for _, s := range streams {
		plan.Scenarios = append(plan.Scenarios, s.scenario)
	}
	if cfg.OthersGate != "" && cfg.Held != nil {
		// After the streams: assembleCombined reads the streams' scenarios by index.
		plan.Scenarios = append(plan.Scenarios, othersScenario(cfg.OthersGate))
	}
	kernel0 := machine.ReadKernel()
	runs, err := engine.ExecuteScenarios(ctx, plan)
	if err != nil {
		return Result{}, errorf("combined: %w", err)
	}
	results := make([]Result, len(streams))
	var errs []error
	for i, s := range streams {
		sr := runs.Scenarios[i]
		if s.finish == nil { // a Setup that failed before its workload was made
			errs = append(errs, errorf("combined: stream %s: %w", s.stream.Name, sr.Err))
			continue
		}
		res, err := s.finish(sr.Run)
		if err == nil {
			err = sr.Err
		}
		if err != nil {
			errs = append(errs, errorf("combined: stream %s: %w", s.stream.Name, err))
		}
		results[i] = res
	}
	if len(errs) > 0 {
		return Result{}, errs[0]
	}
	res, err := assembleCombined(cfg.Target, seg, runs, streams, results)
	if err != nil {
		return Result{}, err
	}
	res.ClientCPU = Duration(processCPU() - cpu0)
	if len(res.Machines) == 1 {
		res.Machines[0].Run = judgeRun(machine.Delta(kernel0, machine.ReadKernel(), runtime.NumCPU()), res.Target)
	}
	if res.Stop == nil && ctx.Err() != nil {
		// A signal while only the held population's hold was left: the hold ended early.
		now := time.Now()
		res.Stop = &result.StopEvent{Reason: engine.StopSignal, ElapsedSecs: now.Sub(runs.StartedAt).Seconds(), At: now.UTC().Format(time.RFC3339Nano)}
	}
	res.Finish()
	return res, nil
}

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// assembleCombined merges the streams' results into the segment's combined result: the run's
// intervals (with the server's samples) and each stream's, prefixed with its name, added by index
// from the run's interval its first one is.
func assembleCombined(t Target, seg engine.Segment, runs *engine.Runs, streams []*combinedStream, results []Result) (Result, error) {
	env := result.Envelope{Format: result.Format, Harness: linkkeysresult.Harness, Command: CmdCombined, Target: t.Addr.String(),
		IntervalSecs: runs.IntervalSecs, Totals: map[string]int64{}}
	env.StartedAt, env.EndedAt = runs.StartedAt, runs.EndedAt
	env.Intervals = slices.Clone(runs.Intervals)
	out := Result{TargetInfo: t, Attempts: newAttempts(), Combined: &linkkeysresult.Combined{}, Stop: runs.Stop}
	for i, s := range streams {
		r := results[i]
		pe := linkkeysresult.PrefixEnvelope(s.stream.Name, &r.Envelope, runs.Scenarios[i].FirstInterval)
		pe.Format, pe.Harness, pe.Command, pe.Segments, pe.Machines, pe.Flags = result.Format, linkkeysresult.Harness, CmdCombined, nil, nil, nil
		pe.StartedAt = runs.StartedAt
		if err := env.Merge(&pe); err != nil {
			return Result{}, errorf("combined: %w", err)
		}
		if a := r.Attempts; a != nil {
			out.Attempts.Attempted += a.Attempted
			out.Attempts.Succeeded += a.Succeeded
			out.Attempts.Failed += a.Failed
			addCounts(out.Attempts.Classes, a.Classes)
			addCounts(out.Attempts.Reasons, a.Reasons)
			out.Attempts.Latency.Merge(a.Latency)
		}
		st := s.stream
		stream := r
		stream.Intervals, stream.Machines, stream.Flags = nil, nil, nil
		// The streams share one process: its CPU and RSS are the combined run's, not a stream's.
		stream.ClientCPU, stream.ServerCPU = 0, nil
		if h := stream.Hold; h != nil {
			hc := *h
			hc.RSSBaseline, hc.RSSHeld, hc.RSSBaselineSplit, hc.RSSHeldSplit = 0, 0, nil, nil
			stream.Hold = &hc
		}
		stream.Segments = []result.Segment{seg}
		st.Result = &stream
		st.Survival = s.survival
		st.PIDs = []int{os.Getpid()}
		out.Combined.Streams = append(out.Combined.Streams, st)
	}
	for i := range out.Combined.Streams {
		s := &out.Combined.Streams[i]
		s.SourceFirst, s.SourceCount = sourceOf(s)
	}
	out.Envelope = env
	out.Segments = []result.Segment{seg}
	out.Machines = append(out.Machines[:0:0], collectMachine())
	return out, nil
}

// setupConnsTolerant opens the request stream's connections one after another, as request-bench
// does, but goes on past a failed one (counted in the attempts): in a combined run the other
// streams may exhaust a limiter the request stream's setup also passes, and the stream then runs
// over the connections it got.
func setupConnsTolerant(ctx context.Context, cfg RequestConfig, seg engine.Segment) ([]*tls.Conn, *Attempts) {
	start, count := seg.Range(int64(cfg.Connections))
	d := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	a := newAttempts()
	conns := make([]*tls.Conn, 0, count)
	for i := start; i < start+count && ctx.Err() == nil; i++ {
		t0 := time.Now()
		c, f := d.Dial(ctx, cfg.Sources.For(i), nil)
		recordAttempt(a, f, time.Since(t0))
		if f.Stage == StageNone {
			conns = append(conns, c)
		}
	}
	return conns, a
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// sourceOf reads a stream's source range back from its parameters.
func sourceOf(s *linkkeysresult.Stream) (string, uint32) {
	p := s.Params
	if s.Kind == CmdDDoS {
		return p.ClientIPBase, p.Sources
	}
	return p.ClientIPBase, max(p.ClientIPCount, 1)
}
