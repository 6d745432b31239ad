package linkkeysresult

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Harness is the envelope's harness name of every LinkKeys result.
const Harness = "linkkeys"

// Command names, as in the seed.
const (
	CmdConnections    = "connections"
	CmdHandshakeBench = "handshake-bench"
	CmdRequestBench   = "request-bench"
	CmdDDoS           = "ddos"
)

// The outcome classes of one connection attempt: success and the seed's three failure labels, in
// the engine's order (class 0 is success). The detailed reasons ("class:DETAIL") are the envelope's
// causes.
const (
	ClassConnect = "tcp_connect_error"
	ClassTLS     = "tls_handshake_error_or_server_reject"
	ClassTimeout = "attempt_timeout"
)

// AttemptClasses lists the attempt classes in the engine's order.
var AttemptClasses = []string{result.ClassSuccess, ClassConnect, ClassTLS, ClassTimeout}

// The outcome classes of one request (request-bench): answered with status 0, answered with another
// status (the cause is CauseStatus plus the status name), an answer that did not decode, and an I/O
// error, which also ends that connection and counts once for it, as the seed counts it.
const (
	ClassStatus = "error_status"
	ClassDecode = "decode_error"
	ClassIO     = "io_error"
	// CauseStatus prefixes the cause of a ClassStatus outcome: "status:Unavailable".
	CauseStatus = "status:"
)

// RequestClasses lists the request classes in the engine's order.
var RequestClasses = []string{result.ClassSuccess, ClassStatus, ClassDecode, ClassIO}

// Latency kinds (the envelope's histograms and the intervals' latency).
const (
	// KindConnectHandshake is connect plus TLS handshake of a successful attempt.
	KindConnectHandshake = "connect_handshake"
	// KindAttempt is every attempt, failed ones included, from start to outcome.
	KindAttempt = "attempt"
	// KindResumed is KindConnectHandshake of resumed handshakes only (handshake-bench --resume).
	KindResumed = "resumed"
	// KindRequest is one request: from its send in the closed model, from its intended send time
	// in the open model (corrected for coordinated omission).
	KindRequest = "request"
	// KindUncorrected is the open model's request latency from the actual send.
	KindUncorrected = "uncorrected"
)

// Target is the server a client talks to: the address from the info file (always 127.0.0.1:port for
// the seed's server) and the TLS identity to pin.
type Target struct {
	Addr        netip.AddrPort `json:"addr"`
	Domain      string         `json:"domain"`
	Fingerprint string         `json:"fingerprint"`
	// PID is the server's process id from the info file; the clients read its CPU time from /proc.
	PID uint32 `json:"pid,omitempty"`
}

// Result is the machine-readable outcome of one client command (or one worker's segment of it): the
// shared envelope at the top level of the file, and the LinkKeys sections beside it. The sections
// that do not apply to a command are nil. Merge combines worker results exactly.
type Result struct {
	result.Envelope
	// TargetInfo is the server as the info file described it (the envelope's Target is its address).
	TargetInfo Target `json:"target_info"`
	// Elapsed is the run's wall time, with its Rust rendering (the DONE lines print it).
	Elapsed Duration `json:"elapsed"`

	// Attempts counts connection attempts: connections, ddos and handshake-bench count every
	// attempt; request-bench counts its setup connections.
	Attempts *Attempts `json:"attempts,omitempty"`
	// Hold is the connections command's held-connection and client-memory figures.
	Hold *Hold `json:"hold,omitempty"`
	// Handshakes is handshake-bench's figures.
	Handshakes *Handshakes `json:"handshakes,omitempty"`
	// Requests is request-bench's figures.
	Requests *Requests `json:"requests,omitempty"`
	// Server is the server's own accounting over the run, when its METRICS were reachable.
	Server *ServerAccounting `json:"server,omitempty"`
	// Stop says why the run ended before its bound (a signal), when it did.
	Stop *result.StopEvent `json:"stop,omitempty"`
	// ClientCPU is the CPU time (user plus system) the client processes used, summed over workers.
	ClientCPU Duration `json:"client_cpu"`
	// CPUPer divides ClientCPU and ServerCPU by the run's attempts and by its successes (derived;
	// absent when no CPU was measured).
	CPUPer *CPUPer `json:"cpu_per,omitempty"`
	// ServerCPU is the CPU time the server process (and its child processes) used during the run,
	// read from /proc through the info file's pid; absent when it could not be read.
	ServerCPU *Duration `json:"server_cpu,omitempty"`
	// Combined is the combined command's streams (each with its own counts and histograms), the
	// held population's survival and the per-stream server accounting. For a combined result the
	// envelope's classes, causes, kinds and interval figures are prefixed with the stream's name
	// ("held/success"), Attempts sums every stream's connection attempts and Server is the
	// server's accounting of them all.
	Combined *Combined `json:"combined,omitempty"`
	// Refused is what the server refused by design, by reason (Refusals; derived): never counted
	// as failures or throughput in our summaries.
	Refused map[string]int64 `json:"refused,omitempty"`
}

// Duration is a time.Duration that marshals as nanoseconds plus Rust's Debug rendering.
type Duration time.Duration

type durationJSON struct {
	Nanos int64  `json:"ns"`
	Text  string `json:"text"`
}

// MarshalJSON writes {"ns":…, "text":"1.27s"}.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(durationJSON{int64(d), FormatRustDuration(time.Duration(d))})
}

// UnmarshalJSON reads the form MarshalJSON writes; ns is authoritative.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var j durationJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return errorf("reading duration: %w", err)
	}
	if j.Nanos < 0 {
		return errorf("reading duration: negative ns %d", j.Nanos)
	}
	*d = Duration(j.Nanos)
	return nil
}

// Attempts counts connection attempts and why they failed.
type Attempts struct {
	Attempted int64 `json:"attempted"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// Classes counts failures by the seed's three labels.
	Classes map[string]int64 `json:"failure_classes"`
	// Reasons counts failures by detailed reason ("class:DETAIL").
	Reasons map[string]int64 `json:"failure_reasons"`
	// Latency is connect plus TLS handshake time of the successful attempts.
	Latency *hist.Histogram `json:"connect_handshake_latency"`
}

// NewAttempts returns empty counts.
func NewAttempts() *Attempts {
	return &Attempts{Classes: map[string]int64{}, Reasons: map[string]int64{}, Latency: hist.New()}
}

// Add counts one finished attempt: class "" (or result.ClassSuccess) is a success taking took;
// otherwise class is the failure label and reason the detailed reason.
func (a *Attempts) Add(class, reason string, took time.Duration) {
	a.Attempted++
	if class == "" || class == result.ClassSuccess {
		a.Succeeded++
		a.Latency.Record(took)
		return
	}
	a.Failed++
	a.Classes[class]++
	a.Reasons[reason]++
}

// AttemptsOf reads the attempt counts of a run whose operations were connection attempts from its
// envelope: totals by AttemptClasses, causes as reasons, KindConnectHandshake as latency.
func AttemptsOf(e *result.Envelope) *Attempts {
	a := NewAttempts()
	for class, n := range e.Totals {
		a.Attempted += n
		if class == result.ClassSuccess {
			a.Succeeded += n
		} else if n != 0 {
			a.Failed += n
			a.Classes[class] += n
		}
	}
	maps.Copy(a.Reasons, e.Causes)
	a.Latency.Merge(e.Histograms[KindConnectHandshake])
	return a
}

func (a *Attempts) merge(o *Attempts) {
	a.Attempted += o.Attempted
	a.Succeeded += o.Succeeded
	a.Failed += o.Failed
	addCounts(a.Classes, o.Classes)
	addCounts(a.Reasons, o.Reasons)
	a.Latency.Merge(o.Latency)
}

// CPUPer is the CPU of a run per operation, both ways: per attempt (every connection attempt, or
// every request sent, failures included) and per success (an established connection, a completed
// handshake, a request answered with status 0). On a run with many failures the two differ, and the
// per-success figure alone would charge the failures' CPU to the successes.
type CPUPer struct {
	Attempts  int64 `json:"attempts"`
	Successes int64 `json:"successes"`
	// SuccessUnit names a success in the text report ("established connection", "handshake", …).
	SuccessUnit      string    `json:"success_unit"`
	ClientPerAttempt *Duration `json:"client_per_attempt,omitempty"`
	ClientPerSuccess *Duration `json:"client_per_success,omitempty"`
	ServerPerAttempt *Duration `json:"server_per_attempt,omitempty"`
	ServerPerSuccess *Duration `json:"server_per_success,omitempty"`
}

// CPUPerOp computes r's CPUPer from its counts (what Finish stores in CPUPer); nil when no CPU was
// measured. A figure over zero operations is nil.
func (r *Result) CPUPerOp() *CPUPer {
	if r.ClientCPU <= 0 {
		return nil
	}
	c := &CPUPer{}
	switch {
	case r.Requests != nil:
		c.Attempts, c.Successes, c.SuccessUnit = r.Requests.Sent, r.Requests.Completed, "request completed"
	case r.Handshakes != nil:
		c.Attempts, c.Successes, c.SuccessUnit = r.Handshakes.Completed+r.Handshakes.Failed, r.Handshakes.Completed, "handshake"
	case r.Attempts != nil:
		c.Attempts, c.Successes, c.SuccessUnit = r.Attempts.Attempted, r.Attempts.Succeeded, "established connection"
		if r.Command == CmdDDoS {
			c.SuccessUnit = "allowed connection"
		}
	default:
		return nil
	}
	per := func(d Duration, n int64) *Duration {
		if n <= 0 {
			return nil
		}
		v := d / Duration(n)
		return &v
	}
	c.ClientPerAttempt, c.ClientPerSuccess = per(r.ClientCPU, c.Attempts), per(r.ClientCPU, c.Successes)
	if r.ServerCPU != nil {
		c.ServerPerAttempt, c.ServerPerSuccess = per(*r.ServerCPU, c.Attempts), per(*r.ServerCPU, c.Successes)
	}
	return c
}

// Hold describes the connections held at once and what they cost the client.
type Hold struct {
	HoldSecs uint64 `json:"hold_secs"`
	// Held is the number of connections open when the hold started (all workers ready).
	Held int64 `json:"held"`
	// StillOpen is how many of them were still established (TCP state) when the hold ended; the
	// rest were closed by the server while held.
	StillOpen int64 `json:"still_open_at_end"`
	// RampTime is from the start to the moment the last worker finished its attempts.
	RampTime Duration `json:"ramp_time"`
	// RSSBaseline and RSSHeld are the client processes' resident set sizes summed over workers:
	// before the first attempt, and while every connection is held (after a GC).
	RSSBaseline uint64 `json:"client_rss_baseline_bytes"`
	RSSHeld     uint64 `json:"client_rss_held_bytes"`
	// RSSBaselineSplit and RSSHeldSplit split the same two figures by kind (anonymous,
	// file-backed, shared memory), summed over workers; nil where a worker could not read them
	// (off Linux) and in files written before the split.
	RSSBaselineSplit *machine.RSS `json:"client_rss_baseline_split,omitempty"`
	RSSHeldSplit     *machine.RSS `json:"client_rss_held_split,omitempty"`
	// BytesPerConn is (RSSHeld - RSSBaseline) / Held.
	BytesPerConn float64 `json:"client_rss_bytes_per_connection"`
	// Start is when the hold began: when every worker was ready.
	Start time.Time `json:"start,omitzero"`
	// Lasted is how long the hold really lasted: HoldSecs, or less when every held connection
	// ended before (or the run was interrupted).
	Lasted Duration `json:"lasted"`
	// Loss describes the held connections that ended before the hold did; nil when none did (the
	// hold was held).
	Loss *HoldLoss `json:"loss,omitempty"`
}

// The reasons of HoldLoss, by what the client saw as a held connection ended.
const (
	// LossClosed: a FIN; the server closed the connection, or its process exited.
	LossClosed = "closed_by_server"
	// LossReset: an RST or another socket error.
	LossReset = "reset"
	// LossUnknown: found only by the count at the end of the hold.
	LossUnknown = "unknown"
)

// HoldLoss describes the held connections that ended during the hold.
type HoldLoss struct {
	// Lost is how many: Held - StillOpen.
	Lost int64 `json:"lost"`
	// Reasons counts them by what the client saw as they ended: LossClosed, LossReset, LossUnknown.
	Reasons map[string]int64 `json:"reasons"`
	// First and Last are when the first and the last were seen to end (zero when not seen).
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// ServerGone is set when the server process (the info file's pid) was no longer running at the
	// end of the hold.
	ServerGone bool `json:"server_gone,omitempty"`
}

// Add records one connection seen to end at t, for reason.
func (l *HoldLoss) Add(reason string, t time.Time) {
	if l.Reasons == nil {
		l.Reasons = map[string]int64{}
	}
	l.Reasons[reason]++
	if l.First.IsZero() || t.Before(l.First) {
		l.First = t
	}
	if t.After(l.Last) {
		l.Last = t
	}
}

// merge adds another process's losses.
func (l *HoldLoss) merge(o *HoldLoss) {
	l.Lost += o.Lost
	if l.Reasons == nil {
		l.Reasons = map[string]int64{}
	}
	addCounts(l.Reasons, o.Reasons)
	if !o.First.IsZero() && (l.First.IsZero() || o.First.Before(l.First)) {
		l.First = o.First
	}
	if o.Last.After(l.Last) {
		l.Last = o.Last
	}
	l.ServerGone = l.ServerGone || o.ServerGone
}

// Handshakes holds handshake-bench's figures.
type Handshakes struct {
	DurationSecs uint64 `json:"duration_secs"`
	Concurrency  int64  `json:"concurrency"`
	Resume       bool   `json:"resume"`
	Completed    int64  `json:"completed"`
	Failed       int64  `json:"failed"`
	// Full and Resumed split Completed by ConnectionState().DidResume.
	Full    int64 `json:"full"`
	Resumed int64 `json:"resumed"`
	// Rates divide by DurationSecs, as the seed does (the configured duration, not the measured one).
	Rate        float64 `json:"handshakes_per_sec"`
	FullRate    float64 `json:"full_per_sec"`
	ResumedRate float64 `json:"resumed_per_sec"`
	// ResumedLatency is the connect plus handshake time of resumed handshakes only (Attempts.Latency
	// holds all of them).
	ResumedLatency *hist.Histogram `json:"resumed_latency"`
}

// Requests holds request-bench's figures.
type Requests struct {
	Op           string  `json:"op"`
	Connections  int64   `json:"connections"`
	DurationSecs uint64  `json:"duration_secs"`
	Pipeline     int64   `json:"pipeline"`
	TargetRate   float64 `json:"target_rate,omitempty"` // open model only
	// Sent counts requests written to a connection.
	Sent      int64 `json:"sent"`
	Completed int64 `json:"completed"`
	// Errors counts every request that did not complete with status 0: non-zero statuses, responses
	// that did not decode, and I/O errors (which also stop that connection), as the seed does.
	Errors       int64            `json:"errors"`
	IOErrors     int64            `json:"io_errors"`
	DecodeErrors int64            `json:"decode_errors"`
	Statuses     map[string]int64 `json:"statuses"`
	Rate         float64          `json:"requests_per_sec"`
	// Latency is per request; in the open model it is measured from the intended send time
	// (corrected for coordinated omission), in the closed model from the actual send.
	Latency *hist.Histogram `json:"latency"`
	// Uncorrected is the open model's latency from the actual send time.
	Uncorrected *hist.Histogram `json:"uncorrected_latency,omitempty"`
	// LateSends counts open-model requests sent more than LateThreshold after their intended time.
	LateSends     int64    `json:"late_sends"`
	LateThreshold Duration `json:"late_threshold"`
	// Unsent counts open-model requests that were due before the end but never sent because every
	// connection was busy or had failed.
	Unsent int64 `json:"unsent"`
}

// Statuses returns the non-zero statuses of a request-bench envelope's causes, by status name.
func Statuses(causes map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range causes {
		if name, ok := strings.CutPrefix(k, CauseStatus); ok {
			out[name] += v
		}
	}
	return out
}

// ServerAccounting is the server's own view of a run: its counters before and after, the deltas,
// and the checks of the client's counts against them.
type ServerAccounting struct {
	Source string               `json:"source"`
	Before linkkeys.MetricsLine `json:"before"`
	After  linkkeys.MetricsLine `json:"after"`
	Delta  Deltas               `json:"delta"`
	Checks []Check              `json:"checks"`
	// Settled is false when no reading without handshakes in progress arrived after the run, so the
	// after reading may miss the last attempts.
	Settled bool `json:"settled"`
	// Note explains a reading that could not be taken or a check that could not be made.
	Note string `json:"note,omitempty"`
}

// Deltas are the server counters' changes over the run.
type Deltas struct {
	Accepted            int64 `json:"accepted_connections"`
	Admitted            int64 `json:"admitted"`
	HandshakesCompleted int64 `json:"handshakes_completed"`
	HasCompleted        bool  `json:"has_handshakes_completed"`
	HandshakeRejections int64 `json:"handshake_rejections"`
	HandshakeTimeouts   int64 `json:"handshake_timeouts"`
	ShedConnectionLimit int64 `json:"shed_connection_limit"`
	ShedPerSource       int64 `json:"shed_handshake_per_source"`
	ShedOverflow        int64 `json:"shed_handshake_overflow"`
	ShedGlobal          int64 `json:"shed_handshake_global"`
}

// Shed is the sum of every shed counter.
func (d Deltas) Shed() int64 {
	return d.ShedConnectionLimit + d.ShedPerSource + d.ShedOverflow + d.ShedGlobal
}

// Check compares one client count with the server's.
type Check struct {
	Name   string `json:"name"`
	Client int64  `json:"client"`
	Server int64  `json:"server"`
	OK     bool   `json:"ok"`
}

// Mismatch reports whether any check failed.
func (a *ServerAccounting) Mismatch() bool {
	for _, c := range a.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// Merge combines the results of the segments of one run. The envelopes merge through
// result.Envelope.Merge (counts add, histograms and intervals merge exactly, machine records and
// segments are listed, the run spans the earliest start to the latest end); the sections add their
// counts and merge their histograms; derived figures (rates, bytes per connection) are recomputed
// from the totals. Parts are taken in segment order, so the outcome does not depend on the order they
// are given in. Target information, the server's accounting and the stop event come from the first
// part that has them. Every part must be of the same command.
func Merge(parts []Result) (Result, error) {
	if len(parts) == 0 {
		return Result{}, errorf("merging results: no parts")
	}
	ordered := slices.Clone(parts)
	slices.SortStableFunc(ordered, func(a, b Result) int { return cmp.Compare(firstSegment(a), firstSegment(b)) })
	var out Result
	for i := range ordered {
		p := ordered[i]
		p.Format, p.Harness = result.Format, Harness
		if err := out.Envelope.Merge(&p.Envelope); err != nil {
			return Result{}, errorf("merging results: %w", err)
		}
		if i == 0 {
			out.TargetInfo = p.TargetInfo
		}
		out.ClientCPU += p.ClientCPU
		if out.ServerCPU == nil && p.ServerCPU != nil {
			v := *p.ServerCPU
			out.ServerCPU = &v
		}
		if out.Server == nil && p.Server != nil {
			s := *p.Server
			s.Checks = slices.Clone(p.Server.Checks)
			out.Server = &s
		}
		if out.Stop == nil && p.Stop != nil {
			s := *p.Stop
			out.Stop = &s
		}
		out.mergeSections(&p)
		if p.Combined != nil {
			if out.Combined == nil {
				out.Combined = &Combined{}
			}
			if err := out.Combined.merge(p.Combined); err != nil {
				return Result{}, errorf("merging results: %w", err)
			}
		}
	}
	slices.SortStableFunc(out.Segments, func(a, b result.Segment) int { return a.Index - b.Index })
	out.Finish()
	return out, nil
}

// sumRSS adds one segment's RSS split to the sum so far: the segment's own on the first, nil once
// any segment lacks it (a sum of some workers would read as the whole).
func sumRSS(first bool, sum, o *machine.RSS) *machine.RSS {
	if o == nil || (!first && sum == nil) {
		return nil
	}
	t := *o
	if !first {
		t.Total += sum.Total
		t.Anon += sum.Anon
		t.File += sum.File
		t.Shmem += sum.Shmem
	}
	return &t
}

func firstSegment(r Result) int {
	if len(r.Segments) == 0 {
		return 0
	}
	return r.Segments[0].Index
}

func (r *Result) mergeSections(p *Result) {
	if p.Attempts != nil {
		if r.Attempts == nil {
			r.Attempts = NewAttempts()
		}
		r.Attempts.merge(p.Attempts)
	}
	if o := p.Hold; o != nil {
		first := r.Hold == nil
		if first {
			r.Hold = &Hold{HoldSecs: o.HoldSecs}
		}
		h := r.Hold
		h.RSSBaselineSplit = sumRSS(first, h.RSSBaselineSplit, o.RSSBaselineSplit)
		h.RSSHeldSplit = sumRSS(first, h.RSSHeldSplit, o.RSSHeldSplit)
		h.Held += o.Held
		h.StillOpen += o.StillOpen
		h.RampTime = max(h.RampTime, o.RampTime)
		h.RSSBaseline += o.RSSBaseline
		h.RSSHeld += o.RSSHeld
		h.Lasted = max(h.Lasted, o.Lasted)
		if !o.Start.IsZero() && (h.Start.IsZero() || o.Start.Before(h.Start)) {
			h.Start = o.Start
		}
		if o.Loss != nil {
			if h.Loss == nil {
				h.Loss = &HoldLoss{}
			}
			h.Loss.merge(o.Loss)
		}
	}
	if o := p.Handshakes; o != nil {
		if r.Handshakes == nil {
			r.Handshakes = &Handshakes{DurationSecs: o.DurationSecs, Resume: o.Resume, ResumedLatency: hist.New()}
		}
		h := r.Handshakes
		h.Concurrency += o.Concurrency
		h.Completed += o.Completed
		h.Failed += o.Failed
		h.Full += o.Full
		h.Resumed += o.Resumed
		h.ResumedLatency.Merge(o.ResumedLatency)
	}
	if o := p.Requests; o != nil {
		if r.Requests == nil {
			r.Requests = &Requests{Op: o.Op, DurationSecs: o.DurationSecs, Pipeline: o.Pipeline,
				LateThreshold: o.LateThreshold, Statuses: map[string]int64{}, Latency: hist.New()}
		}
		q := r.Requests
		q.Connections += o.Connections
		q.TargetRate += o.TargetRate
		q.Sent += o.Sent
		q.Completed += o.Completed
		q.Errors += o.Errors
		q.IOErrors += o.IOErrors
		q.DecodeErrors += o.DecodeErrors
		addCounts(q.Statuses, o.Statuses)
		q.Latency.Merge(o.Latency)
		if o.Uncorrected != nil {
			if q.Uncorrected == nil {
				q.Uncorrected = hist.New()
			}
			q.Uncorrected.Merge(o.Uncorrected)
		}
		q.LateSends += o.LateSends
		q.Unsent += o.Unsent
	}
}

// Finish stamps the format and harness and recomputes the derived figures from the counts.
func (r *Result) Finish() {
	r.Format, r.Harness = result.Format, Harness
	if !r.StartedAt.IsZero() && r.EndedAt.After(r.StartedAt) {
		r.Elapsed = Duration(r.EndedAt.Sub(r.StartedAt))
	}
	if h := r.Hold; h != nil {
		h.BytesPerConn = 0
		if h.Held > 0 && h.RSSHeld >= h.RSSBaseline {
			h.BytesPerConn = float64(h.RSSHeld-h.RSSBaseline) / float64(h.Held)
		}
	}
	if h := r.Handshakes; h != nil {
		h.Rate = RustRate(h.Completed, h.DurationSecs)
		h.FullRate = RustRate(h.Full, h.DurationSecs)
		h.ResumedRate = RustRate(h.Resumed, h.DurationSecs)
	}
	if q := r.Requests; q != nil {
		q.Rate = RustRate(q.Completed, q.DurationSecs)
	}
	r.CPUPer = r.CPUPerOp()
	r.Refused = r.Refusals()
	if c := r.Combined; c != nil {
		c.finish()
	}
}

// MarshalJSON writes the result with its derived figures; NaN and infinite rates (a zero duration)
// are written as 0.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	c := r
	// Finish writes into the sections; work on copies so marshalling never changes r.
	if c.Hold != nil {
		h := *c.Hold
		c.Hold = &h
	}
	if c.Handshakes != nil {
		h := *c.Handshakes
		c.Handshakes = &h
	}
	if c.Requests != nil {
		q := *c.Requests
		c.Requests = &q
	}
	// Finish would finish the streams' results in place, and they are shared with r: the combined
	// section is finished on a copy here, and each stream's Result finishes a copy of itself when
	// it is marshalled.
	var combined *Combined
	if c.Combined != nil {
		cc := *c.Combined
		cc.Streams = slices.Clone(cc.Streams)
		for i := range cc.Streams {
			if s := cc.Streams[i].Survival.clone(); s != nil {
				s.finish()
				cc.Streams[i].Survival = s
			}
		}
		slices.SortStableFunc(cc.Streams, func(a, b Stream) int { return streamOrder(a.Name) - streamOrder(b.Name) })
		combined, c.Combined = &cc, nil
	}
	c.Finish()
	c.Combined = combined
	if h := c.Handshakes; h != nil {
		h.Rate, h.FullRate, h.ResumedRate = finite(h.Rate), finite(h.FullRate), finite(h.ResumedRate)
	}
	if q := c.Requests; q != nil {
		q.Rate = finite(q.Rate)
	}
	return json.Marshal(plain(c))
}

func finite(f float64) float64 {
	if f != f || f > 1e308 || f < -1e308 {
		return 0
	}
	return f
}

// Write writes r to path (indented, atomically).
func (r Result) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return errorf("encoding result: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return errorf("writing result file %s: %w", path, err)
	}
	return nil
}

// formatV1 is the format of the LinkKeys result files written before the shared envelope.
const formatV1 = "loadproof.linkkeys.result/v1"

// Read reads a result file written by Write (or a worker).
func Read(b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, errorf("reading result: %w", err)
	}
	switch {
	case r.Format == formatV1:
		return Result{}, errorf("reading result: format %q was written by an older loadproof, before the shared result envelope; rerun the command to get a %q file", r.Format, result.Format)
	case r.Format != result.Format:
		return Result{}, errorf("reading result: format %q, want %q", r.Format, result.Format)
	case r.Harness != Harness:
		return Result{}, errorf("reading result: harness %q, want %q", r.Harness, Harness)
	}
	switch r.Command {
	case CmdConnections, CmdHandshakeBench, CmdRequestBench, CmdDDoS:
	case CmdCombined:
		if r.Combined == nil {
			return Result{}, errorf("reading result: a combined result without its combined section")
		}
		for i, s := range r.Combined.Streams {
			if s.Name == "" || s.Result == nil {
				return Result{}, errorf("reading result: combined stream %d has no name or no result", i)
			}
		}
	default:
		return Result{}, errorf("reading result: unknown command %q", r.Command)
	}
	if err := r.Validate(); err != nil {
		return Result{}, errorf("reading result: %w", err)
	}
	if err := r.CheckCost(r.CostCapacity()); err != nil {
		return Result{}, errorf("reading result: %w", err)
	}
	return r, nil
}

// String summarises the result in one line, for logs.
func (r Result) String() string {
	if a := r.Attempts; a != nil {
		return fmt.Sprintf("%s: attempted=%d succeeded=%d failed=%d", r.Command, a.Attempted, a.Succeeded, a.Failed)
	}
	return r.Command
}

// Params are the command-line figures the seed's header and DONE lines print. The clients fill them
// from their configuration; a report reads them back from the flags a result recorded.
type Params struct {
	Count        uint32 `json:"count,omitempty"`
	Concurrency  uint32 `json:"concurrency,omitempty"`
	Connections  uint32 `json:"connections,omitempty"`
	Sources      uint32 `json:"sources,omitempty"`
	HoldSecs     uint64 `json:"hold_secs,omitempty"`
	DurationSecs uint64 `json:"duration_secs,omitempty"`
	// ClientIPCount below 1 counts as 1, as in the seed; ClientIPBase is dotted decimal.
	ClientIPCount uint32  `json:"client_ip_count,omitempty"`
	ClientIPBase  string  `json:"client_ip_base,omitempty"`
	Op            string  `json:"op,omitempty"`
	Pipeline      uint32  `json:"pipeline,omitempty"`
	Rate          float64 `json:"rate,omitempty"`
	Resume        bool    `json:"resume,omitempty"`
}

// ParamsFromFlags reads Params from the flags a result recorded (by flag name, as given).
func ParamsFromFlags(flags map[string]string) Params {
	u32 := func(name string) uint32 {
		v, _ := strconv.ParseUint(flags[name], 10, 32)
		return uint32(v)
	}
	u64 := func(name string) uint64 {
		v, _ := strconv.ParseUint(flags[name], 10, 64)
		return v
	}
	rate, _ := strconv.ParseFloat(flags["rate"], 64)
	return Params{
		Count: u32("count"), Concurrency: u32("concurrency"), Connections: u32("connections"), Sources: u32("sources"),
		HoldSecs: u64("hold-secs"), DurationSecs: u64("duration-secs"),
		ClientIPCount: u32("client-ip-count"), ClientIPBase: cmp.Or(flags["client-ip-base"], "0.0.0.0"),
		Op: flags["op"], Pipeline: u32("pipeline"), Rate: rate, Resume: flags["resume"] == "true",
	}
}

// errorf builds a package error.
func errorf(format string, args ...any) error {
	return fmt.Errorf("linkkeysresult: "+format, args...)
}

// MergeRun merges result files that must be the segments of one run, as `loadproof report` is
// given them: result.CheckRun refuses files of different runs, a segment twice and mixed segment
// counts; a run whose files carry a run ID may lack segments, and the merge then says so
// (Partial, MissingSegments). names name the parts in messages.
func MergeRun(names []string, parts []Result) (Result, error) {
	ps := make([]result.Part, len(parts))
	for i := range parts {
		ps[i] = result.Part{Name: names[i], Envelope: &parts[i].Envelope}
	}
	cov, err := result.CheckRun(ps)
	if err != nil {
		return Result{}, errorf("%w", err)
	}
	out, err := Merge(parts)
	if err != nil {
		return Result{}, err
	}
	out.Envelope.MarkPartial(cov.Missing)
	return out, nil
}
