package coord

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Protocol constants. Subjects are Prefix + "." + run + "." + name; the join subject has no run.
const (
	// DefaultPrefix is the subject prefix when Options.Prefix is empty.
	DefaultPrefix = "loadproof"
	// ProtocolVersion is carried in every join; a coordinator refuses other versions.
	ProtocolVersion = 1
	// SnapshotEvery is how often a worker reports (an interval snapshot or a heartbeat).
	SnapshotEvery = time.Second
	// LostAfter is how long a worker may stay silent before the run fails.
	LostAfter = 3 * time.Second
	// WatchdogAfter is how long a worker runs on without hearing the coordinator.
	WatchdogAfter = 3 * time.Second
	// ChunkSize is the size of one result chunk on the request/reply fallback.
	ChunkSize = 256 << 10
	// sigHeader carries the HMAC-SHA256 of subject and body under the run secret.
	sigHeader = "Lp-Sig"
)

// Subjects of one run.
type subjects struct {
	prefix, run string
}

func (s subjects) join() string           { return s.prefix + ".join" }
func (s subjects) sub(name string) string { return s.prefix + "." + s.run + "." + name }
func (s subjects) worker(i int, what string) string {
	return fmt.Sprintf("%s.%s.w.%d.%s", s.prefix, s.run, i, what)
}

// JoinMsg is a worker's request to take part (subject <prefix>.join).
type JoinMsg struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// Index is the segment index the worker asks for (a Kubernetes Indexed Job's completion index),
	// or -1 for any free one.
	Index   int            `json:"index"`
	Machine machine.Record `json:"machine"`
	// Run is the run nonce the coordinator handed out in its challenge (empty on the first try): a
	// join captured in an earlier run names that run and is refused.
	Run string `json:"run,omitempty"`
	// JoinID is random per worker process: a join seen once is not taken again.
	JoinID string `json:"join_id,omitempty"`
}

// JoinReply is the coordinator's answer.
type JoinReply struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	// Challenge says the join named no run (or another one): ask again with Run.
	Challenge bool   `json:"challenge,omitempty"`
	Run       string `json:"run,omitempty"`
	Index     int    `json:"index"`
	Workers   int    `json:"workers"`
	// Bucket is the JetStream object store bucket for results; empty means chunks.
	Bucket string `json:"bucket,omitempty"`
}

// PingReply carries the worker's clock at the moment it answered a ping.
type PingReply struct {
	UnixNano int64 `json:"unix_nano"`
}

// Task is one load run for one worker: a typed Keycast spec (KeycastSpec) or a LinkKeys client
// command (`linkkeys worker --spec JSON`, the loadproof tree without the binary's name), the
// worker's segment and the start instant in the worker's own clock.
type Task struct {
	ID int `json:"id"`
	// Keycast is a Keycast run's spec, decoded strictly by the worker (DecodeKeycastSpec); Args is
	// then empty.
	Keycast json.RawMessage `json:"keycast,omitempty"`
	Args    []string        `json:"args,omitempty"`
	Segment result.Segment  `json:"segment"`
	StartAt time.Time       `json:"start_at"`
	// SampleServer says this worker samples the target's own counters each interval (one worker
	// does, so merged samples are not counted N times).
	SampleServer bool `json:"sample_server,omitempty"`
	// Barrier says the command holds at a hold barrier (LinkKeys connections): the worker serves a
	// local one for it and relays ready and release through the coordinator to the run's barrier.
	Barrier bool `json:"barrier,omitempty"`
}

// BarrierMsg relays a worker's hold barrier: ready with the connections held, or gone (the
// command left the barrier without being ready).
type BarrierMsg struct {
	Index int   `json:"index"`
	Task  int   `json:"task"`
	Held  int64 `json:"held"`
	Gone  bool  `json:"gone,omitempty"`
}

// TaskReply is the worker's answer to a task: accepted (it will start at StartAt) or refused.
type TaskReply struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

// Snapshot is a worker's report: an interval snapshot of a running task, or a heartbeat (Interval
// nil) while it is idle or between intervals.
type Snapshot struct {
	Index int `json:"index"`
	Task  int `json:"task"`
	// Seq numbers the task's intervals from 0; -1 on heartbeats.
	Seq      int           `json:"seq"`
	Interval *WireInterval `json:"interval,omitempty"`
	// State is "idle", "running" or "uploading".
	State string `json:"state"`
	// Refused counts the messages this worker refused, by reason (on heartbeats).
	Refused map[string]int64 `json:"refused,omitempty"`
}

// WireInterval is an interval snapshot as it travels: result.Interval with its histograms in the
// sparse exact form (hist.Buckets), a few KiB where the full HDR form would cost the coordinator a
// whole-range histogram per worker per second to decode.
type WireInterval struct {
	T        float64            `json:"t"`
	Secs     float64            `json:"secs"`
	Counts   map[string]int64   `json:"counts,omitempty"`
	Causes   map[string]int64   `json:"causes,omitempty"`
	Counters map[string]int64   `json:"counters,omitempty"`
	Gauges   map[string]int64   `json:"gauges,omitempty"`
	Server   map[string]float64 `json:"server,omitempty"`
	// Latency holds each kind's non-empty buckets as varint pairs (value delta in µs, count).
	Latency map[string][]byte `json:"latency,omitempty"`
}

// packBuckets writes buckets as uvarint pairs: the value's increase over the previous bucket's
// and the count. A second's histogram of a thousand samples packs into a few KiB.
func packBuckets(bs []hist.Bucket) []byte {
	out := make([]byte, 0, len(bs)*4)
	var prev int64
	for _, b := range bs {
		out = binary.AppendUvarint(out, uint64(b.Micros-prev))
		out = binary.AppendUvarint(out, uint64(b.Count))
		prev = b.Micros
	}
	return out
}

// unpackBuckets reads packBuckets' form; a malformed form yields the buckets before the damage.
func unpackBuckets(p []byte) []hist.Bucket {
	var out []hist.Bucket
	var v int64
	for len(p) > 0 {
		d, n := binary.Uvarint(p)
		if n <= 0 {
			break
		}
		c, m := binary.Uvarint(p[n:])
		if m <= 0 {
			break
		}
		p = p[n+m:]
		v += int64(d)
		out = append(out, hist.Bucket{Micros: v, Count: int64(c)})
	}
	return out
}

// ToWire converts an interval for sending.
func ToWire(iv *result.Interval) *WireInterval {
	w := &WireInterval{T: iv.T, Secs: iv.Secs, Counts: iv.Counts, Causes: iv.Causes, Counters: iv.Counters, Gauges: iv.Gauges, Server: iv.Server}
	if len(iv.Latency) > 0 {
		w.Latency = make(map[string][]byte, len(iv.Latency))
		for k, h := range iv.Latency {
			w.Latency[k] = packBuckets(h.Buckets())
		}
	}
	return w
}

// Total returns the number of operations in the interval.
func (w *WireInterval) Total() int64 {
	var n int64
	for _, v := range w.Counts {
		n += v
	}
	return n
}

// AddTo merges the interval into iv exactly (result.Interval.Add's rules).
func (w *WireInterval) AddTo(iv *result.Interval) {
	iv.Add(&result.Interval{Counts: w.Counts, Causes: w.Causes, Counters: w.Counters, Gauges: w.Gauges, Server: w.Server, Secs: w.Secs})
	for k, packed := range w.Latency {
		bs := unpackBuckets(packed)
		if len(bs) == 0 {
			continue
		}
		if iv.Latency == nil {
			iv.Latency = map[string]*hist.Histogram{}
		}
		h := iv.Latency[k]
		if h == nil {
			h = hist.New()
			iv.Latency[k] = h
		}
		h.AddBuckets(bs)
	}
}

// ResultMsg announces a finished task's result: in the object store under Object, or in chunks
// already sent. Err is set when the task could not run at all.
type ResultMsg struct {
	Index  int    `json:"index"`
	Task   int    `json:"task"`
	Object string `json:"object,omitempty"`
	Chunks int    `json:"chunks,omitempty"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
	Err    string `json:"err,omitempty"`
	// Refused counts the messages the worker refused so far, by reason.
	Refused map[string]int64 `json:"refused,omitempty"`
}

// Abort tells every worker to stop a task now (Task -1: everything, and leave).
type Abort struct {
	Task   int               `json:"task"`
	Reason string            `json:"reason"`
	Stop   *result.StopEvent `json:"stop,omitempty"`
}

// Bye tells a worker the session is over.
type Bye struct {
	Reason string `json:"reason,omitempty"`
}

// Envelope headers. Every control message carries them; the MAC covers the subject, each of
// signedHeaders (a steering header absent from a message is covered as empty) and the body, so no
// header that changes what a receiver does can be altered, and a message is bound to its run, its
// sender and its place in that sender's sequence.
const (
	hdrRun  = "Lp-Run"  // the run it belongs to (the nonce handed out in the join exchange)
	hdrFrom = "Lp-From" // the sender: "c" for the coordinator, "w<i>" for worker i, "j:<name>" for a joining worker
	hdrN    = "Lp-N"    // the sender's sequence number (strictly increasing per sender process)
	hdrT    = "Lp-T"    // the sender's clock, unix nanoseconds
	// Chunk headers: the worker, task, chunk number and the number of chunks announced.
	hdrIndex = "Lp-Index"
	hdrTask  = "Lp-Task"
	hdrSeq   = "Lp-Seq"
	hdrOf    = "Lp-Of"
)

var signedHeaders = []string{hdrRun, hdrFrom, hdrN, hdrT, hdrIndex, hdrTask, hdrSeq, hdrOf}

// Freshness limits.
const (
	// MaxClockSkew is how far a message's send time may lie from the receiver's clock. It bounds
	// the life of a captured message whose sequence number the receiver has not seen (a join); the
	// sequence window refuses every other replay.
	MaxClockSkew = 2 * time.Minute
	// replayWindow is how many sequence numbers below a sender's highest are still tracked: a
	// message reordered by more than that is refused as a replay.
	replayWindow = 4096
	// maxSenders bounds the senders a receiver tracks (a joining worker is one until it joins).
	maxSenders = 4096
)

// Refusal reasons a receiver counts (RefusalCounts).
const (
	RefusedSignature = "bad-signature"
	RefusedReplay    = "replay"
	RefusedStale     = "stale"
	RefusedWrongRun  = "wrong-run"
	RefusedSender    = "wrong-sender"
	RefusedChunk     = "chunk"
	RefusedJoin      = "join"
	RefusedTask      = "task"
	// RefusedDuplicate counts repeats of a result or chunk already kept: acknowledged, not taken
	// again (a worker's own resend after a slow acknowledgement, or a copy).
	RefusedDuplicate = "duplicate"
)

// refusalReasons are every reason a receiver counts: a worker's reported counts are taken only
// under these names.
var refusalReasons = []string{RefusedSignature, RefusedReplay, RefusedStale, RefusedWrongRun, RefusedSender,
	RefusedChunk, RefusedJoin, RefusedTask, RefusedDuplicate}

// cleanRefusals keeps a worker's reported refusal counts under the known reasons only, so a
// report cannot grow the coordinator's records.
func cleanRefusals(in map[string]int64) map[string]int64 {
	var out map[string]int64
	for _, r := range refusalReasons {
		if n := in[r]; n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[r] = n
		}
	}
	return out
}

var (
	// errBadSignature is returned for a message whose signature does not match.
	errBadSignature = errors.New("coord: message signature does not match the run secret; check --secret on coordinator and workers")
	errReplay       = errors.New("coord: message replayed (its sequence number was seen or is too old)")
	errStale        = errors.New("coord: message sent outside the time window; check the machines' clocks")
	errWrongRun     = errors.New("coord: message of another run")
)

// seqWindow is one sender's anti-replay window (the IPsec scheme): the highest sequence number
// seen and a bitmap of the replayWindow numbers below it.
type seqWindow struct {
	top  uint64
	bits [replayWindow / 64]uint64
}

// accept reports whether n is new, and records it.
func (w *seqWindow) accept(n uint64) bool {
	switch {
	case n == 0:
		return false
	case n > w.top:
		shift := n - w.top
		if shift >= replayWindow {
			w.bits = [replayWindow / 64]uint64{}
		} else {
			for i := uint64(0); i < shift; i++ { // clear the numbers the window moves past
				k := (w.top + 1 + i) % replayWindow
				w.bits[k/64] &^= 1 << (k % 64)
			}
		}
		w.top = n
	case w.top-n >= replayWindow:
		return false
	}
	k := n % replayWindow
	if w.bits[k/64]&(1<<(k%64)) != 0 {
		return false
	}
	w.bits[k/64] |= 1 << (k % 64)
	return true
}

// signer seals and opens the messages of one party (coordinator or worker) with the run secret.
// Sealing stamps run, sender, sequence number and time; opening checks the MAC (when there is a
// secret), the run, the time window and the sender's sequence window, and counts each refusal. An
// empty secret (--insecure-unsigned) still stamps and checks freshness, but anyone on the NATS
// server can forge messages.
type signer struct {
	key  []byte
	from string
	// only, when set, is the one sender this party takes messages from (a worker: "c").
	only string
	n    atomic.Uint64

	mu      sync.Mutex
	run     string
	seen    map[string]*seqWindow
	refused map[string]int64
}

func newSigner(secret, from string) *signer {
	s := &signer{key: []byte(secret), from: from, seen: map[string]*seqWindow{}, refused: map[string]int64{}}
	// Sequence numbers start at the clock, so a restarted sender continues above its old numbers.
	s.n.Store(uint64(time.Now().UnixNano()))
	return s
}

// bind sets the run (and this party's sender name) once the join exchange told it.
func (s *signer) bind(run, from string) {
	s.mu.Lock()
	s.run = run
	if from != "" {
		s.from = from
	}
	s.mu.Unlock()
}

func (s *signer) current() (run, from string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.from
}

func (s *signer) mac(subject string, h nats.Header, data []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(subject))
	m.Write([]byte{'\n'})
	for _, k := range signedHeaders {
		m.Write([]byte(k))
		m.Write([]byte{':'})
		if h != nil {
			m.Write([]byte(h.Get(k)))
		}
		m.Write([]byte{'\n'})
	}
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// msg builds a sealed message of v on subject.
func (s *signer) msg(subject string, v any) (*nats.Msg, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("coord: encoding %T: %w", v, err)
	}
	return s.raw(subject, b, nil), nil
}

// raw seals b on subject with the extra steering headers (chunk headers), which the MAC covers.
func (s *signer) raw(subject string, b []byte, extra map[string]string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = b
	run, from := s.current()
	m.Header.Set(hdrRun, run)
	m.Header.Set(hdrFrom, from)
	m.Header.Set(hdrN, strconv.FormatUint(s.n.Add(1), 10))
	m.Header.Set(hdrT, strconv.FormatInt(time.Now().UnixNano(), 10))
	for k, v := range extra {
		m.Header.Set(k, v)
	}
	if len(s.key) > 0 {
		m.Header.Set(sigHeader, s.mac(subject, m.Header, b))
	}
	return m
}

// open checks m and decodes it into v.
func (s *signer) open(m *nats.Msg, v any) error {
	if err := s.check(m); err != nil {
		return err
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fmt.Errorf("coord: decoding %T on %s: %w", v, m.Subject, err)
	}
	return nil
}

// check authenticates m and checks it is fresh: of this party's run (any run before it joined),
// inside the time window, and new in its sender's sequence.
func (s *signer) check(m *nats.Msg) error { return s.checkRun(m, true) }

// openJoin is open for a join, which names its run in the body (JoinMsg.Run) since the worker
// learns the run only in the exchange.
func (s *signer) openJoin(m *nats.Msg, j *JoinMsg) error {
	if err := s.checkRun(m, false); err != nil {
		return err
	}
	if err := json.Unmarshal(m.Data, j); err != nil {
		return fmt.Errorf("coord: decoding a join: %w", err)
	}
	return nil
}

func (s *signer) checkRun(m *nats.Msg, bound bool) error {
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	if len(s.key) > 0 && !hmac.Equal([]byte(h.Get(sigHeader)), []byte(s.mac(m.Subject, h, m.Data))) {
		return s.refuse(RefusedSignature, errBadSignature)
	}
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if bound && run != "" && h.Get(hdrRun) != run {
		return s.refuse(RefusedWrongRun, errWrongRun)
	}
	t, err := strconv.ParseInt(h.Get(hdrT), 10, 64)
	if d := time.Since(time.Unix(0, t)); err != nil || d > MaxClockSkew || d < -MaxClockSkew {
		return s.refuse(RefusedStale, errStale)
	}
	n, err := strconv.ParseUint(h.Get(hdrN), 10, 64)
	from := h.Get(hdrFrom)
	if err != nil || from == "" {
		return s.refuse(RefusedReplay, errReplay)
	}
	if s.only != "" && from != s.only {
		return s.refuse(RefusedSender, fmt.Errorf("coord: message from %q where only %q sends", from, s.only))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	win := s.seen[from]
	if win == nil {
		if len(s.seen) >= maxSenders {
			s.refused[RefusedSender]++
			return fmt.Errorf("coord: too many senders (%d) on this run's subjects", maxSenders)
		}
		win = &seqWindow{}
		s.seen[from] = win
	}
	if !win.accept(n) {
		s.refused[RefusedReplay]++
		return errReplay
	}
	return nil
}

func (s *signer) refuse(reason string, err error) error {
	s.count(reason)
	return err
}

// count records one refused message.
func (s *signer) count(reason string) {
	s.mu.Lock()
	s.refused[reason]++
	s.mu.Unlock()
}

// refusals returns the counts of refused messages by reason.
func (s *signer) refusals() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.refused))
	for k, v := range s.refused {
		out[k] = v
	}
	return out
}

// sender reports m's sender header.
func sender(m *nats.Msg) string {
	if m.Header == nil {
		return ""
	}
	return m.Header.Get(hdrFrom)
}

// reply answers a request with a sealed message.
func (s *signer) reply(nc *nats.Conn, req *nats.Msg, v any) error {
	if req.Reply == "" {
		return nil
	}
	m, err := s.msg(req.Reply, v)
	if err != nil {
		return err
	}
	return nc.PublishMsg(m)
}
