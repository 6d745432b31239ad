package linkkeysload

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/machine"
)

// Command names, as in the seed.
const (
	CmdConnections    = "connections"
	CmdHandshakeBench = "handshake-bench"
	CmdRequestBench   = "request-bench"
	CmdDDoS           = "ddos"
)

// ResultFormat is the version of the JSON form of Result.
const ResultFormat = "loadproof.linkkeys.result/v1"

// Result is the machine-readable outcome of one client command (or one worker's segment of it). The
// sections that do not apply to a command are nil. Merge combines worker results exactly.
type Result struct {
	Format  string `json:"format"`
	Command string `json:"command"`
	// Flags holds every flag of the command line as given (defaults included), by flag name.
	Flags    map[string]string `json:"flags"`
	Target   Target            `json:"target"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Elapsed  Duration          `json:"elapsed"`
	Segments []engine.Segment  `json:"segments"`
	Machine  machine.Record    `json:"machine"`

	// Connection attempts: connections, ddos and handshake-bench count every attempt; request-bench
	// counts its setup connections.
	Attempts *Attempts `json:"attempts,omitempty"`
	// Hold is the connections command's held-connection and client-memory figures.
	Hold *Hold `json:"hold,omitempty"`
	// Handshakes is handshake-bench's figures.
	Handshakes *Handshakes `json:"handshakes,omitempty"`
	// Requests is request-bench's figures.
	Requests *Requests `json:"requests,omitempty"`
	// Server is the server's own accounting over the run, when its METRICS were reachable.
	Server *ServerAccounting `json:"server,omitempty"`
	// ClientCPU is the CPU time (user plus system) the client processes used, summed over workers.
	ClientCPU Duration `json:"client_cpu"`
	// CPUPer divides ClientCPU and ServerCPU by the run's attempts and by its successes (derived;
	// absent when no CPU was measured).
	CPUPer *CPUPer `json:"cpu_per,omitempty"`
	// ServerCPU is the CPU time the server process (and its child processes) used during the run,
	// read from /proc through the info file's pid; absent when it could not be read.
	ServerCPU *Duration `json:"server_cpu,omitempty"`
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

func newAttempts() *Attempts {
	return &Attempts{Classes: map[string]int64{}, Reasons: map[string]int64{}, Latency: hist.New()}
}

// record adds one finished attempt.
func (a *Attempts) record(f Failure, took time.Duration) {
	a.Attempted++
	if f.Stage == StageNone {
		a.Succeeded++
		a.Latency.Record(took)
		return
	}
	a.Failed++
	a.Classes[f.Stage.Label()]++
	a.Reasons[f.Reason()]++
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

// cpuPer computes r's CPUPer from its counts; nil when no CPU was measured. A figure over zero
// operations is nil.
func (r *Result) cpuPer() *CPUPer {
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

// HoldLoss describes the held connections that ended during the hold.
type HoldLoss struct {
	// Lost is how many: Held - StillOpen.
	Lost int64 `json:"lost"`
	// Reasons counts them by what the client saw as they ended: "closed_by_server" (the server
	// closed the connection, or its process exited), "reset" (RST), "unknown" (found only by the
	// count at the end of the hold).
	Reasons map[string]int64 `json:"reasons"`
	// First and Last are when the first and the last were seen to end (zero when not seen).
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// ServerGone is set when the server process (the info file's pid) was no longer running at the
	// end of the hold.
	ServerGone bool `json:"server_gone,omitempty"`
}

// add records one connection seen to end at t.
func (l *HoldLoss) add(reason string, t time.Time) {
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

// holdLoss returns the loss of a hold from the count at its end (lost) and what the watcher saw:
// the seen reasons, capped at lost, and "unknown" for the rest; nil when nothing was lost.
func holdLoss(lost int64, seen HoldLoss) *HoldLoss {
	if lost <= 0 {
		return nil
	}
	l := &HoldLoss{Lost: lost, Reasons: map[string]int64{}, First: seen.First, Last: seen.Last}
	var counted int64
	for _, r := range []string{lossClosed, lossReset} {
		n := min(seen.Reasons[r], lost-counted)
		if n > 0 {
			l.Reasons[r] = n
			counted += n
		}
	}
	if counted < lost {
		l.Reasons["unknown"] = lost - counted
	}
	return l
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
	Sent         int64   `json:"sent"`
	Completed    int64   `json:"completed"`
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
	// Unsent counts open-model tickets that were due before the end but never sent because every
	// connection was busy or had failed.
	Unsent int64 `json:"unsent"`
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// Merge combines the results of the workers of one run. Counts and maps add, histograms merge
// exactly, the run spans the earliest start to the latest end, segments are listed in order, and
// derived figures (rates, bytes per connection) are recomputed from the totals. The flags, target and
// machine record are taken from the first part. Every part must be of the same command.
func Merge(parts []Result) (Result, error) {
	if len(parts) == 0 {
		return Result{}, errorf("merging results: no parts")
	}
	out := parts[0].clone()
	for _, p := range parts[1:] {
		if p.Command != out.Command {
			return Result{}, errorf("merging results: part of %q mixed with %q", p.Command, out.Command)
		}
		if p.Start.Before(out.Start) {
			out.Start = p.Start
		}
		if p.End.After(out.End) {
			out.End = p.End
		}
		out.Segments = append(out.Segments, p.Segments...)
		out.ClientCPU += p.ClientCPU
		if p.Attempts != nil {
			if out.Attempts == nil {
				out.Attempts = newAttempts()
			}
			out.Attempts.merge(p.Attempts)
		}
		if p.Hold != nil {
			if out.Hold == nil {
				out.Hold = &Hold{HoldSecs: p.Hold.HoldSecs}
			}
			out.Hold.Held += p.Hold.Held
			out.Hold.StillOpen += p.Hold.StillOpen
			out.Hold.RampTime = max(out.Hold.RampTime, p.Hold.RampTime)
			out.Hold.RSSBaseline += p.Hold.RSSBaseline
			out.Hold.RSSHeld += p.Hold.RSSHeld
			out.Hold.Lasted = max(out.Hold.Lasted, p.Hold.Lasted)
			if !p.Hold.Start.IsZero() && (out.Hold.Start.IsZero() || p.Hold.Start.Before(out.Hold.Start)) {
				out.Hold.Start = p.Hold.Start
			}
			if p.Hold.Loss != nil {
				if out.Hold.Loss == nil {
					out.Hold.Loss = &HoldLoss{}
				}
				out.Hold.Loss.merge(p.Hold.Loss)
			}
		}
		if p.Handshakes != nil {
			if out.Handshakes == nil {
				out.Handshakes = &Handshakes{DurationSecs: p.Handshakes.DurationSecs, Resume: p.Handshakes.Resume, ResumedLatency: hist.New()}
			}
			h, o := out.Handshakes, p.Handshakes
			h.Concurrency += o.Concurrency
			h.Completed += o.Completed
			h.Failed += o.Failed
			h.Full += o.Full
			h.Resumed += o.Resumed
			h.ResumedLatency.Merge(o.ResumedLatency)
		}
		if p.Requests != nil {
			if out.Requests == nil {
				out.Requests = &Requests{Op: p.Requests.Op, DurationSecs: p.Requests.DurationSecs, Pipeline: p.Requests.Pipeline,
					LateThreshold: p.Requests.LateThreshold, Statuses: map[string]int64{}, Latency: hist.New()}
			}
			r, o := out.Requests, p.Requests
			r.Connections += o.Connections
			r.TargetRate += o.TargetRate
			r.Sent += o.Sent
			r.Completed += o.Completed
			r.Errors += o.Errors
			r.IOErrors += o.IOErrors
			r.DecodeErrors += o.DecodeErrors
			addCounts(r.Statuses, o.Statuses)
			r.Latency.Merge(o.Latency)
			if o.Uncorrected != nil {
				if r.Uncorrected == nil {
					r.Uncorrected = hist.New()
				}
				r.Uncorrected.Merge(o.Uncorrected)
			}
			r.LateSends += o.LateSends
			r.Unsent += o.Unsent
		}
	}
	slices.SortFunc(out.Segments, func(a, b engine.Segment) int { return a.Index - b.Index })
	out.finish()
	return out, nil
}

// clone deep-copies r so merging never changes a part.
func (r Result) clone() Result {
	c := r
	c.Flags = maps.Clone(r.Flags)
	c.Segments = slices.Clone(r.Segments)
	if r.Attempts != nil {
		a := *r.Attempts
		a.Classes = maps.Clone(r.Attempts.Classes)
		a.Reasons = maps.Clone(r.Attempts.Reasons)
		if a.Classes == nil {
			a.Classes = map[string]int64{}
		}
		if a.Reasons == nil {
			a.Reasons = map[string]int64{}
		}
		a.Latency = cloneHist(r.Attempts.Latency)
		c.Attempts = &a
	}
	if r.Hold != nil {
		h := *r.Hold
		if h.Loss != nil {
			l := *h.Loss
			l.Reasons = maps.Clone(l.Reasons)
			h.Loss = &l
		}
		c.Hold = &h
	}
	if r.Handshakes != nil {
		h := *r.Handshakes
		h.ResumedLatency = cloneHist(r.Handshakes.ResumedLatency)
		c.Handshakes = &h
	}
	if r.Requests != nil {
		q := *r.Requests
		q.Statuses = maps.Clone(r.Requests.Statuses)
		if q.Statuses == nil {
			q.Statuses = map[string]int64{}
		}
		q.Latency = cloneHist(r.Requests.Latency)
		if r.Requests.Uncorrected != nil {
			q.Uncorrected = r.Requests.Uncorrected.Clone()
		}
		c.Requests = &q
	}
	if r.Server != nil {
		s := *r.Server
		c.Server = &s
	}
	if r.ServerCPU != nil {
		v := *r.ServerCPU
		c.ServerCPU = &v
	}
	return c
}

func cloneHist(h *hist.Histogram) *hist.Histogram {
	if h == nil {
		return hist.New()
	}
	return h.Clone()
}

// finish recomputes the derived figures from the counts.
func (r *Result) finish() {
	r.Format = ResultFormat
	if !r.Start.IsZero() && r.End.After(r.Start) {
		r.Elapsed = Duration(r.End.Sub(r.Start))
	}
	if h := r.Hold; h != nil {
		h.BytesPerConn = 0
		if h.Held > 0 && h.RSSHeld >= h.RSSBaseline {
			h.BytesPerConn = float64(h.RSSHeld-h.RSSBaseline) / float64(h.Held)
		}
	}
	if h := r.Handshakes; h != nil {
		h.Rate = rustRate(h.Completed, h.DurationSecs)
		h.FullRate = rustRate(h.Full, h.DurationSecs)
		h.ResumedRate = rustRate(h.Resumed, h.DurationSecs)
	}
	if q := r.Requests; q != nil {
		q.Rate = rustRate(q.Completed, q.DurationSecs)
	}
	r.CPUPer = r.cpuPer()
}

// MarshalJSON writes the result with its derived figures; NaN and infinite rates (a zero duration)
// are written as null.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	c := r.clone()
	c.finish()
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

// WriteJSON writes r to path (indented, atomically through a temporary file).
func (r Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return errorf("encoding result: %w", err)
	}
	b = append(b, '\n')
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return errorf("writing result file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errorf("writing result file %s: %w", path, err)
	}
	return nil
}

// ReadResult reads a result file written by WriteJSON (or a worker).
func ReadResult(b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, errorf("reading result: %w", err)
	}
	if r.Format != ResultFormat {
		return Result{}, errorf("reading result: format %q, want %q", r.Format, ResultFormat)
	}
	switch r.Command {
	case CmdConnections, CmdHandshakeBench, CmdRequestBench, CmdDDoS:
	default:
		return Result{}, errorf("reading result: unknown command %q", r.Command)
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
