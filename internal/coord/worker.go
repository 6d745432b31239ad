package coord

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// WorkerConfig configures RunWorker.
type WorkerConfig struct {
	Conn ConnConfig
	// Prefix is the subject prefix; empty means DefaultPrefix.
	Prefix string
	// Secret signs and checks every message (HMAC-SHA256). Empty is refused unless
	// InsecureUnsigned is set (a worker never runs the NATS server it uses).
	Secret string
	// InsecureUnsigned allows an empty Secret: anyone on the NATS server can then send this worker
	// tasks. It is logged loudly.
	InsecureUnsigned bool
	// ClientIPBase and ClientIPCount, when set, replace the source range of every LinkKeys task
	// this worker runs (the task's own range is another machine's): its share of sources or
	// connections comes from its own addresses. SetSources applies them to a task's arguments
	// (base empty: it only checks the task's own source addresses on this machine; nil:
	// SetLinkKeysSources); seg is the task's segment (a ddos segment's attempts start at the
	// block's first address).
	ClientIPBase  string
	ClientIPCount int
	SetSources    func(args []string, seg result.Segment, base string, count int) ([]string, error)
	// Name identifies the worker in the coordinator's messages (default: host name and pid).
	Name string
	// Index is the segment index to ask for (JOB_COMPLETION_INDEX), or -1 for any.
	Index int
	// JoinTimeout bounds the wait for a coordinator that accepts this worker; 0 means 10 minutes.
	JoinTimeout time.Duration
	// Exec runs a LinkKeys task's client command (loadproof tree, without the binary's name) as
	// the task's share: the caller builds its command tree with Runner{Share: share}. ctx carries
	// the snapshot publisher as the engine's interval observer. nil refuses LinkKeys tasks.
	Exec func(ctx context.Context, args []string, share *Share) error
	// Targets returns everything a LinkKeys task's command will reach, for the host rules: TCP
	// addresses (AddrTarget), http(s) URLs, a METRICS log file path only with MetricsFiles; nil
	// means LinkKeysTargets.
	Targets func(args []string) ([]string, error)
	// RunKeycast runs a Keycast task's configuration and returns its result (for tests); nil runs
	// it with keycastload.Run, the users read from the spec's users file.
	RunKeycast func(ctx context.Context, cfg keycastload.RunConfig) (any, error)
	// Progress receives a Keycast task's progress lines; nil discards them.
	Progress io.Writer
	// MetricsFiles lets a task name a server METRICS log file on this machine (a worker the
	// coordinator started beside the server); otherwise a task reaches only URLs and addresses.
	MetricsFiles bool
	// TaskFiles are the directories a task may name files in (--users-file, --ca-cert); "*" allows
	// any path (workers the coordinator started on its own machine). Empty: a task names no file.
	TaskFiles []string
	// Hosts are this worker's own target authorization.
	Hosts hostrule.Rules
	// Logger receives the worker's log; nil discards.
	Logger *slog.Logger
	// CostPerHour is this machine's price per hour (--cost-per-hour), sent in its machine record
	// when it joins so the coordinator prices the run over every machine (docs/cost.md).
	CostPerHour cost.Price
}

// ErrCoordinatorLost is returned when the coordinator went quiet for WatchdogAfter.
var ErrCoordinatorLost = errors.New("coord: the coordinator stopped sending heartbeats; load stopped")

// worker is one RunWorker session.
type worker struct {
	cfg    WorkerConfig
	log    *slog.Logger
	nc     *nats.Conn
	sig    *signer
	subj   subjects
	index  int
	bucket string

	lastCoord atomic.Int64 // unix nanos of the last coordinator heartbeat
	state     atomic.Value // string
	task      atomic.Int64 // current task id, -1 when idle
	lastTask  atomic.Int64 // highest task id accepted: an older or repeated task is refused

	mu         sync.Mutex
	release    chan struct{} // closed when the coordinator releases the current task's barrier
	cancelTask context.CancelFunc
	busy       bool
	done       chan error
	doneOnce   sync.Once
}

// RunWorker joins a coordinator and runs the tasks it sends until it says goodbye (nil), ctx ends,
// or the coordinator goes quiet (ErrCoordinatorLost).
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.Targets == nil {
		cfg.Targets = LinkKeysTargets
	}
	if cfg.SetSources == nil {
		cfg.SetSources = SetLinkKeysSources
	}
	if cfg.RunKeycast == nil {
		cfg.RunKeycast = runKeycastSpec
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	if cfg.Conn.Name == "" {
		cfg.Conn.Name = "loadproof-worker " + cfg.Name
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Secret == "" {
		if !cfg.InsecureUnsigned {
			return errors.New("coord: worker: no run secret: anyone who can publish on this NATS could send it tasks; " +
				"set LOADPROOF_SECRET or --secret-file (the coordinator's), or accept the risk with --insecure-unsigned")
		}
		log.Warn("INSECURE: control messages are not signed (--insecure-unsigned); anyone on this NATS can send this worker tasks and stops")
	}
	w := &worker{cfg: cfg, log: log, sig: newSigner(cfg.Secret, "j:"+cfg.Name), done: make(chan error, 1)}
	w.sig.only = "c"
	w.state.Store("idle")
	w.task.Store(-1)
	nc, err := Connect(cfg.Conn, nats.ClosedHandler(func(*nats.Conn) { w.finish(errors.New("coord: the NATS connection closed")) }))
	if err != nil {
		return err
	}
	defer nc.Close()
	w.nc = nc
	reply, err := w.join(ctx)
	if err != nil {
		return err
	}
	w.index, w.subj, w.bucket = reply.Index, subjects{cfg.Prefix, reply.Run}, reply.Bucket
	w.sig.bind(reply.Run, workerFrom(reply.Index))
	log.Info("joined the coordinator", "run", reply.Run, "index", reply.Index, "workers", reply.Workers)
	w.lastCoord.Store(time.Now().UnixNano())
	if err := w.subscribe(); err != nil {
		return err
	}
	go w.heartbeat(ctx)
	go w.watchdog(ctx)
	select {
	case err := <-w.done:
		w.abortTask()
		return err
	case <-ctx.Done():
		w.abortTask()
		return ctx.Err()
	}
}

func (w *worker) finish(err error) {
	w.doneOnce.Do(func() { w.done <- err })
}

// join asks for a place until a coordinator accepts or refuses for good.
func (w *worker) join(ctx context.Context) (*JoinReply, error) {
	limit := w.cfg.JoinTimeout
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	deadline := time.Now().Add(limit)
	subj := subjects{prefix: w.cfg.Prefix}.join()
	j := JoinMsg{Version: ProtocolVersion, Name: w.cfg.Name, Index: w.cfg.Index, Machine: machine.Collect("KEYCAST_", "LINKKEYS_"), JoinID: RandomSecret()[:32]}
	j.Machine.CostPerHour = w.cfg.CostPerHour
	for challenges := 0; ; {
		// Sealed afresh each try: a new sequence number, the run nonce once the coordinator gave it.
		m, err := w.sig.msg(subj, j)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := w.nc.RequestMsgWithContext(rctx, m)
		cancel()
		if err == nil {
			var r JoinReply
			if err := w.sig.open(resp, &r); err != nil {
				return nil, err
			}
			if r.Challenge && r.Run != "" && challenges < 3 {
				challenges++
				j.Run = r.Run
				continue
			}
			if r.Accepted {
				return &r, nil
			}
			return nil, fmt.Errorf("coord: the coordinator refused this worker: %s", r.Reason)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("coord: no coordinator answered on %s within %s: %w", subj, limit, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (w *worker) subscribe() error {
	subs := []struct {
		subj string
		fn   nats.MsgHandler
	}{
		{w.subj.worker(w.index, "ping"), w.onPing},
		{w.subj.worker(w.index, "task"), w.onTask},
		{w.subj.worker(w.index, "bye"), w.onBye},
		{w.subj.worker(w.index, "release"), w.onRelease},
		{w.subj.sub("abort"), w.onAbort},
		{w.subj.sub("coord"), w.onCoord},
	}
	for _, s := range subs {
		if _, err := w.nc.Subscribe(s.subj, s.fn); err != nil {
			return fmt.Errorf("coord: subscribing to %s: %w", s.subj, err)
		}
	}
	return w.nc.Flush()
}

func (w *worker) onPing(m *nats.Msg) {
	if w.sig.check(m) != nil {
		return
	}
	_ = w.sig.reply(w.nc, m, PingReply{UnixNano: time.Now().UnixNano()})
}

func (w *worker) onCoord(m *nats.Msg) {
	if w.sig.check(m) == nil {
		w.lastCoord.Store(time.Now().UnixNano())
	}
}

func (w *worker) onBye(m *nats.Msg) {
	var b Bye
	if w.sig.open(m, &b) == nil {
		_ = w.sig.reply(w.nc, m, TaskReply{Accepted: true})
		w.finish(nil)
	}
}

func (w *worker) onAbort(m *nats.Msg) {
	var a Abort
	if err := w.sig.open(m, &a); err != nil {
		w.log.Warn("ignoring an abort with a bad signature", "err", err)
		return
	}
	if a.Task == -1 {
		w.log.Warn("the coordinator ended the session", "reason", a.Reason)
		w.finish(fmt.Errorf("coord: the coordinator aborted the run: %s", a.Reason))
		return
	}
	if int64(a.Task) == w.task.Load() {
		w.log.Warn("aborting the task", "task", a.Task, "reason", a.Reason)
		w.abortTask()
	}
}

func (w *worker) abortTask() {
	w.mu.Lock()
	if w.cancelTask != nil {
		w.cancelTask()
	}
	w.mu.Unlock()
}

// onTask checks a task and, when it is allowed, runs it in the background.
func (w *worker) onTask(m *nats.Msg) {
	var t Task
	if err := w.sig.open(m, &t); err != nil {
		w.log.Warn("ignoring a task", "err", err)
		return
	}
	if last := w.lastTask.Load(); int64(t.ID) <= last || !t.StartAt.After(time.Now()) {
		// The message itself is fresh (open refused replays): say why, so a late start is visible.
		w.sig.count(RefusedTask)
		reason := fmt.Sprintf("coord: task %d is not newer than task %d, or its start %s has passed; a worker takes only newer tasks that start in the future (raise --start-lead if starts arrive late)",
			t.ID, last, t.StartAt.Format(time.RFC3339Nano))
		w.log.Warn("refusing a stale task", "task", t.ID, "last", last, "start_at", t.StartAt)
		_ = w.sig.reply(w.nc, m, TaskReply{Reason: reason})
		return
	}
	spec, err := w.check(t)
	if err != nil {
		w.sig.count(RefusedTask)
		w.log.Warn("refusing a task", "task", t.ID, "err", err)
		_ = w.sig.reply(w.nc, m, TaskReply{Reason: err.Error()})
		return
	}
	w.mu.Lock()
	if w.busy {
		w.mu.Unlock()
		_ = w.sig.reply(w.nc, m, TaskReply{Reason: "coord: the worker is still running another task"})
		return
	}
	if int64(t.ID) <= w.lastTask.Load() {
		w.mu.Unlock()
		return
	}
	if w.cfg.SetSources != nil && spec == nil {
		args, err := w.cfg.SetSources(t.Args, t.Segment, w.cfg.ClientIPBase, w.cfg.ClientIPCount)
		if err != nil {
			w.mu.Unlock()
			what := "source addresses"
			if w.cfg.ClientIPBase != "" {
				what = "--client-ip-base"
			}
			_ = w.sig.reply(w.nc, m, TaskReply{Reason: fmt.Sprintf("coord: this worker's %s: %v", what, err)})
			return
		}
		t.Args = args
	}
	w.lastTask.Store(int64(t.ID))
	ctx, cancel := context.WithCancel(context.Background())
	w.busy, w.cancelTask = true, cancel
	w.mu.Unlock()
	w.task.Store(int64(t.ID))
	_ = w.sig.reply(w.nc, m, TaskReply{Accepted: true})
	go w.runTask(ctx, t, spec)
}

// check applies the allow list, the file rule and the host rules to a task, and returns its
// Keycast spec (nil for a LinkKeys task).
func (w *worker) check(t Task) (*KeycastSpec, error) {
	if err := t.Segment.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if t.Segment.Count > MaxSegments {
		return nil, fmt.Errorf("%w: segment count %d is above %d", ErrRefused, t.Segment.Count, MaxSegments)
	}
	var files, targets []string
	var spec *KeycastSpec
	switch {
	case len(t.Keycast) > 0 && len(t.Args) > 0:
		return nil, fmt.Errorf("%w: the task carries both a Keycast spec and a command; a task is one of them", ErrRefused)
	case len(t.Keycast) > 0:
		s, err := DecodeKeycastSpec(t.Keycast)
		if err != nil {
			return nil, err
		}
		spec, files, targets = &s, s.Files(), []string{s.URL}
	default:
		if err := CheckTaskFlags(t.Args); err != nil {
			return nil, err
		}
		if w.cfg.Exec == nil {
			return nil, fmt.Errorf("%w: this worker runs no LinkKeys tasks", ErrRefused)
		}
		var err error
		if targets, err = w.cfg.Targets(t.Args); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRefused, err)
		}
	}
	for _, f := range files {
		if err := w.fileAllowed(f); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRefused, err)
		}
	}
	for _, target := range targets {
		if err := w.authorize(target); err != nil {
			return nil, fmt.Errorf("%w: %v; a worker authorizes its targets with its own --allow-host", ErrRefused, err)
		}
	}
	return spec, nil
}

// fileAllowed reports whether a task may name file f: an absolute, clean path inside one of
// TaskFiles (symbolic links resolved), or anything with "*".
func (w *worker) fileAllowed(f string) error {
	for _, d := range w.cfg.TaskFiles {
		if d == "*" {
			return nil
		}
	}
	if !filepath.IsAbs(f) || filepath.Clean(f) != f {
		return fmt.Errorf("coord: task file %q: want an absolute, clean path inside this worker's --task-files directories", f)
	}
	real, err := filepath.EvalSymlinks(f)
	if err != nil {
		real = f // a missing file fails in the command, inside the directory checked here
	}
	for _, d := range w.cfg.TaskFiles {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rd, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return nil
		}
	}
	return fmt.Errorf("coord: task file %q is outside this worker's --task-files directories", f)
}

// AddrTarget marks a TCP address for WorkerConfig.Targets.
func AddrTarget(hostport string) string { return "tcp://" + hostport }

// authorize applies the worker's host rules to one thing a task reaches.
func (w *worker) authorize(target string) error {
	switch {
	case strings.HasPrefix(target, "tcp://"):
		return w.cfg.Hosts.AuthorizeAddr(strings.TrimPrefix(target, "tcp://"))
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		return w.cfg.Hosts.AuthorizeURL(target)
	case w.cfg.MetricsFiles && filepath.IsAbs(target) && filepath.Clean(target) == target:
		return nil
	}
	return fmt.Errorf("coord: %q: a task may reach only http(s) URLs and TCP addresses (a METRICS log file only on a worker started with --allow-metrics-file)", target)
}

func (w *worker) runTask(ctx context.Context, t Task, spec *KeycastSpec) {
	defer func() {
		w.mu.Lock()
		w.busy, w.cancelTask = false, nil
		w.mu.Unlock()
		w.task.Store(-1)
		w.state.Store("idle")
	}()
	w.state.Store("running")
	var seq atomic.Int64
	var delivered []byte
	// publish sends each interval snapshot of the task's engine runs to the coordinator.
	publish := func(iv *result.Interval) {
		s := Snapshot{Index: w.index, Task: t.ID, Seq: int(seq.Add(1) - 1), Interval: ToWire(iv), State: "running"}
		if m, err := w.sig.msg(w.subj.sub("snap"), s); err == nil {
			_ = w.nc.PublishMsg(m)
		}
	}
	share := &Share{
		Segment: t.Segment, Start: t.StartAt, SampleServer: t.SampleServer,
		Deliver: func(v any) error {
			b, err := json.Marshal(v)
			delivered = b
			return err
		},
	}
	if t.Barrier {
		path, stop, err := w.serveBarrier(t)
		if err != nil {
			w.log.Error("cannot serve the hold barrier; the command holds for nothing", "err", err)
		} else {
			share.BarrierPath = path
			defer stop()
		}
	}
	var err error
	tctx := engine.WithIntervalObserver(ctx, publish)
	if spec != nil {
		err = w.runKeycast(tctx, *spec, share)
	} else {
		err = w.cfg.Exec(tctx, t.Args, share)
	}
	w.state.Store("uploading")
	msg := ResultMsg{Index: w.index, Task: t.ID, Refused: w.sig.refusals()}
	if delivered == nil {
		if err == nil {
			err = errors.New("the command delivered no result")
		}
		msg.Err = err.Error()
	} else {
		if err != nil {
			w.log.Warn("the task ended with an error; sending its result", "err", err)
		}
		if uerr := w.upload(&msg, delivered); uerr != nil {
			msg.Err = uerr.Error()
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		// Sealed afresh each try: the coordinator refuses a replayed message, and keeps the first
		// good result of a worker whatever repeats follow.
		m, merr := w.sig.msg(w.subj.sub("result"), msg)
		if merr != nil {
			return
		}
		if _, err := w.nc.RequestMsg(m, 30*time.Second); err == nil {
			return
		}
	}
	w.log.Error("the coordinator did not acknowledge the result", "task", t.ID)
}

// runKeycast runs a Keycast task's spec in the library: this worker's segment from the start
// instant, the result to the share's Deliver.
func (w *worker) runKeycast(ctx context.Context, spec KeycastSpec, share *Share) error {
	cfg := spec.RunConfig()
	cfg.Logger, cfg.Progress = w.log, w.cfg.Progress
	share.Apply(&cfg)
	res, err := w.cfg.RunKeycast(ctx, cfg)
	if err != nil {
		return fmt.Errorf("keycast run: %w", err)
	}
	return share.Deliver(res)
}

// upload stores the result in the object store when the coordinator made a bucket, in chunks
// otherwise, and fills msg's location and checksum.
func (w *worker) upload(msg *ResultMsg, b []byte) error {
	sum := sha256.Sum256(b)
	msg.Size, msg.SHA256 = len(b), hex.EncodeToString(sum[:])
	if w.bucket != "" {
		if err := w.putObject(msg, b); err == nil {
			return nil
		} else {
			w.log.Warn("object store upload failed; sending the result in chunks", "err", err)
		}
	}
	n := (len(b) + ChunkSize - 1) / ChunkSize
	for i := 0; i < n; i++ {
		part := b[i*ChunkSize : min(len(b), (i+1)*ChunkSize)]
		hdr := map[string]string{hdrIndex: strconv.Itoa(w.index), hdrTask: strconv.Itoa(msg.Task), hdrSeq: strconv.Itoa(i), hdrOf: strconv.Itoa(n)}
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			var resp *nats.Msg
			if resp, err = w.nc.RequestMsg(w.sig.raw(w.subj.sub("chunk"), part, hdr), 10*time.Second); err == nil {
				var r TaskReply
				if err = w.sig.open(resp, &r); err == nil && !r.Accepted {
					return fmt.Errorf("coord: the coordinator refused result chunk %d of %d: %s", i+1, n, r.Reason)
				}
				if err == nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("coord: sending result chunk %d of %d: %w", i+1, n, err)
		}
	}
	msg.Chunks = n
	return nil
}

func (w *worker) putObject(msg *ResultMsg, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(w.nc)
	if err != nil {
		return err
	}
	obs, err := js.ObjectStore(ctx, w.bucket)
	if err != nil {
		return err
	}
	name := objectName(msg.Task, w.index)
	if _, err := obs.PutBytes(ctx, name, b); err != nil {
		return err
	}
	msg.Object = name
	return nil
}

// heartbeat reports the worker's state every SnapshotEvery, so silence means a lost worker even
// between intervals and between tasks.
func (w *worker) heartbeat(ctx context.Context) {
	t := time.NewTicker(SnapshotEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s := Snapshot{Index: w.index, Task: int(w.task.Load()), Seq: -1, State: w.state.Load().(string), Refused: w.sig.refusals()}
			if m, err := w.sig.msg(w.subj.sub("snap"), s); err == nil {
				_ = w.nc.PublishMsg(m)
			}
		}
	}
}

// watchdog stops the worker when the coordinator has been quiet for WatchdogAfter.
func (w *worker) watchdog(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if time.Since(time.Unix(0, w.lastCoord.Load())) > WatchdogAfter {
				// Confirm with a direct ping, so a worker starved of CPU does not mistake late
				// heartbeats for a dead coordinator; a dead one answers nothing (no responders).
				if m, err := w.sig.msg(w.subj.sub("cping"), struct{}{}); err == nil {
					if resp, err := w.nc.RequestMsg(m, confirmWait); err == nil && w.sig.check(resp) == nil {
						w.lastCoord.Store(time.Now().UnixNano())
						w.log.Warn("the coordinator's heartbeats were late; it answered a ping")
						continue
					}
				}
				w.log.Error("the coordinator went quiet; stopping the load", "after", WatchdogAfter)
				w.abortTask()
				w.finish(ErrCoordinatorLost)
				return
			}
		}
	}
}

func (w *worker) onRelease(m *nats.Msg) {
	var b BarrierMsg
	if w.sig.open(m, &b) != nil || int64(b.Task) != w.task.Load() {
		return
	}
	w.mu.Lock()
	if w.release != nil {
		close(w.release)
		w.release = nil
	}
	w.mu.Unlock()
}

// serveBarrier serves a local hold barrier for one task: the command connects and says "ready N"
// when its connections are established; the worker relays that to the coordinator, which feeds the
// run's own barrier, and closes the command's connection when the coordinator relays the release.
func (w *worker) serveBarrier(t Task) (string, func(), error) {
	dir, err := os.MkdirTemp("", "loadproof-barrier-*")
	if err != nil {
		return "", nil, err
	}
	path := dir + "/b.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	release := make(chan struct{})
	w.mu.Lock()
	w.release = release
	w.mu.Unlock()
	send := func(b BarrierMsg) {
		b.Index, b.Task = w.index, t.ID
		if m, err := w.sig.msg(w.subj.sub("ready"), b); err == nil {
			_ = w.nc.PublishMsg(m)
		}
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			send(BarrierMsg{Gone: true})
			return
		}
		defer c.Close()
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		for line := range lines {
			if rest, ok := strings.CutPrefix(line, "ready "); ok {
				held, _ := strconv.ParseInt(rest, 10, 64)
				send(BarrierMsg{Held: held})
				select {
				case <-release:
				case <-lines: // the command left (its context ended)
				}
				return
			}
		}
		send(BarrierMsg{Gone: true})
	}()
	stop := func() {
		ln.Close()
		os.RemoveAll(dir)
	}
	return path, stop, nil
}
