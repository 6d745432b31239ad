package coord

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
}

// JoinReply is the coordinator's answer.
type JoinReply struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Run      string `json:"run,omitempty"`
	Index    int    `json:"index"`
	Workers  int    `json:"workers"`
	// Bucket is the JetStream object store bucket for results; empty means chunks.
	Bucket string `json:"bucket,omitempty"`
}

// PingReply carries the worker's clock at the moment it answered a ping.
type PingReply struct {
	UnixNano int64 `json:"unix_nano"`
}

// Task is one load run for one worker: the client command (loadproof tree, without the binary's
// name), the worker's segment and the start instant in the worker's own clock.
type Task struct {
	ID      int            `json:"id"`
	Args    []string       `json:"args"`
	Segment result.Segment `json:"segment"`
	StartAt time.Time      `json:"start_at"`
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
	w := &WireInterval{T: iv.T, Secs: iv.Secs, Counts: iv.Counts, Causes: iv.Causes, Counters: iv.Counters, Server: iv.Server}
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
	iv.Add(&result.Interval{Counts: w.Counts, Causes: w.Causes, Counters: w.Counters, Server: w.Server, Secs: w.Secs})
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

// signer signs and checks messages with the run secret (HMAC-SHA256 over subject and body). An empty
// secret signs nothing and accepts everything: the NATS server's own authentication is then the
// only guard.
type signer struct{ key []byte }

// errBadSignature is returned for a message whose signature does not match.
var errBadSignature = errors.New("coord: message signature does not match the run secret; check --secret on coordinator and workers")

func (s signer) mac(subject string, data []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(subject))
	m.Write([]byte{'\n'})
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// msg builds a signed message of v on subject.
func (s signer) msg(subject string, v any) (*nats.Msg, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("coord: encoding %T: %w", v, err)
	}
	return s.raw(subject, b), nil
}

func (s signer) raw(subject string, b []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = b
	if len(s.key) > 0 {
		m.Header.Set(sigHeader, s.mac(subject, b))
	}
	return m
}

// open checks m's signature and decodes it into v.
func (s signer) open(m *nats.Msg, v any) error {
	if err := s.check(m); err != nil {
		return err
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fmt.Errorf("coord: decoding %T on %s: %w", v, m.Subject, err)
	}
	return nil
}

func (s signer) check(m *nats.Msg) error {
	if len(s.key) == 0 {
		return nil
	}
	got := ""
	if m.Header != nil {
		got = m.Header.Get(sigHeader)
	}
	if !hmac.Equal([]byte(got), []byte(s.mac(m.Subject, m.Data))) {
		return errBadSignature
	}
	return nil
}

// reply answers a request with a signed message.
func (s signer) reply(nc *nats.Conn, req *nats.Msg, v any) error {
	if req.Reply == "" {
		return nil
	}
	m, err := s.msg(req.Reply, v)
	if err != nil {
		return err
	}
	return nc.PublishMsg(m)
}
