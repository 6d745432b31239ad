package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/syncio"
)

// CoordinatorConfig configures NewCoordinator. Zero values are documented defaults.
type CoordinatorConfig struct {
	// Conn says how to reach NATS; an empty URL starts an embedded server (Embedded).
	Conn     ConnConfig
	Embedded EmbeddedConfig
	// Prefix is the subject prefix; empty means DefaultPrefix.
	Prefix string
	// Secret signs and checks every message. Empty is refused on any NATS but the embedded one
	// unless InsecureUnsigned is set.
	Secret string
	// InsecureUnsigned allows an empty Secret on an external NATS: anyone who can publish there can
	// then forge control messages. It is logged loudly and recorded in the manifest.
	InsecureUnsigned bool
	// Workers is the number of workers (segments) the run needs (at least 1).
	Workers int
	// JoinTimeout bounds the wait for the workers; 0 means 2 minutes.
	JoinTimeout time.Duration
	// StartLead is how far ahead of the start message the start instant lies; 0 means 2 s.
	StartLead time.Duration
	// ResultWait bounds the wait for the workers' results after their load ended; 0 means 60 s.
	ResultWait time.Duration
	// Progress receives one line per merged interval; nil discards.
	Progress io.Writer
	// Logger receives the coordinator's log; nil discards.
	Logger *slog.Logger
}

// WorkerInfo is what the coordinator knows of one worker; the coordination manifest lists them.
type WorkerInfo struct {
	Index   int            `json:"index"`
	Name    string         `json:"name"`
	Segment string         `json:"segment"`
	Machine machine.Record `json:"machine"`
	// ClockOffsetMs is the worker's clock minus the coordinator's, measured over the lowest-RTT
	// ping (NTP's estimate, accurate to half that RTT).
	ClockOffsetMs float64   `json:"clock_offset_ms"`
	RTTMs         float64   `json:"rtt_ms"`
	JoinedAt      time.Time `json:"joined_at"`
	LastSeen      time.Time `json:"last_seen"`
	State         string    `json:"state"`
	// Error is set for a worker that failed or was lost.
	Error string `json:"error,omitempty"`
	// LastSnapshot is the last interval snapshot it sent.
	LastSnapshot *Snapshot `json:"last_snapshot,omitempty"`
}

// WorkerLostError reports a worker that stopped reporting for LostAfter.
type WorkerLostError struct {
	Index    int
	Name     string
	LastSeen time.Time
	Last     *Snapshot
}

func (e *WorkerLostError) Error() string {
	last := "no interval snapshot"
	if e.Last != nil && e.Last.Interval != nil {
		last = fmt.Sprintf("last snapshot: interval %d at %.0fs, %d operations", e.Last.Seq, e.Last.Interval.T, e.Last.Interval.Total())
	}
	return fmt.Sprintf("coord: worker %d (%s) stopped reporting at %s (%s); the run failed and the partial results of the others were kept",
		e.Index, e.Name, e.LastSeen.UTC().Format(time.RFC3339Nano), last)
}

// NotReadyError reports workers that did not join in time.
type NotReadyError struct {
	Missing []int
	Workers int
	Waited  time.Duration
}

func (e *NotReadyError) Error() string {
	var ids []string
	for _, i := range e.Missing {
		ids = append(ids, strconv.Itoa(i))
	}
	return fmt.Sprintf("coord: %d of %d workers did not join within %s: missing indexes %s; start them with `loadproof worker --nats URL --index I` (or check the Job)",
		len(e.Missing), e.Workers, e.Waited, strings.Join(ids, ", "))
}

// Coordinator runs the coordinator side of a distributed run.
type Coordinator struct {
	cfg    CoordinatorConfig
	log    *slog.Logger
	nc     *nats.Conn
	emb    *Embedded
	sig    *signer
	subj   subjects
	run    string
	bucket string
	obs    jetstream.ObjectStore

	mu      sync.Mutex
	workers []*WorkerInfo
	ready   chan struct{}
	cur     *taskState
	nextID  int
	lost    *WorkerLostError
	tasks   []TaskRecord
	chunks  map[string]*chunkSet
	// chunkBytes is the size of every chunk held, bounded by MaxResultBytes.
	chunkBytes int
	joinIDs    map[string]bool
	partial    error
	stopHB     chan struct{}
	closeMu    sync.Once
}

// NewCoordinator connects (or embeds NATS), opens the run and starts accepting workers.
func NewCoordinator(ctx context.Context, cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Workers < 1 {
		return nil, errors.New("coord: --workers must be at least 1")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 2 * time.Minute
	}
	if cfg.StartLead <= 0 {
		cfg.StartLead = 2 * time.Second
	}
	if cfg.ResultWait <= 0 {
		cfg.ResultWait = 60 * time.Second
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	// Lines come from the task's goroutine and from the NATS handlers: one write at a time.
	cfg.Progress = syncio.NewWriter(cfg.Progress)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Secret == "" && cfg.Conn.URL != "" {
		if !cfg.InsecureUnsigned {
			return nil, errors.New("coord: no run secret on an external NATS: anyone who can publish there could forge tasks and results; " +
				"set LOADPROOF_SECRET or --secret-file (the same on every worker), or accept the risk with --insecure-unsigned")
		}
		log.Warn("INSECURE: control messages are not signed (--insecure-unsigned); anyone on this NATS can forge tasks, results and stops")
	}
	c := &Coordinator{cfg: cfg, log: log, sig: newSigner(cfg.Secret, "c"), workers: make([]*WorkerInfo, cfg.Workers),
		ready: make(chan struct{}), chunks: map[string]*chunkSet{}, joinIDs: map[string]bool{}, stopHB: make(chan struct{})}
	// The run identifier is random: it is the nonce every message of the run carries.
	c.run = RandomSecret()[:24]
	c.sig.bind(c.run, "c")
	c.subj = subjects{cfg.Prefix, c.run}
	if cfg.Conn.URL == "" {
		ecfg := cfg.Embedded
		ecfg.Run, ecfg.Prefix = c.run, cfg.Prefix
		emb, err := StartEmbedded(ecfg)
		if err != nil {
			return nil, err
		}
		c.emb = emb
		cfg.Conn.URL, cfg.Conn.Token = emb.URL, emb.CoordToken
		c.cfg.Conn = cfg.Conn
	}
	if cfg.Conn.Name == "" {
		cfg.Conn.Name = "loadproof-coordinator"
	}
	nc, err := Connect(cfg.Conn)
	if err != nil {
		c.closeEmbedded()
		return nil, err
	}
	c.nc = nc
	c.openBucket(ctx)
	// A worker's interval snapshots, result chunks and result go through one subscription, so one
	// goroutine handles them in the order the worker sent them. With a subscription each, nats.go
	// hands each subject to its own goroutine, and a result could be handled before the worker's
	// last snapshot (the live merge then closed that interval without it) or before its last chunk.
	ordered := map[string]nats.MsgHandler{
		c.subj.sub("snap"):   c.onSnap,
		c.subj.sub("chunk"):  c.onChunk,
		c.subj.sub("result"): c.onResult,
	}
	subs := []struct {
		subj string
		fn   nats.MsgHandler
	}{
		{c.subj.join(), c.onJoin},
		{c.subj.sub("*"), func(m *nats.Msg) {
			if h := ordered[m.Subject]; h != nil {
				h(m)
			}
		}},
		{c.subj.sub("cping"), c.onPing},
		{c.subj.sub("ready"), c.onReady},
	}
	for _, s := range subs {
		if _, err := nc.Subscribe(s.subj, s.fn); err != nil {
			c.Close()
			return nil, fmt.Errorf("coord: subscribing to %s: %w", s.subj, err)
		}
	}
	if err := nc.Flush(); err != nil {
		c.Close()
		return nil, fmt.Errorf("coord: %w", err)
	}
	go c.heartbeat()
	go c.monitor()
	return c, nil
}

// URL is the NATS URL workers connect to; Token the embedded server's token (empty otherwise).
func (c *Coordinator) URL() string { return c.cfg.Conn.URL }

// Token is the embedded server's token, or empty for an external server.
func (c *Coordinator) Token() string {
	if c.emb == nil {
		return ""
	}
	return c.emb.Token
}

// Run is the run's identifier (part of every subject).
func (c *Coordinator) Run() string { return c.run }

// Transport says how results travel: "object-store" or "chunks".
func (c *Coordinator) Transport() string {
	if c.bucket != "" {
		return "object-store"
	}
	return "chunks"
}

// openBucket makes the run's object store bucket when the server has JetStream.
func (c *Coordinator) openBucket(ctx context.Context) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name := bucketName(c.run)
	obs, err := js.CreateObjectStore(bctx, jetstream.ObjectStoreConfig{Bucket: name, Storage: jetstream.MemoryStorage, TTL: time.Hour})
	if err != nil {
		c.log.Info("no JetStream object store; results travel in chunks", "err", err)
		return
	}
	c.bucket, c.obs = name, obs
}

func (c *Coordinator) heartbeat() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if m, err := c.sig.msg(c.subj.sub("coord"), struct{}{}); err == nil {
			_ = c.nc.PublishMsg(m)
		}
		select {
		case <-c.stopHB:
			return
		case <-t.C:
		}
	}
}

func (c *Coordinator) onJoin(m *nats.Msg) {
	var j JoinMsg
	if err := c.sig.openJoin(m, &j); err != nil {
		c.log.Warn("ignoring a join", "err", err)
		return
	}
	reply := JoinReply{Run: c.run, Workers: c.cfg.Workers, Bucket: c.bucket, Index: -1}
	if j.Run != c.run {
		// First contact, or a join of another run: hand out this run's nonce.
		_ = c.sig.reply(c.nc, m, JoinReply{Challenge: true, Run: c.run, Index: -1})
		return
	}
	c.mu.Lock()
	switch {
	case j.JoinID == "" || c.joinIDs[j.JoinID]:
		c.mu.Unlock()
		c.sig.count(RefusedJoin)
		c.log.Warn("ignoring a repeated join", "name", j.Name)
		return
	case j.Version != ProtocolVersion:
		reply.Reason = fmt.Sprintf("protocol version %d; this coordinator speaks %d (use the same loadproof build)", j.Version, ProtocolVersion)
	case j.Index >= c.cfg.Workers:
		reply.Reason = fmt.Sprintf("index %d is outside 0..%d", j.Index, c.cfg.Workers-1)
	case j.Index >= 0:
		if w := c.workers[j.Index]; w != nil && w.Name != j.Name {
			reply.Reason = fmt.Sprintf("index %d is taken by %s", j.Index, w.Name)
		} else {
			reply.Index = j.Index
		}
	default:
		for i, w := range c.workers {
			if w == nil || w.Name == j.Name {
				reply.Index = i
				break
			}
		}
		if reply.Index < 0 {
			reply.Reason = fmt.Sprintf("the run already has its %d workers", c.cfg.Workers)
		}
	}
	if reply.Index >= 0 {
		c.joinIDs[j.JoinID] = true
		reply.Accepted = true
		now := time.Now()
		c.workers[reply.Index] = &WorkerInfo{Index: reply.Index, Name: j.Name, Machine: j.Machine, JoinedAt: now, LastSeen: now,
			State: "idle", Segment: result.Segment{Index: reply.Index, Count: c.cfg.Workers}.String()}
		c.log.Info("worker joined", "index", reply.Index, "name", j.Name)
		if c.countJoined() == c.cfg.Workers {
			select {
			case <-c.ready:
			default:
				close(c.ready)
			}
		}
	}
	c.mu.Unlock()
	_ = c.sig.reply(c.nc, m, reply)
}

func (c *Coordinator) countJoined() int {
	n := 0
	for _, w := range c.workers {
		if w != nil {
			n++
		}
	}
	return n
}

// WaitReady waits for every worker to join (bounded by JoinTimeout) and measures their clocks.
func (c *Coordinator) WaitReady(ctx context.Context) error {
	t := time.NewTimer(c.cfg.JoinTimeout)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		c.mu.Lock()
		var missing []int
		for i, w := range c.workers {
			if w == nil {
				missing = append(missing, i)
			}
		}
		c.mu.Unlock()
		return &NotReadyError{Missing: missing, Workers: c.cfg.Workers, Waited: c.cfg.JoinTimeout}
	}
	return c.measureClocks(ctx)
}

// measureClocks pings every worker a few times and keeps, for each, the offset of the lowest-RTT
// exchange: offset = worker clock − (send + receive)/2.
func (c *Coordinator) measureClocks(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, c.cfg.Workers)
	for i := range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			best := time.Duration(-1)
			var off time.Duration
			// A worker subscribes to its subjects right after its join is answered, so the first
			// pings may find no responder yet: those are retried, not counted.
			for ok, tries := 0, 0; ok < 5 && tries < 40; tries++ {
				m, _ := c.sig.msg(c.subj.worker(i, "ping"), struct{}{})
				t0 := time.Now()
				resp, err := c.nc.RequestMsg(m, 2*time.Second)
				t1 := time.Now()
				if err != nil {
					errs[i] = err
					time.Sleep(100 * time.Millisecond)
					continue
				}
				ok++
				var p PingReply
				if c.sig.open(resp, &p) != nil || sender(resp) != workerFrom(i) {
					continue
				}
				if rtt := t1.Sub(t0); best < 0 || rtt < best {
					best = rtt
					mid := t0.Add(rtt / 2)
					off = time.Unix(0, p.UnixNano).Sub(mid)
				}
			}
			if best < 0 {
				errs[i] = fmt.Errorf("coord: worker %d did not answer its clock pings: %w", i, errs[i])
				return
			}
			errs[i] = nil
			c.mu.Lock()
			c.workers[i].ClockOffsetMs = float64(off) / 1e6
			c.workers[i].RTTMs = float64(best) / 1e6
			c.mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Count is the number of workers (segments) of the run.
func (c *Coordinator) Count() int { return c.cfg.Workers }

// Workers returns a copy of what is known of every worker.
func (c *Coordinator) Workers() []WorkerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]WorkerInfo, 0, len(c.workers))
	for i, w := range c.workers {
		if w == nil {
			out = append(out, WorkerInfo{Index: i, State: "missing"})
			continue
		}
		out = append(out, *w)
	}
	return out
}

// Lost returns the first worker lost in this session, or nil.
func (c *Coordinator) Lost() *WorkerLostError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// monitor fails the run when a joined worker stays silent for LostAfter.
func (c *Coordinator) monitor() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stopHB:
			return
		case <-t.C:
		}
		c.mu.Lock()
		var silent []int
		if c.lost == nil {
			for _, w := range c.workers {
				if w != nil && w.State != "lost" && time.Since(w.LastSeen) > LostAfter {
					silent = append(silent, w.Index)
				}
			}
		}
		c.mu.Unlock()
		for _, i := range silent {
			// Silence is confirmed with a direct ping before the run fails: a worker whose process
			// is gone answers nothing at once; one that is only starved of CPU (a saturated load
			// machine) answers, and its late heartbeat is not a lost worker.
			if c.pingOnce(i, confirmWait) {
				c.mu.Lock()
				c.workers[i].LastSeen = time.Now()
				c.mu.Unlock()
				c.log.Warn("a worker's heartbeat was late; it answered a ping", "index", i)
				continue
			}
			c.mu.Lock()
			if c.lost == nil {
				w := c.workers[i]
				w.State, w.Error = "lost", fmt.Sprintf("stopped reporting for %s and did not answer a ping", LostAfter)
				c.lost = &WorkerLostError{Index: w.Index, Name: w.Name, LastSeen: w.LastSeen, Last: w.LastSnapshot}
				c.log.Error("worker lost", "index", w.Index, "name", w.Name, "last_seen", w.LastSeen)
				if ts := c.cur; ts != nil {
					ts.signal(c.lost)
				}
			}
			c.mu.Unlock()
		}
	}
}

// confirmWait bounds the ping that confirms a silent peer is gone.
const confirmWait = time.Second

// pingOnce reports whether worker i answers one ping within d.
func (c *Coordinator) pingOnce(i int, d time.Duration) bool {
	m, err := c.sig.msg(c.subj.worker(i, "ping"), struct{}{})
	if err != nil {
		return false
	}
	resp, err := c.nc.RequestMsg(m, d)
	return err == nil && c.sig.check(resp) == nil && sender(resp) == workerFrom(i)
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

// onPing answers a worker that confirms the coordinator is alive.
func (c *Coordinator) onPing(m *nats.Msg) {
	if c.sig.check(m) == nil {
		_ = c.sig.reply(c.nc, m, PingReply{UnixNano: time.Now().UnixNano()})
	}
}

func (c *Coordinator) onSnap(m *nats.Msg) {
	var s Snapshot
	if err := c.sig.open(m, &s); err != nil || sender(m) != workerFrom(s.Index) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Index < 0 || s.Index >= len(c.workers) || c.workers[s.Index] == nil {
		return
	}
	w := c.workers[s.Index]
	w.LastSeen = time.Now()
	if w.State != "lost" {
		w.State = s.State
	}
	if s.Interval == nil {
		return
	}
	w.LastSnapshot = &s
	if ts := c.cur; ts != nil && ts.id == s.Task {
		ts.add(c, &s)
	}
}

// Close says goodbye to the workers, then closes the connection and any embedded server.
func (c *Coordinator) Close() {
	c.closeMu.Do(func() {
		if c.nc != nil {
			var wg sync.WaitGroup
			for i := range c.cfg.Workers {
				c.mu.Lock()
				joined := c.workers[i] != nil
				c.mu.Unlock()
				if !joined {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if m, err := c.sig.msg(c.subj.worker(i, "bye"), Bye{}); err == nil {
						_, _ = c.nc.RequestMsg(m, 2*time.Second)
					}
				}()
			}
			wg.Wait()
			close(c.stopHB)
			c.deleteBucket()
			c.nc.Close()
		}
		c.closeEmbedded()
	})
}

// deleteBucket removes the run's object store, so a shared NATS keeps nothing of the run.
func (c *Coordinator) deleteBucket() {
	if c.bucket == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if js, err := jetstream.New(c.nc); err == nil {
		if err := js.DeleteObjectStore(ctx, c.bucket); err != nil {
			c.log.Warn("could not delete the run's object store", "bucket", c.bucket, "err", err)
		}
	}
}

// objectName is the object store name of worker i's result of a task.
func objectName(task, i int) string { return fmt.Sprintf("task-%d-worker-%d.json", task, i) }

func (c *Coordinator) closeEmbedded() {
	if c.emb != nil {
		c.emb.Close()
	}
}

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
}

// RunTask runs args on every worker (segment i/N on worker i), merges their snapshots live, judges
// stop conditions, and returns when every worker delivered its result, or when a worker was lost
// and the others' results are in (or ResultWait passed). ctx's end aborts the task on every worker;
// their partial results still come back.
func (c *Coordinator) RunTask(ctx context.Context, args []string, opts TaskOptions) (*TaskResult, error) {
	if err := CheckCommand(args); err != nil {
		return nil, err
	}
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
		t := Task{ID: ts.id, Args: args, Segment: result.Segment{Index: i, Count: n}, StartAt: start.Add(offsets[i]), SampleServer: i == 0,
			Barrier: opts.BarrierPath != ""}
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
			refused = append(refused, fmt.Errorf("worker %d (%s): %s", i, c.name(i), r))
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

// Partial returns the first task of the session whose merged result lacks a worker's part, or
// nil: such a run must not exit 0.
func (c *Coordinator) Partial() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partial
}

// Refusals counts the messages the coordinator refused, by reason (RefusedReplay, …): the
// coordination manifest records them.
func (c *Coordinator) Refusals() map[string]int64 { return c.sig.refusals() }

// workerFrom is worker i's sender name.
func workerFrom(i int) string { return "w" + strconv.Itoa(i) }

// MaxResultBytes bounds one worker's result, and every chunk the coordinator holds at once.
const MaxResultBytes = 64 << 20

// chunkSet is one worker's result chunks of the current task.
type chunkSet struct {
	parts [][]byte
	have  int
	bytes int
}

// arrival is one worker's delivered result.
type arrival struct {
	index int
	data  []byte
	err   string
}

func (c *Coordinator) onChunk(m *nats.Msg) {
	if c.sig.check(m) != nil {
		return
	}
	if err := c.takeChunk(m); err != nil {
		c.sig.count(RefusedChunk)
		c.log.Warn("refusing a result chunk", "err", err)
		_ = c.sig.reply(c.nc, m, TaskReply{Reason: err.Error()})
		return
	}
	_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
}

// takeChunk keeps an authenticated chunk: only of the current task, from the joined worker that
// sent it, numbered below the count it announced, and within MaxResultBytes of chunks held.
func (c *Coordinator) takeChunk(m *nats.Msg) error {
	idx, err1 := strconv.Atoi(m.Header.Get(hdrIndex))
	task, err2 := strconv.Atoi(m.Header.Get(hdrTask))
	seq, err3 := strconv.Atoi(m.Header.Get(hdrSeq))
	of, err4 := strconv.Atoi(m.Header.Get(hdrOf))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("coord: chunk headers: %w", err)
	}
	if sender(m) != workerFrom(idx) {
		return fmt.Errorf("coord: chunk for worker %d sent by %q", idx, sender(m))
	}
	if of < 1 || of > MaxResultBytes/ChunkSize || seq < 0 || seq >= of || len(m.Data) > ChunkSize {
		return fmt.Errorf("coord: chunk %d of %d (%d bytes) is out of bounds (at most %d chunks of %d bytes)", seq, of, len(m.Data), MaxResultBytes/ChunkSize, ChunkSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts := c.cur; ts == nil || ts.id != task || idx < 0 || idx >= len(c.workers) || c.workers[idx] == nil || ts.good[idx] {
		return fmt.Errorf("coord: chunk of task %d for worker %d: no such task is waiting for that worker's result", task, idx)
	}
	key := fmt.Sprintf("%d/%d", task, idx)
	cs := c.chunks[key]
	if cs == nil {
		cs = &chunkSet{parts: make([][]byte, of)}
		c.chunks[key] = cs
	}
	if len(cs.parts) != of {
		return fmt.Errorf("coord: chunk announces %d chunks; worker %d announced %d", of, idx, len(cs.parts))
	}
	if cs.parts[seq] != nil {
		return nil // the worker resent it after a slow acknowledgement
	}
	if c.chunkBytes+len(m.Data) > MaxResultBytes {
		return fmt.Errorf("coord: result chunks held would pass %d bytes", MaxResultBytes)
	}
	cs.parts[seq] = slices.Clone(m.Data)
	cs.have++
	cs.bytes += len(m.Data)
	c.chunkBytes += len(m.Data)
	return nil
}

func (c *Coordinator) onResult(m *nats.Msg) {
	var r ResultMsg
	if err := c.sig.open(m, &r); err != nil {
		return
	}
	if sender(m) != workerFrom(r.Index) || r.Index < 0 || r.Index >= c.cfg.Workers {
		c.sig.count(RefusedSender)
		return
	}
	c.mu.Lock()
	ts := c.cur
	current := ts != nil && ts.id == r.Task && c.workers[r.Index] != nil
	repeat := current && ts.good[r.Index]
	c.mu.Unlock()
	if !current || repeat {
		// A result of another task, or a repeat of one already kept: acknowledged, not fetched.
		_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
		return
	}
	a := arrival{index: r.Index, err: r.Err}
	if r.Err == "" {
		b, err := c.fetch(r)
		if err != nil {
			a.err = err.Error()
		} else {
			a.data = b
		}
	}
	_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
	c.mu.Lock()
	if a.err != "" {
		c.workers[r.Index].Error = a.err
	} else {
		ts.good[r.Index] = true
	}
	c.mu.Unlock()
	select {
	case ts.results <- a:
	default: // await holds one arrival per worker; a later error for a counted index is dropped
	}
}

// fetch reads a result from the object store or the received chunks and checks its SHA-256.
func (c *Coordinator) fetch(r ResultMsg) ([]byte, error) {
	var b []byte
	switch {
	case r.Size < 0 || r.Size > MaxResultBytes:
		return nil, fmt.Errorf("coord: result of worker %d announces %d bytes; at most %d are taken", r.Index, r.Size, MaxResultBytes)
	case r.Object != "":
		if c.obs == nil {
			return nil, errors.New("coord: result in an object store this coordinator did not open")
		}
		if r.Object != objectName(r.Task, r.Index) {
			return nil, fmt.Errorf("coord: worker %d names object %q; its result of task %d is %s", r.Index, r.Object, r.Task, objectName(r.Task, r.Index))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		info, err := c.obs.GetInfo(ctx, r.Object)
		if err != nil {
			return nil, fmt.Errorf("coord: reading result %s from the object store: %w", r.Object, err)
		}
		if info.Size != uint64(r.Size) {
			_ = c.obs.Delete(ctx, r.Object)
			return nil, fmt.Errorf("coord: result of worker %d holds %d bytes in the object store; its announcement says %d", r.Index, info.Size, r.Size)
		}
		if b, err = c.obs.GetBytes(ctx, r.Object); err != nil {
			return nil, fmt.Errorf("coord: reading result %s from the object store: %w", r.Object, err)
		}
		_ = c.obs.Delete(ctx, r.Object)
	default:
		key := fmt.Sprintf("%d/%d", r.Task, r.Index)
		c.mu.Lock()
		cs := c.chunks[key]
		delete(c.chunks, key)
		if cs != nil {
			c.chunkBytes -= cs.bytes
		}
		c.mu.Unlock()
		if cs == nil || cs.have != r.Chunks || len(cs.parts) != r.Chunks {
			have := 0
			if cs != nil {
				have = cs.have
			}
			return nil, fmt.Errorf("coord: result of worker %d arrived in %d of %d chunks", r.Index, have, r.Chunks)
		}
		for _, p := range cs.parts {
			b = append(b, p...)
		}
	}
	sum := sha256.Sum256(b)
	if len(b) != r.Size || hex.EncodeToString(sum[:]) != r.SHA256 {
		return nil, fmt.Errorf("coord: result of worker %d is damaged (%d bytes, want %d, checksum mismatch)", r.Index, len(b), r.Size)
	}
	return b, nil
}

// TaskRecord is one task in the coordination manifest: when it was to start, when each worker's
// engine did start (in the coordinator's clock, offsets removed) and the spread of those starts.
type TaskRecord struct {
	ID       int       `json:"id"`
	Describe string    `json:"describe"`
	Args     []string  `json:"args"`
	StartAt  time.Time `json:"start_at"`
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
	rec := TaskRecord{ID: tr.ID, Describe: describe, Args: args, StartAt: tr.StartAt, Starts: make([]time.Time, len(started)), Stop: tr.Stop, Lost: RecordLost(tr.Lost)}
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
