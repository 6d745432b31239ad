package coord

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

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
	Seq      int              `json:"seq"`
	Interval *result.Interval `json:"interval,omitempty"`
	// State is "idle", "running" or "uploading".
	State string `json:"state"`
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
