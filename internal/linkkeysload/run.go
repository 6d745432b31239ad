package linkkeysload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/syncio"
)

// Run is how a command runs and reports, beyond its own configuration.
type Run struct {
	// Stdout receives the seed's lines; Stderr the DEBUG sample lines and worker stderr.
	Stdout, Stderr io.Writer
	// Workers is the number of worker processes; 0 or 1 runs in this process.
	Workers int
	// Launcher starts worker processes (required when Workers > 1).
	Launcher Launcher
	// Bar shows a live progress bar on Stdout instead of the progress lines (Stdout is a terminal).
	Bar bool
	// Live, when set, is the caller's live view of the attempts (a terminal status line): it gets
	// the running attempt totals too, and takes the bar's place where Bar is set. The seed's
	// progress lines are printed as without it.
	Live Progress
	// OnHold, when set, is called as a connections hold starts, with the connections held and the
	// instant the hold is planned to end (a countdown on the terminal).
	OnHold func(held int64, until time.Time)
	// OnServerBefore, when set, is given the server's counters read before a connections, ddos,
	// handshake-bench or request-bench run (the baseline from which a terminal's status line counts
	// the server's refusals).
	OnServerBefore func(before linkkeys.MetricsLine)
	// Metrics, when set, is where the server's counters are read: once per interval into the
	// timeline's server samples, and, for connections, ddos, handshake-bench and request-bench,
	// before and after the run for the server's accounting (and the refusals by design it explains).
	Metrics *MetricsSource
	// SettleWait bounds the wait for the server's after-run reading; 0 means 15 s.
	SettleWait time.Duration
	// Flags are recorded in the result as given.
	Flags map[string]string
	// JSONPath, when set, receives the result.
	JSONPath string
	// AfterWrite, when set, runs on JSONPath once the result is written there (the command line
	// signs it with --sign-key).
	AfterWrite func(path string) error
	// Log receives diagnostics; nil discards them.
	Log *slog.Logger
	// Stop, when set, is the combined command's live stop condition: it is judged on every server
	// sample (once a second), and a non-nil event ends the run early and is recorded as its stop.
	Stop func(elapsed time.Duration, sample map[string]float64) *result.StopEvent
	// Remote, when set, runs the Workers segments somewhere other than local processes (a
	// coordinator's workers, on any machine): it gets the worker spec of this command's whole share
	// (JSON, the hidden worker command's --spec, with Segment's segment), splits it into Workers
	// segments itself (Segment.Sub), starts them at one instant, hands their merged interval
	// snapshots to ctx's interval observer as they come in, and returns their results in segment
	// order, nil for one that delivered none. The progress lines are drawn from those snapshots.
	Remote func(ctx context.Context, spec string) ([][]byte, error)
	// Segment, when set, is the part of the run this command runs (--segment I/N); its worker
	// processes split it again (Segment.Sub), so N commands together run exactly the whole run.
	Segment engine.Segment
	// RunID names the run in every result it writes and hands to every worker
	// (result.Envelope.RunID); empty writes none.
	RunID string
	// StreamProcesses puts a combined run's request stream in worker processes of its own, apart
	// from its other streams, whenever it has both (combined_procs.go says why); each group takes
	// Workers processes (at least one). It needs worker processes of this binary (Launcher), so a
	// run with no other streams, or with Remote, is run as without it. False: every process runs a
	// share of every stream.
	StreamProcesses bool
}

// seg is the command's segment (the whole run when none is set).
func (r *Run) seg() engine.Segment {
	if r.Segment.Count <= 0 {
		return engine.Whole
	}
	return r.Segment
}

func (r *Run) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

func (r *Run) stdout() io.Writer {
	if r.Stdout == nil {
		return io.Discard
	}
	return r.Stdout
}

func (r *Run) stderr() io.Writer {
	if r.Stderr == nil {
		return io.Discard
	}
	return r.Stderr
}

// Launcher starts worker processes of this binary.
type Launcher struct {
	// Executable is the program; empty means this process's own executable.
	Executable string
	// Args is the command line before the worker's own flags, for example ["worker"] for
	// linkkeys-loadtest or ["linkkeys", "worker"] for loadproof.
	Args []string
	// Env, when non-nil, replaces the workers' environment.
	Env []string
}

// WorkerSpec is everything a worker process needs to run its segment. It travels as JSON on the
// worker's command line.
type WorkerSpec struct {
	Command string         `json:"command"`
	Segment engine.Segment `json:"segment"`
	// RunID is the run's ID, which the worker writes into its result.
	RunID string `json:"run_id,omitempty"`
	// Barrier is the Unix socket path of the parent's hold barrier (connections only).
	Barrier string `json:"barrier,omitempty"`
	// ServerMetrics is where the first segment's worker samples the server once per interval (a
	// METRICS log or a Prometheus URL); the other workers do not sample.
	ServerMetrics string             `json:"server_metrics,omitempty"`
	Connections   *ConnectionsConfig `json:"connections,omitempty"`
	Handshake     *HandshakeConfig   `json:"handshake,omitempty"`
	Requests      *RequestConfig     `json:"requests,omitempty"`
	DDoS          *DDoSConfig        `json:"ddos,omitempty"`
	Combined      *CombinedConfig    `json:"combined,omitempty"`
	// LiveIntervals asks the worker to print every interval snapshot as a line for the parent's
	// interval observer (liveintervals.go).
	LiveIntervals bool `json:"live_intervals,omitempty"`
}

// fanOut runs spec in n worker processes and returns their results merged. onLine receives every
// worker stdout line that is not a progress line consumed by agg.
func (r *Run) fanOut(ctx context.Context, spec WorkerSpec, agg *aggregate) (Result, error) {
	n := max(r.Workers, 1)
	specs := make([]WorkerSpec, n)
	for i := range n {
		specs[i] = spec
		specs[i].Segment = r.seg().Sub(n, i)
	}
	return r.fanOutSpecs(ctx, spec, specs, agg, nil)
}

// fanOutSpecs runs one worker process per spec of specs (each with its own segment; whole is the
// command's whole share, which Remote gets in their place) and returns their results merged.
// onExit, when set, is called with a process's index when it has ended.
func (r *Run) fanOutSpecs(ctx context.Context, whole WorkerSpec, specs []WorkerSpec, agg *aggregate, onExit func(i int)) (Result, error) {
	n := len(specs)
	var live *intervalMerger
	if obs := engine.IntervalObserver(ctx); obs != nil && r.Remote == nil && liveIntervalCommand(whole.Command) {
		live = newIntervalMerger(n, obs)
	}
	args := make([]string, n)
	for i := range n {
		s := specs[i]
		s.RunID = r.RunID
		if r.Metrics != nil {
			s.ServerMetrics = r.Metrics.Location
		}
		s.LiveIntervals = live != nil
		b, err := json.Marshal(s)
		if err != nil {
			return Result{}, errorf("encoding worker spec: %w", err)
		}
		args[i] = string(b)
	}
	out := r.stdout()
	f := engine.FanOut{
		Executable: r.Launcher.Executable,
		Workers:    n,
		Env:        r.Launcher.Env,
		Stderr:     r.stderr(),
		Grace:      workerGrace(whole, max(r.Workers, 1)),
		Args: func(seg engine.Segment, resultPath string) []string {
			a := append([]string(nil), r.Launcher.Args...)
			return append(a, "--spec", args[seg.Index], "--result", resultPath)
		},
		OnLine: func(seg engine.Segment, line string) {
			if agg != nil && agg.line(seg.Index, line) {
				return
			}
			if live != nil && live.line(seg.Index, line) {
				return
			}
			if len(line) >= len(workerLinePrefix) && line[:len(workerLinePrefix)] == workerLinePrefix {
				return
			}
			fmt.Fprintln(out, line)
		},
	}
	if onExit != nil {
		f.OnExit = func(seg engine.Segment) { onExit(seg.Index) }
	}
	var raw [][]byte
	var runErr error
	if r.Remote != nil {
		whole.Segment = r.seg()
		whole.RunID = r.RunID
		if r.Metrics != nil {
			whole.ServerMetrics = r.Metrics.Location
		}
		b, err := json.Marshal(whole)
		if err != nil {
			return Result{}, errorf("encoding worker spec: %w", err)
		}
		if agg != nil {
			ctx = engine.WithIntervalObserver(ctx, intervalProgress(agg.sink))
		}
		raw, runErr = r.Remote(ctx, string(b))
	} else {
		raw, runErr = f.Run(ctx)
		if live != nil {
			live.flush()
		}
	}
	var parts []Result
	for i, b := range raw {
		if b == nil {
			continue
		}
		p, err := ReadResult(b)
		if err != nil {
			return Result{}, errorf("worker %d result: %w", i+1, err)
		}
		parts = append(parts, p)
	}
	if runErr != nil {
		return Result{}, errorf("%d of %d workers failed: %w", n-len(parts), n, runErr)
	}
	return Merge(parts)
}

// workerGrace is how long an interrupted worker gets to close what it holds and write its result
// before it is killed: 10 s, plus 1 ms per connection of its share of a connections run. Closing
// 19,000 held connections took over 10 s on the 2-core machine when several runs closed at once,
// and a killed worker's result is lost.
func workerGrace(spec WorkerSpec, workers int) time.Duration {
	g := 10 * time.Second
	if c := spec.Connections; c != nil {
		g += time.Duration(int64(c.Count)/int64(max(workers, 1))) * time.Millisecond
	}
	return g
}

// RunWorker is the body of the hidden worker command: it runs the segment described by specJSON,
// writes its result to resultPath and prints progress lines for the parent on stdout.
func RunWorker(ctx context.Context, specJSON, resultPath string, stdout io.Writer) error {
	var spec WorkerSpec
	if json.Unmarshal([]byte(specJSON), &spec) == nil && spec.LiveIntervals {
		stdout = syncio.NewWriter(stdout) // progress and interval lines from several goroutines
		ctx = printIntervals(ctx, stdout)
	}
	res, err := RunSpec(ctx, specJSON, stdout, SpecOptions{})
	if err != nil {
		return err
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return errorf("worker: encoding result: %w", merr)
	}
	return engine.WriteResult(resultPath, b)
}

// SpecOptions are what a coordinated worker (loadproof worker) adds to a worker spec.
type SpecOptions struct {
	// Split, when its Count is set, is this worker's part of the spec: the spec's segment split
	// again into Split.Count parts (Segment.Sub), of which this runs part Split.Index.
	Split engine.Segment
	// Start, when set, is the instant the segment's load starts (the engine waits for it; a
	// request-bench's connections are set up before it).
	Start time.Time
	// Barrier, when set, is the hold barrier to join in place of the spec's (a relay on this
	// machine to the barrier on the coordinator's).
	Barrier string
}

// RunSpec runs the segment described by specJSON, printing progress lines on stdout in the
// workers' form, and returns its result. Every engine run of it hands its interval snapshots to
// ctx's interval observer (engine.WithIntervalObserver). The first segment of the whole run samples
// the server's METRICS when the spec names them.
func RunSpec(ctx context.Context, specJSON string, stdout io.Writer, o SpecOptions) (Result, error) {
	var spec WorkerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return Result{}, errorf("worker: reading --spec: %w", err)
	}
	if err := spec.Segment.Validate(); err != nil {
		return Result{}, errorf("worker: %w", err)
	}
	if err := result.ValidateRunID(spec.RunID); err != nil {
		return Result{}, errorf("worker: %w", err)
	}
	if o.Split.Count > 0 {
		if err := o.Split.Validate(); err != nil {
			return Result{}, errorf("worker: %w", err)
		}
		spec.Segment = spec.Segment.Sub(o.Split.Count, o.Split.Index)
	}
	if o.Barrier != "" && spec.Barrier != "" {
		spec.Barrier = o.Barrier
	}
	ctx = withStart(ctx, o.Start)
	_, _ = machine.RaiseNofile()
	var sample *MetricsSource
	if spec.ServerMetrics != "" && spec.Segment.Index == 0 {
		sample = &MetricsSource{Location: spec.ServerMetrics}
	}
	var res Result
	var err error
	switch spec.Command {
	case CmdConnections:
		if spec.Connections == nil {
			return Result{}, errorf("worker: connections spec missing")
		}
		total := spec.Segment.Share(int64(spec.Connections.Count))
		p := &workerProgress{w: stdout, total: total}
		bc := joinBarrier(spec.Barrier)
		if spec.Connections.WorkersInTurn {
			if err := bc.waitTurn(ctx); err != nil {
				bc.close()
				return Result{}, err
			}
		}
		res, err = runConnectionsSegment(ctx, *spec.Connections, spec.Segment, p, sample, func(ctx context.Context, _ *engine.Worker, held []net.Conn, _ <-chan struct{}) {
			bc.wait(ctx, int64(len(held)))
		})
		bc.close()
	case CmdDDoS:
		if spec.DDoS == nil {
			return Result{}, errorf("worker: ddos spec missing")
		}
		total := spec.Segment.Share(int64(spec.DDoS.Sources))
		p := &workerProgress{w: stdout, total: total}
		res, err = runDDoSSegment(ctx, *spec.DDoS, spec.Segment, p, sample)
	case CmdHandshakeBench:
		if spec.Handshake == nil {
			return Result{}, errorf("worker: handshake-bench spec missing")
		}
		res, err = runHandshakeSegment(ctx, *spec.Handshake, spec.Segment, sample)
	case CmdRequestBench:
		if spec.Requests == nil {
			return Result{}, errorf("worker: request-bench spec missing")
		}
		res, err = runRequestSegment(ctx, *spec.Requests, spec.Segment, os.Stderr, sample)
	case CmdCombined:
		if spec.Combined == nil {
			return Result{}, errorf("worker: combined spec missing")
		}
		res, err = runCombinedSegment(ctx, *spec.Combined, spec.Segment, os.Stderr, combinedWatch{})
	default:
		return Result{}, errorf("worker: unknown command %q", spec.Command)
	}
	if err != nil {
		return Result{}, err
	}
	res.RunID = spec.RunID
	return res, nil
}

// intervalProgress feeds p from interval snapshots (a coordinator's merged ones): the running
// totals of attempts, successes and failures after each. Snapshots come one at a time, in order.
func intervalProgress(p Progress) func(iv *result.Interval) {
	var attempted, ok int64
	return func(iv *result.Interval) {
		attempted += iv.Total()
		ok += iv.Counts[result.ClassSuccess]
		p.Update(attempted, ok, attempted-ok)
	}
}

type startKey struct{}

// withStart returns ctx under which the package's engine runs start at t (zero: at once).
func withStart(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, startKey{}, t)
}

// startOf returns the start withStart put in ctx (zero: none).
func startOf(ctx context.Context) time.Time {
	t, _ := ctx.Value(startKey{}).(time.Time)
	return t
}

// DefaultWorkers returns how many processes a run needing fds sockets takes so each stays under the
// soft open-file limit with 512 descriptors to spare: ceil(fds / (soft - 512)), at least 1.
func DefaultWorkers(fds int64, softLimit uint64) int {
	per := int64(softLimit) - 512
	if per < 64 {
		per = 64
	}
	return int(max(engine.CeilDiv(fds, per), 1))
}

// cpuMeter measures the CPU a run costs: the server's (through /proc) and, when the work runs in
// worker processes, the parent's own share, which the workers' results do not include.
type cpuMeter struct {
	pid       int
	server0   time.Duration
	serverOK  bool
	parent0   time.Duration
	fannedOut bool
}

func (r *Run) startCPU(t Target) *cpuMeter {
	m := &cpuMeter{pid: int(t.PID), parent0: processCPU(), fannedOut: r.Workers > 1}
	if owns, known := listensOn(m.pid, t.Addr.Port()); known && !owns {
		r.log().Warn("not measuring server CPU: the info file's pid does not listen on the target's port (a stale info file?)",
			"pid", m.pid, "port", t.Addr.Port())
		return m
	}
	m.server0, m.serverOK = ServerCPU(m.pid)
	return m
}

// stop adds the measured CPU to res.
func (m *cpuMeter) stop(res *Result) {
	if m.fannedOut {
		res.ClientCPU += Duration(processCPU() - m.parent0)
	}
	if !m.serverOK {
		return
	}
	if s1, ok := ServerCPU(m.pid); ok && s1 >= m.server0 {
		d := Duration(s1 - m.server0)
		res.ServerCPU = &d
	}
}
