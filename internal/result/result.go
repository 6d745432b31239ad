// Package result is loadproof's one result model: the envelope every result file of either harness
// carries (format, command and flags, target, machine records, segments, totals by outcome class,
// whole-run histograms by latency kind) and the timeline of interval snapshots the engine takes
// during a run (100 ms in a run under 30 s, else one a second; the length is recorded in
// IntervalSecs and every reader divides by it), with the server samples taken in each.
//
// Everything here merges exactly: segments of one run (worker processes, machines) combine into the
// result one very large machine would have written. Intervals merge slot by slot in time from each
// part's own start (slot i is [i·IntervalSecs, (i+1)·IntervalSecs)), which the coordinated start of a fanned-out run makes the same instant (the clock offsets
// are recorded in the machine records); parts of different interval lengths, one a whole multiple
// of the other, merge at the longer one (Rebin). Counts, causes, counters and histograms add;
// gauges (a value at the interval's end, such as the connections held) sum across parts, which
// hold at the same instant, and take the last value when intervals are joined in time.
//
// The package is pure data: it imports no protocol and runs no load, so reports read it from files.
package result

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/machine"
)

// Format is the version of the envelope's JSON form.
const Format = "loadproof.result/v2"

// Outcome classes shared by both harnesses, for reports that compare them. A harness may define
// more (LinkKeys failure stages, Keycast "intentional" shedding); these names are the common ones.
const (
	ClassSuccess = "success"
	ClassNetwork = "network"
	// ClassRefused is an operation the server turned away by design: its limiter or its shedding
	// contract, not a failure and not throughput. Its causes read "refused:REASON" where the reason
	// is known.
	ClassRefused = "refused"
)

// refusalClasses are the outcome classes that are refusals by design: loadproof's own, and Keycast's
// rate-limited (429) and intended shedding (503 with its admission reason).
var refusalClasses = []string{ClassRefused, "rate-limited", "intentional"}

// IsRefusal reports whether an outcome class is a refusal by design (never a failure, never
// throughput).
func IsRefusal(class string) bool { return slices.Contains(refusalClasses, class) }

// Refused returns the operations of the run refused by design.
func (e *Envelope) Refused() int64 { return refusedIn(e.Totals) }

// Refused returns the interval's operations refused by design.
func (iv *Interval) Refused() int64 { return refusedIn(iv.Counts) }

func refusedIn(counts map[string]int64) int64 {
	var n int64
	for k, v := range counts {
		if IsRefusal(k) {
			n += v
		}
	}
	return n
}

// Envelope is the part of every result file that is the same for both harnesses. Harness result
// types embed it, so its fields sit at the top level of the file next to the harness's own.
type Envelope struct {
	Format  string `json:"format"`
	Harness string `json:"harness"`
	Command string `json:"command"`
	// RunID names the run the file belongs to (NewRunID: 128 random bits, hex), made once by the
	// command that starts the run and handed to every segment and worker; a merge takes the segments
	// of one run only (CheckRun). Empty in files written before run IDs existed.
	RunID string `json:"run_id,omitempty"`
	// Partial is true when the file is a merge that lacked some of the run's segments, listed in
	// MissingSegments: its figures are those of the segments present, not of the whole run.
	Partial         bool      `json:"partial,omitempty"`
	MissingSegments []Segment `json:"missing_segments,omitempty"`
	// Flags holds every flag of the command line as given (defaults included), by flag name.
	Flags map[string]string `json:"flags,omitempty"`
	// Target is the address the load went to (host:port or URL).
	Target string `json:"target"`
	// Machines holds one record per process or machine that generated load.
	Machines  []machine.Record `json:"machines,omitempty"`
	Segments  []Segment        `json:"segments,omitempty"`
	StartedAt time.Time        `json:"started_at"`
	EndedAt   time.Time        `json:"ended_at"`
	// IntervalSecs is the length of one interval snapshot (0.1 or 1 by default; the last interval
	// of a run may be shorter, and each records its own Secs). Rates divide by an interval's Secs.
	IntervalSecs float64 `json:"interval_secs,omitempty"`
	// Classes lists the outcome classes in the harness's order (for stable reports).
	Classes []string `json:"classes,omitempty"`
	// Totals counts operations by outcome class over the whole run.
	Totals map[string]int64 `json:"totals"`
	// Causes counts failures by detailed cause ("http_503_admission_rejected", "tls:TIMEOUT", …).
	Causes map[string]int64 `json:"causes,omitempty"`
	// Histograms holds whole-run latency histograms by kind ("latency", "uncorrected", …).
	Histograms map[string]*hist.Histogram `json:"histograms,omitempty"`
	// Intervals is the timeline of interval snapshots.
	Intervals []Interval `json:"intervals,omitempty"`
	// RemoteWrite says what streaming the run to a Prometheus remote-write endpoint delivered
	// (--remote-write); absent when the run was not streamed.
	RemoteWrite *RemoteWrite `json:"remote_write,omitempty"`
	// Cost is what the run cost and what a unit of the capacity it proved costs (--cost-per-hour,
	// --server-cost-per-hour; docs/cost.md); absent when no price was given. A merge never carries
	// it over: the command that writes the merged run prices it again.
	Cost *cost.Cost `json:"cost,omitempty"`
}

// RemoteWrite is the delivery of a run's remote-write stream: requests sent, dropped (queue full),
// failed after their retries, and pending (queued or in flight, not yet confirmed, when the wait
// for them ran out and the result was written).
type RemoteWrite struct {
	URL       string `json:"url"`
	Sent      int64  `json:"sent"`
	Dropped   int64  `json:"dropped"`
	Failed    int64  `json:"failed"`
	Pending   int64  `json:"pending,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// Interval is one interval snapshot: what finished during [T, T+Secs) from the run start.
type Interval struct {
	T    float64 `json:"t"`
	Secs float64 `json:"secs"`
	// Counts holds the operations that finished in the interval, by outcome class (zeros omitted).
	Counts map[string]int64 `json:"counts,omitempty"`
	// Causes holds failures by detailed cause.
	Causes map[string]int64 `json:"causes,omitempty"`
	// Counters holds driver counters that are not outcomes (late sends, scheduled, connections
	// established, bytes), by name.
	Counters map[string]int64 `json:"counters,omitempty"`
	// Latency holds the interval's histograms by kind.
	Latency map[string]*hist.Histogram `json:"latency,omitempty"`
	// Gauges holds driver gauges read as the interval closed (the connections held at that
	// moment), by name; zeros are kept, since a gauge at zero says something. Gauges of several
	// segments sum (they are read at the same instant of each part's run); intervals joined in
	// time keep the last one's.
	Gauges map[string]int64 `json:"gauges,omitempty"`
	// Server holds the server sample taken in this interval (RSS, open connections, shed counters,
	// cache hits: whatever the target exposes), by metric name. Samples of several servers (or of
	// several processes of one) are summed when merged.
	Server map[string]float64 `json:"server,omitempty"`
}

// Total returns the number of operations in the interval.
func (iv *Interval) Total() int64 {
	var n int64
	for _, v := range iv.Counts {
		n += v
	}
	return n
}

// Total returns the number of operations over the run.
func (e *Envelope) Total() int64 {
	var n int64
	for _, v := range e.Totals {
		n += v
	}
	return n
}

// Elapsed is the run's wall time.
func (e *Envelope) Elapsed() time.Duration { return e.EndedAt.Sub(e.StartedAt) }

// Merge adds o (another segment of the same run) into e exactly: counts and histograms add,
// intervals add by index, machine records and segments are appended, the run spans from the earliest
// start to the latest end.
func (e *Envelope) Merge(o *Envelope) error {
	if o == nil {
		return nil
	}
	if e.Format == "" {
		*e = Envelope{Format: o.Format, Harness: o.Harness, Command: o.Command, Flags: maps.Clone(o.Flags),
			Target: o.Target, IntervalSecs: o.IntervalSecs, Classes: slices.Clone(o.Classes), RunID: o.RunID}
		e.StartedAt, e.EndedAt = o.StartedAt, o.EndedAt
	} else if e.Harness != o.Harness || e.Command != o.Command {
		return fmt.Errorf("result: cannot merge a %s %s result into a %s %s result: segments of one run have the same command",
			o.Harness, o.Command, e.Harness, e.Command)
	} else if e.RunID != o.RunID && e.RunID != "" && o.RunID != "" {
		return fmt.Errorf("result: cannot merge run %s into run %s: only the segments of one run merge", o.RunID, e.RunID)
	}
	e.MarkPartial(o.MissingSegments)
	if e.IntervalSecs != o.IntervalSecs && len(o.Intervals) > 0 && len(e.Intervals) > 0 {
		// A part that ended before the engine coarsened its intervals (a run passing 30 s) has
		// finer ones than a part that ran on: both merge at the coarser length, exactly.
		switch {
		case e.IntervalSecs < o.IntervalSecs:
			if err := e.Rebin(o.IntervalSecs); err != nil {
				return fmt.Errorf("result: cannot merge intervals of %gs into intervals of %gs: %w", o.IntervalSecs, e.IntervalSecs, err)
			}
		default:
			c := Envelope{IntervalSecs: o.IntervalSecs, Intervals: o.Intervals}
			if err := c.Rebin(e.IntervalSecs); err != nil {
				return fmt.Errorf("result: cannot merge intervals of %gs into intervals of %gs: %w", o.IntervalSecs, e.IntervalSecs, err)
			}
			oc := *o
			oc.Intervals, oc.IntervalSecs = c.Intervals, c.IntervalSecs
			o = &oc
		}
	} else if len(e.Intervals) == 0 && len(o.Intervals) > 0 {
		e.IntervalSecs = o.IntervalSecs
	}
	for _, c := range o.Classes {
		if !slices.Contains(e.Classes, c) {
			e.Classes = append(e.Classes, c)
		}
	}
	e.Machines = append(e.Machines, o.Machines...)
	e.Segments = append(e.Segments, o.Segments...)
	if !o.StartedAt.IsZero() && (e.StartedAt.IsZero() || o.StartedAt.Before(e.StartedAt)) {
		e.StartedAt = o.StartedAt
	}
	if o.EndedAt.After(e.EndedAt) {
		e.EndedAt = o.EndedAt
	}
	e.Totals = addCounts(e.Totals, o.Totals)
	e.Causes = addCounts(e.Causes, o.Causes)
	e.Histograms = addHists(e.Histograms, o.Histograms)
	ivs := o.Intervals
	if len(ivs) > 0 && e.IntervalSecs > 0 {
		// Parts merge slot by slot in time, not interval by interval: a part whose collector ran
		// late (a busy machine delays a tick, and that interval lasts two) has fewer intervals
		// than the others, and by index its later ones would land in the wrong slots, out of
		// time order.
		e.Intervals = slotted(e.Intervals, e.IntervalSecs)
		ivs = slotted(ivs, e.IntervalSecs)
	}
	for i := range ivs {
		if i >= len(e.Intervals) {
			e.Intervals = append(e.Intervals, Interval{T: ivs[i].T, Secs: ivs[i].Secs})
		}
		e.Intervals[i].merge(&ivs[i])
	}
	return nil
}

// Add merges o (the same interval of another segment) into iv exactly: counts, causes, counters and
// histograms add, gauges and server samples sum. A coordinator merges live snapshots with it.
func (iv *Interval) Add(o *Interval) { iv.merge(o) }

func (iv *Interval) merge(o *Interval) {
	iv.Counts = addCounts(iv.Counts, o.Counts)
	iv.Causes = addCounts(iv.Causes, o.Causes)
	iv.Counters = addCounts(iv.Counters, o.Counters)
	iv.Latency = addHists(iv.Latency, o.Latency)
	if len(o.Gauges) > 0 {
		if iv.Gauges == nil {
			iv.Gauges = make(map[string]int64, len(o.Gauges))
		}
		for k, v := range o.Gauges {
			iv.Gauges[k] += v
		}
	}
	if len(o.Server) > 0 {
		if iv.Server == nil {
			iv.Server = map[string]float64{}
		}
		for k, v := range o.Server {
			iv.Server[k] += v
		}
	}
	iv.Secs = max(iv.Secs, o.Secs)
}

func addCounts(dst, src map[string]int64) map[string]int64 {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]int64, len(src))
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

func addHists(dst, src map[string]*hist.Histogram) map[string]*hist.Histogram {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]*hist.Histogram, len(src))
	}
	for k, h := range src {
		if dst[k] == nil {
			dst[k] = hist.New()
		}
		dst[k].Merge(h)
	}
	return dst
}

// Validate checks what a reader relies on: the format, a harness and command, intervals in order,
// and figures consistent with each other (consistency). It names every problem it finds.
func (e *Envelope) Validate() error {
	var errs []error
	if e.Format != Format {
		errs = append(errs, fmt.Errorf("format %q is not %q", e.Format, Format))
	}
	if e.Harness == "" || e.Command == "" {
		errs = append(errs, errors.New("harness or command is missing"))
	}
	errs = append(errs, e.consistency()...)
	if err := ValidateRunID(e.RunID); err != nil {
		errs = append(errs, err)
	}
	for i := 1; i < len(e.Intervals); i++ {
		if e.Intervals[i].T < e.Intervals[i-1].T {
			errs = append(errs, fmt.Errorf("interval %d starts at %gs, before interval %d at %gs", i, e.Intervals[i].T, i-1, e.Intervals[i-1].T))
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("result: not a valid loadproof result: %w", errors.Join(errs...))
	}
	return nil
}

// Stop reasons (StopEvent.Reason, and a capacity run's stop_reason): one set for every command, so
// the coordinator, the engine, the Keycast client and the capacity harness record the same words.
const (
	// StopSignal: SIGINT or SIGTERM (the run's context ended).
	StopSignal = "signal"
	// StopCondition: a live stop condition breached (or, in a capacity run, a stop check failed on
	// a phase's totals).
	StopCondition = "stop-condition"
	// StopPhaseError: a capacity phase could not run (missing users file, unreachable target, …).
	StopPhaseError = "phase-error"
	// StopWriteError: a phase ran but its results file could not be written (a full disk).
	StopWriteError = "write-error"
	// StopWorkerLost: a load worker of a run spread over many machines stopped reporting
	// (docs/distributed.md); the run keeps the other workers' partial results.
	StopWorkerLost = "worker-lost"
)

// StopEvent records why a run ended before its bound: a live stop condition (metric, observed
// value, limit, window) or a signal.
type StopEvent struct {
	Reason      string  `json:"reason"` // "stop-condition", "signal", …
	Metric      string  `json:"metric,omitempty"`
	Observed    float64 `json:"observed,omitempty"`
	Limit       float64 `json:"limit,omitempty"`
	WindowSecs  float64 `json:"window_secs,omitempty"`
	ElapsedSecs float64 `json:"elapsed_secs"`
	At          string  `json:"at"` // RFC 3339
}
