package linkkeysresult

import (
	"time"

	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// CmdCombined is the combined command: a held population, a handshake stream, a request stream and
// ddos waves at once, each from its own source-address range.
const CmdCombined = "combined"

// Stream names of a combined run. ddos waves are named by the run ("ddos-1", "ddos-2", … unless
// given).
const (
	StreamHeld       = "held"
	StreamHandshakes = "handshakes"
	StreamRequests   = "requests"
)

// StreamSep separates a stream's name from a class, cause, counter or latency kind in the combined
// envelope ("held/success", "ddos-1/shed", "requests/request"), so one envelope holds every stream's
// figures apart and still merges exactly across segments.
const StreamSep = "/"

// Combined is the combined command's section: the run's streams, each with its own counts and
// histograms, and what the server's accounting says about each where it can be attributed.
type Combined struct {
	Streams []Stream `json:"streams"`
	// Attribution says how the server's figures were attributed to streams: "source-prefix" when
	// the server reports counters per configured source prefix (source_<stream>_<counter>), else
	// "none" (only the whole run's server totals are checked).
	Attribution string `json:"attribution"`
}

// Stream is one stream of a combined run.
type Stream struct {
	Name string `json:"name"`
	// Kind is the command whose driver the stream runs (connections for the held population,
	// handshake-bench, request-bench, ddos).
	Kind string `json:"kind"`
	// SourceFirst and SourceCount are the stream's source addresses: SourceCount addresses from
	// SourceFirst inside 127.0.0.0/8. No two streams of a run share an address.
	SourceFirst string `json:"source_first"`
	SourceCount uint32 `json:"source_count"`
	// StartSecs is the stream's offset from the start of the run.
	StartSecs float64 `json:"start_secs"`
	// Params are the stream's command-line figures (what its DONE line prints).
	Params Params `json:"params"`
	// Result is the stream's own result: its operations only, with their classes, causes and
	// histograms. Its timeline is in the combined result's intervals, prefixed with the name.
	Result *Result `json:"result"`
	// Survival is the held population's survival (the held stream only).
	Survival *Survival `json:"survival,omitempty"`
	// PIDs are the process IDs of the client processes that ran the stream, one per process in
	// segment order (a process ID names a process on its own machine only): they show which
	// streams shared a process (docs/load-testing.md, Combined runs).
	PIDs []int `json:"pids,omitempty"`
	// Server is the server's accounting of this stream's source range, when the server reports
	// counters per source prefix.
	Server *StreamServer `json:"server,omitempty"`
}

// Survival is how many of the held population stayed established while the other streams ran,
// and how the ones lost ended.
type Survival struct {
	// Established is the number of connections the held stream established (and held).
	Established int64 `json:"established"`
	// StillOpen is how many of them were still established (TCP state) when the hold ended.
	StillOpen int64 `json:"still_open"`
	// Lost is Established − StillOpen: closed by the server (or the network) during the run.
	Lost int64 `json:"lost"`
	// LostBy counts the lost connections by how the client saw them end ("EOF": a FIN or TLS
	// close_notify, "ECONNRESET": a reset, "alert_…": a TLS alert, …).
	LostBy map[string]int64 `json:"lost_by"`
	// Percent is StillOpen / Established × 100 (100 when nothing was established).
	Percent float64 `json:"survival_percent"`
	// HeldSecs is how long the population was held after its ramp ended (the longest segment's).
	HeldSecs float64 `json:"held_secs"`
	// ServerCloses are the server's own close counters (METRICS fields named closed_* or
	// close_*) over the run, by name, when the server reports them: why the server closed
	// connections, for all sources together.
	ServerCloses map[string]int64 `json:"server_closes,omitempty"`
}

// StreamServer is the server's accounting of one stream's source prefix: the deltas of the
// server's per-prefix counters over the run and the checks of the stream's client counts against
// them.
type StreamServer struct {
	// Prefix is the counters' prefix name on the server (source_<Prefix>_<counter>).
	Prefix string `json:"prefix"`
	// Delta holds the per-prefix counters' changes by counter name (accepted, admitted,
	// shed_handshake_global, …).
	Delta map[string]int64 `json:"delta"`
	// Checks compare the stream's client counts with the server's.
	Checks []Check `json:"checks"`
}

// Shed is the sum of the per-prefix shed counters.
func (s *StreamServer) Shed() int64 {
	var n int64
	for k, v := range s.Delta {
		if strings.HasPrefix(k, "shed_") {
			n += v
		}
	}
	return n
}

// Mismatch reports whether any check failed.
func (s *StreamServer) Mismatch() bool {
	for _, c := range s.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

// Stream returns the stream named name, or nil.
func (c *Combined) Stream(name string) *Stream {
	if c == nil {
		return nil
	}
	for i := range c.Streams {
		if c.Streams[i].Name == name {
			return &c.Streams[i]
		}
	}
	return nil
}

// Prefixed returns name with the stream prefix, as the combined envelope spells it.
func Prefixed(stream, name string) string { return stream + StreamSep + name }

// PrefixEnvelope returns e with every class, cause, counter, gauge and latency kind prefixed with the
// stream's name, its intervals shifted by offset intervals (the stream's start, in whole intervals
// from the run's start), so several streams' envelopes merge into one without mixing.
func PrefixEnvelope(stream string, e *result.Envelope, offset int) result.Envelope {
	out := *e
	p := func(m map[string]int64) map[string]int64 {
		if len(m) == 0 {
			return nil
		}
		o := make(map[string]int64, len(m))
		for k, v := range m {
			o[Prefixed(stream, k)] = v
		}
		return o
	}
	ph := func(m map[string]*hist.Histogram) map[string]*hist.Histogram {
		if len(m) == 0 {
			return nil
		}
		o := make(map[string]*hist.Histogram, len(m))
		for k, h := range m {
			o[Prefixed(stream, k)] = h
		}
		return o
	}
	out.Classes = nil
	for _, c := range e.Classes {
		out.Classes = append(out.Classes, Prefixed(stream, c))
	}
	out.Totals = p(e.Totals)
	if out.Totals == nil {
		out.Totals = map[string]int64{}
	}
	out.Causes = p(e.Causes)
	out.Histograms = ph(e.Histograms)
	out.Intervals = nil
	step := e.IntervalSecs
	if step <= 0 {
		step = 1
	}
	for i := 0; i < offset; i++ {
		out.Intervals = append(out.Intervals, result.Interval{T: float64(i) * step, Secs: step})
	}
	for _, iv := range e.Intervals {
		n := result.Interval{T: iv.T + float64(offset)*step, Secs: iv.Secs, Counts: p(iv.Counts), Causes: p(iv.Causes),
			Counters: p(iv.Counters), Gauges: p(iv.Gauges), Latency: ph(iv.Latency)}
		out.Intervals = append(out.Intervals, n)
	}
	return out
}

func (c *Combined) merge(o *Combined) error {
	if c.Attribution == "" {
		c.Attribution = o.Attribution
	}
	for _, s := range o.Streams {
		mine := c.Stream(s.Name)
		if mine == nil {
			cp := s
			if s.Result != nil {
				r, err := Merge([]Result{*s.Result})
				if err != nil {
					return err
				}
				cp.Result = &r
			}
			cp.Survival = s.Survival.clone()
			cp.PIDs = slices.Clone(s.PIDs)
			c.Streams = append(c.Streams, cp)
			continue
		}
		if mine.Kind != s.Kind {
			return fmt.Errorf("stream %q is a %s stream in one part and a %s stream in another", s.Name, mine.Kind, s.Kind)
		}
		switch {
		case mine.Result == nil && s.Result != nil:
			r := *s.Result
			mine.Result = &r
		case mine.Result != nil && s.Result != nil:
			r, err := Merge([]Result{*mine.Result, *s.Result})
			if err != nil {
				return err
			}
			mine.Result = &r
		}
		mine.Params = mergeParams(mine.Params, s.Params)
		mine.PIDs = append(mine.PIDs, s.PIDs...)
		if s.Survival != nil {
			if mine.Survival == nil {
				mine.Survival = &Survival{LostBy: map[string]int64{}}
			}
			mine.Survival.add(s.Survival)
		}
		if mine.Server == nil && s.Server != nil {
			mine.Server = s.Server
		}
	}
	return nil
}

// mergeParams keeps the first part's figures: every segment of a stream records the whole
// stream's parameters.
func mergeParams(a, _ Params) Params { return a }

func (s *Survival) clone() *Survival {
	if s == nil {
		return nil
	}
	c := *s
	c.LostBy = maps.Clone(s.LostBy)
	c.ServerCloses = maps.Clone(s.ServerCloses)
	return &c
}

func (s *Survival) add(o *Survival) {
	s.Established += o.Established
	s.StillOpen += o.StillOpen
	s.Lost += o.Lost
	if s.LostBy == nil {
		s.LostBy = map[string]int64{}
	}
	addCounts(s.LostBy, o.LostBy)
	s.HeldSecs = max(s.HeldSecs, o.HeldSecs)
	if s.ServerCloses == nil && o.ServerCloses != nil {
		s.ServerCloses = maps.Clone(o.ServerCloses)
	}
}

func (s *Survival) finish() {
	s.Lost = s.Established - s.StillOpen
	s.Percent = 100
	if s.Established > 0 {
		s.Percent = float64(s.StillOpen) / float64(s.Established) * 100
	}
}

func (c *Combined) finish() {
	slices.SortStableFunc(c.Streams, func(a, b Stream) int { return streamOrder(a.Name) - streamOrder(b.Name) })
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Result != nil {
			s.Result.Finish()
		}
		if s.Survival != nil {
			s.Survival.finish()
		}
	}
}

// streamOrder puts the held population first, then handshakes, requests and the ddos waves in
// name order.
func streamOrder(name string) int {
	switch name {
	case StreamHeld:
		return 0
	case StreamHandshakes:
		return 1
	case StreamRequests:
		return 2
	}
	return 3
}

// PlannedPartSecs is how long the run's planned part lasted: its whole length less the ramp of its
// held population (connections, or a combined run's held stream from its start to its last
// attempt), which no plan sets a length for. A capacity phase's planned duration is held to it
// (capacity.Overran): a held phase whose 2,000 connections take a busy machine 3 s to open has not
// stalled, one whose hold or requests run on past their end has.
func (r *Result) PlannedPartSecs() float64 {
	elapsed := time.Duration(r.Elapsed).Seconds()
	var ramp float64
	if r.Hold != nil {
		ramp = time.Duration(r.Hold.RampTime).Seconds()
	}
	if r.Combined != nil {
		for _, s := range r.Combined.Streams {
			if s.Result != nil && s.Result.Hold != nil {
				ramp = max(ramp, s.StartSecs+time.Duration(s.Result.Hold.RampTime).Seconds())
			}
		}
	}
	if ramp <= 0 || ramp > elapsed {
		return elapsed
	}
	return elapsed - ramp
}
