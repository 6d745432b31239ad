package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

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
	// Refused counts the control messages this worker refused, by reason (replay, task, …), as
	// it last reported them.
	Refused map[string]int64 `json:"refused_messages,omitempty"`
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
			// pings may find no responder yet: those are retried, not counted. They wait 250 ms,
			// then twice as long each try up to 2 s: NATS says "no responders" at once only while
			// nobody else listens on the subject (a monitor on the prefix makes a ping to a worker
			// not yet subscribed wait out its whole timeout).
			for ok, tries := 0, 0; ok < 5 && tries < 40; tries++ {
				m, _ := c.sig.msg(c.subj.worker(i, "ping"), struct{}{})
				t0 := time.Now()
				resp, err := c.nc.RequestMsg(m, min(2*time.Second, 250*time.Millisecond<<min(tries, 3)))
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
	if r := cleanRefusals(s.Refused); r != nil {
		w.Refused = r
	}
	if s.Interval == nil {
		return
	}
	w.LastSnapshot = &s
	if ts := c.cur; ts != nil && ts.id == s.Task {
		ts.add(c, &s)
	}
}

// workerFrom is worker i's sender name.
func workerFrom(i int) string { return "w" + strconv.Itoa(i) }
