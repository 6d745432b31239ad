package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/textclip"
)

// Judge evaluates stop conditions on the window of the latest merged intervals (oldest first); a
// non-nil event aborts the task on every worker.
type Judge func(window []result.Interval) *result.StopEvent

// TaskOptions configure one task.
type TaskOptions struct {
	// Judge, when set, is called on every merged interval with the Window latest ones.
	Judge  Judge
	Window int
	// IntervalSecs is the workers' interval length (for judging only full intervals).
	IntervalSecs float64
	// Describe labels progress lines ("keycast run", "phase spike").
	Describe string
	// BarrierPath is the run's hold barrier on this machine (a Unix socket), when the command holds
	// at one: each worker's ready and release are relayed to it through one connection per worker.
	BarrierPath string
	// Observe, when set, receives every merged interval of the run, in order, once every worker has
	// sent it (or finished): what the engine's interval observer receives from a run on one machine
	// (a dashboard, a client's progress lines). It runs under the coordinator's lock: keep it short.
	Observe func(iv *result.Interval)
	// ObserveWorker, when set, receives each worker's own interval snapshots as they arrive
	// (worker: its index and join name), for per-host series beside the merged ones.
	ObserveWorker func(index int, name string, iv *result.Interval)
	// LatencyKind is the histogram the progress lines quote (default "latency", Keycast's).
	LatencyKind string
}

// TaskResult is what came back from one task.
type TaskResult struct {
	ID int
	// Parts holds each worker's result (by index); nil for a worker that delivered none.
	Parts [][]byte
	// Errors holds each worker's error message, if any.
	Errors []string
	// Intervals is the live merge of every interval snapshot.
	Intervals []result.Interval
	// Stop is the central stop event (a breached stop condition, a signal, a lost worker), or nil.
	Stop *result.StopEvent
	// Lost is set when a worker stopped reporting during the task.
	Lost *WorkerLostError
	// StartAt is the coordinated start instant in the coordinator's clock.
	StartAt time.Time
	// Keycast is the spec of a Keycast task (RunKeycastTask), for the records.
	Keycast *KeycastSpec
}

// RunTask runs args on every worker (segment i/N on worker i), merges their snapshots live, judges
// stop conditions, and returns when every worker delivered its result, or when a worker was lost
// and the others' results are in (or ResultWait passed). ctx's end aborts the task on every worker;
// their partial results still come back.
func (c *Coordinator) RunTask(ctx context.Context, args []string, opts TaskOptions) (*TaskResult, error) {
	if err := CheckTaskFlags(args); err != nil {
		return nil, err
	}
	return c.runTask(ctx, Task{Args: args}, opts)
}

// RunKeycastTask is RunTask for a Keycast run: every worker gets spec, typed (KeycastSpec), and
// runs its segment of it in the library.
func (c *Coordinator) RunKeycastTask(ctx context.Context, spec KeycastSpec, opts TaskOptions) (*TaskResult, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("coord: encoding the Keycast task spec: %w", err)
	}
	tr, err := c.runTask(ctx, Task{Keycast: b}, opts)
	if tr != nil {
		tr.Keycast = &spec
	}
	return tr, err
}

// runTask sends work (a Task with its command or spec set) to every worker; see RunTask.
func (c *Coordinator) runTask(ctx context.Context, work Task, opts TaskOptions) (*TaskResult, error) {
	c.mu.Lock()
	if c.lost != nil {
		lost := c.lost
		c.mu.Unlock()
		return nil, lost
	}
	c.nextID++
	n := c.cfg.Workers
	ts := &taskState{id: c.nextID, opts: opts, seen: make([]int, n), finished: make([]bool, n), good: make([]bool, n),
		results: make(chan arrival, n), events: make(chan any, 4), progress: c.cfg.Progress}
	c.cur = ts
	offsets := make([]time.Duration, n)
	var maxRTT time.Duration
	for i, w := range c.workers {
		if w == nil {
			c.mu.Unlock()
			return nil, errors.New("coord: RunTask before every worker joined (call WaitReady)")
		}
		offsets[i] = time.Duration(w.ClockOffsetMs * 1e6)
		maxRTT = max(maxRTT, time.Duration(w.RTTMs*1e6))
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cur = nil
		for k, cs := range c.chunks { // chunks of a finished task are never fetched
			c.chunkBytes -= cs.bytes
			delete(c.chunks, k)
		}
		c.mu.Unlock()
	}()

	if opts.BarrierPath != "" {
		ts.proxies = make([]net.Conn, n)
		for i := range n {
			conn, err := net.Dial("unix", opts.BarrierPath)
			if err != nil {
				return nil, fmt.Errorf("coord: joining the run's hold barrier for worker %d: %w", i, err)
			}
			ts.proxies[i] = conn
			go c.relayRelease(ts.id, i, conn)
		}
		defer func() {
			for _, p := range ts.proxies {
				p.Close()
			}
		}()
	}
	start := time.Now().Add(c.cfg.StartLead + 2*maxRTT)
	ts.startAt = start
	var wg sync.WaitGroup
	refusals := make([]string, n)
	for i := range n {
		t := work
		t.ID, t.Segment, t.StartAt, t.SampleServer, t.Barrier = ts.id, result.Segment{Index: i, Count: n}, start.Add(offsets[i]), i == 0, opts.BarrierPath != ""
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := c.sig.msg(c.subj.worker(i, "task"), t)
			if err != nil {
				refusals[i] = err.Error()
				return
			}
			resp, err := c.nc.RequestMsg(m, 5*time.Second)
			if err != nil {
				refusals[i] = "no answer to the task: " + err.Error()
				return
			}
			var r TaskReply
			if err := c.sig.open(resp, &r); err != nil {
				refusals[i] = err.Error()
			} else if !r.Accepted {
				refusals[i] = r.Reason
			}
		}()
	}
	wg.Wait()
	var refused []error
	for i, r := range refusals {
		if r != "" {
			name := c.name(i)
			refused = append(refused, fmt.Errorf("worker %d (%s): %s", i, name, r))
			c.mu.Lock()
			if len(c.taskRefusals) < maxTaskRefusals {
				c.taskRefusals = append(c.taskRefusals, TaskRefusal{Task: ts.id, Index: i, Worker: name, Reason: textclip.String(r, maxReasonBytes)})
			}
			c.mu.Unlock()
		}
	}
	if len(refused) > 0 {
		c.abort(ts.id, "a worker refused the task", nil)
		return nil, fmt.Errorf("coord: the task was not started: %w", errors.Join(refused...))
	}
	fmt.Fprintf(c.cfg.Progress, "coordinate: %s on %d workers starts at %s\n", opts.Describe, n, start.UTC().Format(time.RFC3339Nano))
	return c.await(ctx, ts)
}

func (c *Coordinator) name(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[i]; w != nil {
		return w.Name
	}
	return "?"
}

// abort tells every worker to stop task id.
func (c *Coordinator) abort(id int, reason string, stop *result.StopEvent) {
	if m, err := c.sig.msg(c.subj.sub("abort"), Abort{Task: id, Reason: reason, Stop: stop}); err == nil {
		_ = c.nc.PublishMsg(m)
		_ = c.nc.Flush()
	}
}

// await collects the results of a started task.
func (c *Coordinator) await(ctx context.Context, ts *taskState) (*TaskResult, error) {
	n := c.cfg.Workers
	res := &TaskResult{ID: ts.id, Parts: make([][]byte, n), Errors: make([]string, n), StartAt: ts.startAt}
	got := 0
	ctxDone := ctx.Done()
	var grace <-chan time.Time
	lostIdx := -1
	for got < n {
		if lostIdx >= 0 && got >= n-1 {
			break
		}
		select {
		case a := <-ts.results:
			if res.Parts[a.index] != nil {
				continue // the first good result of an index is kept
			}
			if res.Errors[a.index] == "" {
				got++
			}
			if a.data != nil {
				res.Parts[a.index], res.Errors[a.index] = a.data, ""
			} else {
				res.Errors[a.index] = a.err
			}
			c.mu.Lock()
			ts.finish(c, a.index)
			c.mu.Unlock()
		case ev := <-ts.events:
			switch ev := ev.(type) {
			case *result.StopEvent:
				if res.Stop == nil {
					res.Stop = ev
					fmt.Fprintf(c.cfg.Progress, "coordinate: stop condition %s breached (observed %g, limit %g) at %.0fs; aborting every worker\n",
						ev.Metric, ev.Observed, ev.Limit, ev.ElapsedSecs)
					c.abort(ts.id, "stop condition "+ev.Metric, ev)
				}
			case *WorkerLostError:
				res.Lost, lostIdx = ev, ev.Index
				if res.Stop == nil {
					now := time.Now()
					res.Stop = &result.StopEvent{Reason: result.StopWorkerLost, Metric: "worker " + strconv.Itoa(ev.Index) + " " + ev.Name,
						ElapsedSecs: max(now.Sub(ts.startAt).Seconds(), 0), At: now.UTC().Format(time.RFC3339Nano)}
				}
				fmt.Fprintf(c.cfg.Progress, "coordinate: %v\n", ev)
				c.abort(ts.id, "worker "+strconv.Itoa(ev.Index)+" lost", nil)
				grace = time.After(c.cfg.ResultWait)
			}
		case <-ctxDone:
			ctxDone = nil
			if res.Stop == nil {
				now := time.Now()
				res.Stop = &result.StopEvent{Reason: result.StopSignal, ElapsedSecs: max(now.Sub(ts.startAt).Seconds(), 0), At: now.UTC().Format(time.RFC3339Nano)}
			}
			c.abort(ts.id, "the coordinator was interrupted", nil)
			grace = time.After(c.cfg.ResultWait)
		case <-grace:
			got = n
		}
	}
	var missing []string
	for i, p := range res.Parts {
		if p == nil {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	c.mu.Lock()
	res.Intervals = slices.Clone(ts.merged)
	if len(missing) > 0 {
		// A merged result without every worker's part is partial, whatever else happened.
		err := fmt.Errorf("coord: task %d merged without the result of worker(s) %s; the result is partial", ts.id, strings.Join(missing, ", "))
		if c.partial == nil {
			c.partial = err
		}
		if res.Stop == nil {
			now := time.Now()
			res.Stop = &result.StopEvent{Reason: result.StopWorkerLost, Metric: "no result from worker " + strings.Join(missing, ", "),
				ElapsedSecs: max(now.Sub(ts.startAt).Seconds(), 0), At: now.UTC().Format(time.RFC3339Nano)}
		}
	}
	c.mu.Unlock()
	return res, nil
}

// onReady relays a worker's barrier message to the run's barrier.
func (c *Coordinator) onReady(m *nats.Msg) {
	var b BarrierMsg
	if c.sig.open(m, &b) != nil || sender(m) != workerFrom(b.Index) {
		return
	}
	c.mu.Lock()
	ts := c.cur
	c.mu.Unlock()
	if ts == nil || ts.id != b.Task || b.Index < 0 || b.Index >= len(ts.proxies) {
		return
	}
	p := ts.proxies[b.Index]
	if b.Gone {
		p.Close()
		return
	}
	fmt.Fprintf(p, "ready %d\n", b.Held)
}

// relayRelease waits for the run's barrier to release worker i's proxy connection (it closes it)
// and tells the worker.
func (c *Coordinator) relayRelease(task, i int, conn net.Conn) {
	_, _ = io.Copy(io.Discard, conn)
	if m, err := c.sig.msg(c.subj.worker(i, "release"), BarrierMsg{Index: i, Task: task}); err == nil {
		_ = c.nc.PublishMsg(m)
	}
}

// TaskRefusal is a task a worker did not take, as the coordination manifest records it: the
// worker's own reason (an unauthorized target, a field outside the allow list, a stale task, a
// file outside its --task-files), or why no answer came.
type TaskRefusal struct {
	Task   int    `json:"task"`
	Index  int    `json:"index"`
	Worker string `json:"worker"`
	Reason string `json:"reason"`
}

// maxTaskRefusals bounds the refusals a coordinator records; maxReasonBytes each reason.
const (
	maxTaskRefusals = 1000
	maxReasonBytes  = 2048
)

// TaskRefusals returns every task refusal of the session, in order.
func (c *Coordinator) TaskRefusals() []TaskRefusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.taskRefusals)
}

// TaskRecord is one task in the coordination manifest: when it was to start, when each worker's
// engine did start (in the coordinator's clock, offsets removed) and the spread of those starts.
type TaskRecord struct {
	ID       int      `json:"id"`
	Describe string   `json:"describe"`
	Args     []string `json:"args,omitempty"`
	// Keycast is the typed spec of a Keycast task (Args is then empty).
	Keycast *KeycastSpec `json:"keycast,omitempty"`
	StartAt time.Time    `json:"start_at"`
	// Starts holds each worker's measured start (coordinator clock); zero for one without a result.
	Starts []time.Time `json:"starts"`
	// StartSkewMs is the latest start minus the earliest.
	StartSkewMs float64           `json:"start_skew_ms"`
	Stop        *result.StopEvent `json:"stop,omitempty"`
	Lost        *LostRecord       `json:"lost_worker,omitempty"`
}

// LostRecord is a lost worker as the manifest records it.
type LostRecord struct {
	Index        int       `json:"index"`
	Name         string    `json:"name"`
	LastSeen     time.Time `json:"last_seen"`
	LastSnapshot *Snapshot `json:"last_snapshot,omitempty"`
	Message      string    `json:"message"`
}

// RecordLost renders a WorkerLostError for the manifest.
func RecordLost(e *WorkerLostError) *LostRecord {
	if e == nil {
		return nil
	}
	return &LostRecord{Index: e.Index, Name: e.Name, LastSeen: e.LastSeen, LastSnapshot: e.Last, Message: e.Error()}
}

// Record adds a task to the manifest, given each worker's engine start in its own clock.
func (c *Coordinator) Record(tr *TaskResult, describe string, args []string, started []time.Time) TaskRecord {
	rec := TaskRecord{ID: tr.ID, Describe: describe, Args: args, Keycast: tr.Keycast, StartAt: tr.StartAt, Starts: make([]time.Time, len(started)), Stop: tr.Stop, Lost: RecordLost(tr.Lost)}
	var lo, hi time.Time
	c.mu.Lock()
	for i, s := range started {
		if s.IsZero() || i >= len(c.workers) || c.workers[i] == nil {
			continue
		}
		s = s.Add(-time.Duration(c.workers[i].ClockOffsetMs * 1e6))
		rec.Starts[i] = s
		if lo.IsZero() || s.Before(lo) {
			lo = s
		}
		if s.After(hi) {
			hi = s
		}
	}
	c.tasks = append(c.tasks, rec)
	c.mu.Unlock()
	rec.StartSkewMs = float64(hi.Sub(lo)) / 1e6
	c.mu.Lock()
	c.tasks[len(c.tasks)-1].StartSkewMs = rec.StartSkewMs
	c.mu.Unlock()
	return rec
}

// Tasks returns the tasks recorded so far.
func (c *Coordinator) Tasks() []TaskRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tasks)
}
