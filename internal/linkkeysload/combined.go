package linkkeysload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// The combined command runs the four kinds of LinkKeys load at once, each as its own engine run
// with its own driver, classes and histograms (the drivers of connections, handshake-bench,
// request-bench and ddos, unchanged), each from its own source-address range so the server's
// figures can be told apart:
//
//   - held: N connections, ramped (Concurrency at a time, or paced at Rate per second), then held
//     idle until every other stream has ended and at least HoldSecs have passed; how many of them
//     the server closed meanwhile, and how they ended, is the held population's survival;
//   - handshakes: connect, handshake, close, Concurrency loops back to back or paced at Rate per
//     second, full or resumed, for DurationSecs from StartSecs;
//   - requests: any op over Connections persistent connections, one at a time, Pipeline in flight,
//     or at Rate per second, for DurationSecs from StartSecs;
//   - ddos waves: one attempt from each of Sources distinct addresses, starting at StartSecs.
//
// The streams' results are merged into one Result whose envelope prefixes every class, cause,
// counter and latency kind with the stream's name ("held/success"), so a run fanned out over
// worker processes merges exactly (linkkeysresult.Merge); the per-stream results sit in the
// Combined section. The parent samples the server once a second into the timeline, reads its
// accounting before and after the run, and attributes the server's counters to streams where the
// server reports them per configured source prefix (source_<stream>_<counter> fields).

// CombinedConfig is the combined command. At least one stream is required.
type CombinedConfig struct {
	Target         Target        `json:"target"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	// DDoSTimeout bounds a ddos attempt; 0 means AttemptTimeout.
	DDoSTimeout time.Duration    `json:"ddos_timeout,omitempty"`
	Held        *HeldStream      `json:"held,omitempty"`
	Handshakes  *HandshakeStream `json:"handshakes,omitempty"`
	Requests    *RequestStream   `json:"requests,omitempty"`
	DDoS        []DDoSWave       `json:"ddos,omitempty"`
	// Start is the run's coordinated start (every worker process starts its streams from it); zero
	// starts at once.
	Start time.Time `json:"start,omitzero"`
}

// HeldStream is the held population.
type HeldStream struct {
	Count       uint32  `json:"count"`
	Concurrency uint32  `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	// HoldSecs is the least time the population is held after its ramp; it is held on until every
	// other stream has ended.
	HoldSecs  uint64      `json:"hold_secs"`
	StartSecs float64     `json:"start_secs,omitempty"`
	Sources   SourceAddrs `json:"sources"`
}

// HandshakeStream is the connect-handshake-close stream.
type HandshakeStream struct {
	Concurrency  uint32      `json:"concurrency"`
	Rate         float64     `json:"rate,omitempty"`
	Resume       bool        `json:"resume,omitempty"`
	StartSecs    float64     `json:"start_secs,omitempty"`
	DurationSecs uint64      `json:"duration_secs"`
	Sources      SourceAddrs `json:"sources"`
}

// RequestStream is the request stream over persistent connections.
type RequestStream struct {
	Connections  uint32      `json:"connections"`
	Pipeline     uint32      `json:"pipeline,omitempty"`
	Rate         float64     `json:"rate,omitempty"`
	Op           string      `json:"op"`
	StartSecs    float64     `json:"start_secs,omitempty"`
	DurationSecs uint64      `json:"duration_secs"`
	Sources      SourceAddrs `json:"sources"`
}

// DDoSWave is one ddos wave: one attempt from each of Sources addresses from Base.
type DDoSWave struct {
	// Name names the wave's stream; empty means "ddos-<n>" (1-based, in order).
	Name        string  `json:"name,omitempty"`
	StartSecs   float64 `json:"start_secs,omitempty"`
	Sources     uint32  `json:"sources"`
	Concurrency uint32  `json:"concurrency"`
	Base        IPv4    `json:"client_ip_base"`
}

// SourceRange is the addresses one stream binds: Count addresses from First.
type SourceRange struct {
	Stream string
	First  IPv4
	Count  uint32
}

// Last returns the range's last address.
func (r SourceRange) Last() IPv4 { return IPv4(uint32(r.First) + max(r.Count, 1) - 1) }

// WaveName returns the stream name of wave i (0-based).
func (c CombinedConfig) WaveName(i int) string {
	if n := c.DDoS[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("ddos-%d", i+1)
}

// SourceRanges lists every stream's source range, in stream order.
func (c CombinedConfig) SourceRanges() []SourceRange {
	var out []SourceRange
	if h := c.Held; h != nil {
		out = append(out, SourceRange{linkkeysresult.StreamHeld, h.Sources.Base, max(h.Sources.Count, 1)})
	}
	if h := c.Handshakes; h != nil {
		out = append(out, SourceRange{linkkeysresult.StreamHandshakes, h.Sources.Base, max(h.Sources.Count, 1)})
	}
	if q := c.Requests; q != nil {
		out = append(out, SourceRange{linkkeysresult.StreamRequests, q.Sources.Base, max(q.Sources.Count, 1)})
	}
	for i, w := range c.DDoS {
		out = append(out, SourceRange{c.WaveName(i), w.Base, w.Sources})
	}
	return out
}

// streamName is what a stream name may be: it becomes a key prefix in results and, on the
// server, a metric-name component.
var streamName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })

// CheckSourceRanges reports every range that wraps inside its /8 (its addresses would not be
// consecutive) and every pair that overlaps, all at once.
func CheckSourceRanges(ranges []SourceRange) error {
	var errs []error
	for _, r := range ranges {
		if uint64(r.First&0xFFFFFF)+uint64(r.Count) > 1<<24 {
			errs = append(errs, fmt.Errorf("stream %s: %d sources from %s run past %s", r.Stream, r.Count, r.First, IPv4(uint32(r.First)|0xFFFFFF)))
		}
	}
	for i := range ranges {
		for j := i + 1; j < len(ranges); j++ {
			a, b := ranges[i], ranges[j]
			if a.First <= b.Last() && b.First <= a.Last() {
				errs = append(errs, fmt.Errorf("streams %s (%s–%s) and %s (%s–%s) share source addresses; give each stream its own range",
					a.Stream, a.First, a.Last(), b.Stream, b.First, b.Last()))
			}
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem of the configuration at once, as a *UsageError.
func (c CombinedConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Held == nil && c.Handshakes == nil && c.Requests == nil && len(c.DDoS) == 0 {
		bad("no stream: give at least one of the held population, the handshake stream, the request stream or a ddos wave")
	}
	offset := func(name string, s float64) {
		if math.IsNaN(s) || s < 0 || s > 86400 {
			bad("stream %s: start offset %v s must be between 0 and 86400", name, s)
		}
	}
	rate := func(name string, r float64) {
		if math.IsNaN(r) || r < 0 || r > 1e9 {
			bad("stream %s: rate %v must be a number from 0 (unpaced) to 1e9 per second", name, r)
		}
	}
	if h := c.Held; h != nil {
		if h.Count == 0 || h.Concurrency == 0 {
			bad("stream held: count %d and concurrency %d must be at least 1", h.Count, h.Concurrency)
		}
		offset("held", h.StartSecs)
		rate("held", h.Rate)
	}
	if h := c.Handshakes; h != nil {
		if h.Concurrency == 0 || h.DurationSecs == 0 {
			bad("stream handshakes: concurrency %d and duration %d s must be at least 1", h.Concurrency, h.DurationSecs)
		}
		offset("handshakes", h.StartSecs)
		rate("handshakes", h.Rate)
	}
	if q := c.Requests; q != nil {
		if q.Connections == 0 || q.DurationSecs == 0 {
			bad("stream requests: connections %d and duration %d s must be at least 1", q.Connections, q.DurationSecs)
		}
		if err := checkOp("--request-op", q.Op); err != nil {
			bad("stream requests: %v", err)
		}
		offset("requests", q.StartSecs)
		rate("requests", q.Rate)
	}
	names := map[string]bool{}
	for _, r := range c.SourceRanges() {
		if !streamName().MatchString(r.Stream) {
			bad("stream name %q: use 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter", r.Stream)
		}
		if names[r.Stream] {
			bad("stream name %q is used twice", r.Stream)
		}
		names[r.Stream] = true
	}
	for i, w := range c.DDoS {
		if w.Sources == 0 || w.Concurrency == 0 {
			bad("stream %s: sources %d and concurrency %d must be at least 1", c.WaveName(i), w.Sources, w.Concurrency)
		}
		offset(c.WaveName(i), w.StartSecs)
	}
	if err := CheckSourceRanges(c.SourceRanges()); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return usagef("combined: %w", errors.Join(errs...))
	}
	return nil
}

// Sockets is the most sockets the run holds at once in total (for the worker count).
func (c CombinedConfig) Sockets() int64 {
	var n int64
	if h := c.Held; h != nil {
		n += int64(h.Count)
	}
	if h := c.Handshakes; h != nil {
		n += int64(h.Concurrency)
	}
	if q := c.Requests; q != nil {
		n += int64(q.Connections)
	}
	for _, w := range c.DDoS {
		n += int64(w.Concurrency)
	}
	return n
}

// SourceUses are the streams' source ranges with the sockets each holds open at once, for
// CheckSources: the held population and the request connections must all be open at once.
func (c CombinedConfig) SourceUses() []SourceUse {
	var out []SourceUse
	if h := c.Held; h != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamHeld, h.Sources.Base, max(h.Sources.Count, 1)}, Sockets: int64(h.Count), MustHold: true})
	}
	if h := c.Handshakes; h != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamHandshakes, h.Sources.Base, max(h.Sources.Count, 1)}, Sockets: int64(h.Concurrency)})
	}
	if q := c.Requests; q != nil {
		out = append(out, SourceUse{Range: SourceRange{linkkeysresult.StreamRequests, q.Sources.Base, max(q.Sources.Count, 1)}, Sockets: int64(q.Connections), MustHold: true})
	}
	for i, w := range c.DDoS {
		out = append(out, SourceUse{Range: SourceRange{c.WaveName(i), w.Base, w.Sources}, Sockets: int64(w.Concurrency)})
	}
	return out
}

// streamRun is one stream's outcome within a segment.
type streamRun struct {
	stream   linkkeysresult.Stream
	res      Result
	err      error
	survival *linkkeysresult.Survival
	lostAt   []int64 // held only: connections found closed, by interval from the run's start
}

func sleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t); d > 0 {
		sleepCtx(ctx, d)
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// runCombinedSegment runs the segment's share of every stream at once and merges their results.
func runCombinedSegment(ctx context.Context, cfg CombinedConfig, seg engine.Segment, debugOut io.Writer) (Result, error) {
	cpu0 := processCPU()
	ctx = withInterval(ctx, time.Second) // the streams' timelines line up by the second (assembleCombined)
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	sleepUntil(ctx, start)
	kernel0 := machine.ReadKernel()
	timeout := cfg.AttemptTimeout
	if timeout <= 0 {
		timeout = time.Duration(DefaultAttemptTimeoutSecs) * time.Second
	}
	ddosTimeout := cmpOr(cfg.DDoSTimeout, timeout)
	var runs []*streamRun
	var others, all sync.WaitGroup
	launch := func(sr *streamRun, other bool, at float64, body func() (Result, error)) {
		runs = append(runs, sr)
		sr.stream.StartSecs = at
		all.Add(1)
		if other {
			others.Add(1)
		}
		go func() {
			defer all.Done()
			if other {
				defer others.Done()
			}
			sleepUntil(ctx, start.Add(secs(at)))
			sr.res, sr.err = body()
		}()
	}
	if h := cfg.Handshakes; h != nil {
		hc := HandshakeConfig{Target: cfg.Target, DurationSecs: h.DurationSecs, Concurrency: h.Concurrency, AttemptTimeout: timeout,
			Sources: h.Sources, Resume: h.Resume, Rate: h.Rate}
		sr := &streamRun{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamHandshakes, Kind: CmdHandshakeBench, Params: hc.params()}}
		launch(sr, true, h.StartSecs, func() (Result, error) { return runHandshakeSegment(ctx, hc, seg, nil) })
	}
	if q := cfg.Requests; q != nil {
		rc := RequestConfig{Target: cfg.Target, Connections: q.Connections, DurationSecs: q.DurationSecs, Op: q.Op, Sources: q.Sources,
			AttemptTimeout: timeout, Pipeline: q.Pipeline, Rate: q.Rate}
		sr := &streamRun{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamRequests, Kind: CmdRequestBench, Params: rc.params()}}
		launch(sr, true, q.StartSecs, func() (Result, error) {
			conns, a := setupConnsTolerant(ctx, rc, seg)
			return driveRequests(ctx, rc, seg, conns, a, debugOut, nil, nil)
		})
	}
	for i, w := range cfg.DDoS {
		dc := DDoSConfig{Target: cfg.Target, Sources: w.Sources, Concurrency: w.Concurrency, AttemptTimeout: ddosTimeout, Base: w.Base}
		sr := &streamRun{stream: linkkeysresult.Stream{Name: cfg.WaveName(i), Kind: CmdDDoS, Params: dc.params()}}
		launch(sr, true, w.StartSecs, func() (Result, error) { return runDDoSSegment(ctx, dc, seg, nil, nil) })
	}
	othersDone := make(chan struct{})
	if h := cfg.Held; h != nil {
		cc := ConnectionsConfig{Target: cfg.Target, Count: h.Count, Concurrency: h.Concurrency, HoldSecs: h.HoldSecs, AttemptTimeout: timeout,
			Sources: h.Sources, Rate: h.Rate, KeepTLS: true} // how a lost connection ended needs its TLS state (howClosed)
		sr := &streamRun{stream: linkkeysresult.Stream{Name: linkkeysresult.StreamHeld, Kind: CmdConnections, Params: cc.params()}}
		launch(sr, false, h.StartSecs, func() (Result, error) {
			return runConnectionsSegment(ctx, cc, seg, nil, nil, func(ctx context.Context, held []net.Conn, _ <-chan struct{}) {
				sr.survival, sr.lostAt = holdAndWatch(ctx, held, start, time.Duration(h.HoldSecs)*time.Second, othersDone)
			})
		})
	}
	go func() { others.Wait(); close(othersDone) }()
	all.Wait()
	for _, sr := range runs {
		if sr.err != nil {
			return Result{}, errorf("combined: stream %s: %w", sr.stream.Name, sr.err)
		}
	}
	res, err := assembleCombined(cfg.Target, seg, start, runs)
	if err != nil {
		return Result{}, err
	}
	res.ClientCPU = Duration(processCPU() - cpu0)
	if len(res.Machines) == 1 {
		res.Machines[0].Run = judgeRun(machine.Delta(kernel0, machine.ReadKernel(), runtime.NumCPU()), res.Target)
	}
	if res.Stop == nil && ctx.Err() != nil {
		now := time.Now()
		res.Stop = &result.StopEvent{Reason: engine.StopSignal, ElapsedSecs: now.Sub(start).Seconds(), At: now.UTC().Format(time.RFC3339Nano)}
	}
	res.Finish()
	return res, nil
}

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// setupConnsTolerant opens the request stream's connections one after another, as request-bench
// does, but goes on past a failed one (counted in the attempts): in a combined run the other
// streams may exhaust a limiter the request stream's setup also passes, and the stream then runs
// over the connections it got.
func setupConnsTolerant(ctx context.Context, cfg RequestConfig, seg engine.Segment) ([]*tls.Conn, *Attempts) {
	start, count := seg.Range(int64(cfg.Connections))
	d := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	a := newAttempts()
	conns := make([]*tls.Conn, 0, count)
	for i := start; i < start+count && ctx.Err() == nil; i++ {
		t0 := time.Now()
		c, f := d.Dial(ctx, cfg.Sources.For(i), nil)
		recordAttempt(a, f, time.Since(t0))
		if f.Stage == StageNone {
			conns = append(conns, c)
		}
	}
	return conns, a
}

// holdAndWatch holds the established population until the other streams have ended and at least
// minHold has passed (or ctx ends), checking every second which connections the server closed,
// and returns the survival with the losses by interval from start.
func holdAndWatch(ctx context.Context, held []net.Conn, start time.Time, minHold time.Duration, othersDone <-chan struct{}) (*linkkeysresult.Survival, []int64) {
	began := time.Now()
	lost := make([]bool, len(held))
	var lostAt []int64
	scan := func(now time.Time) {
		i := int(now.Sub(start) / time.Second)
		for j, c := range held {
			if lost[j] || isEstablished(c) {
				continue
			}
			lost[j] = true
			for len(lostAt) <= i {
				lostAt = append(lostAt, 0)
			}
			lostAt[i]++
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	minimum := time.NewTimer(minHold)
	defer minimum.Stop()
	done, held0 := othersDone, minimum.C
wait:
	for done != nil || held0 != nil {
		select {
		case <-ctx.Done():
			break wait
		case <-done:
			done = nil
		case <-held0:
			held0 = nil
		case now := <-tick.C:
			scan(now)
		}
	}
	scan(time.Now())
	s := &linkkeysresult.Survival{Established: int64(len(held)), LostBy: map[string]int64{}, HeldSecs: time.Since(began).Seconds()}
	for j, c := range held {
		if !lost[j] {
			s.StillOpen++
			continue
		}
		s.LostBy[howClosed(c)]++
	}
	return s, lostAt
}

// isEstablished reports whether the connection's socket is still established (TCP state); where
// the state cannot be read it counts as established.
func isEstablished(c net.Conn) bool {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	est := true
	_ = raw.Control(func(fd uintptr) {
		if e, known := tcpEstablished(fd); known {
			est = e
		}
	})
	return est
}

// howClosed reads from a connection the server closed to see how it ended: "EOF" (a FIN, or a TLS
// close_notify), "ECONNRESET", "alert_…", or "data" when the server had sent something first. On
// a bare socket (no TLS state) the records cannot be read: only the end of stream or the error.
func howClosed(c net.Conn) string {
	if _, ok := c.(*tls.Conn); !ok {
		return howSocketClosed(c)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		return "data"
	}
	return Detail(err)
}

// howSocketClosed drains what a bare socket still holds (records it cannot decrypt) and names how
// the stream ended: "EOF" or the error's cause.
func howSocketClosed(c net.Conn) string {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return Detail(err)
		}
	}
}

// assembleCombined merges the streams' results into the segment's combined result.
func assembleCombined(t Target, seg engine.Segment, start time.Time, runs []*streamRun) (Result, error) {
	env := result.Envelope{Format: result.Format, Harness: linkkeysresult.Harness, Command: CmdCombined, Target: t.Addr.String(),
		IntervalSecs: time.Second.Seconds(), Totals: map[string]int64{}}
	env.StartedAt = start
	env.EndedAt = start
	out := Result{TargetInfo: t, Attempts: newAttempts(), Combined: &linkkeysresult.Combined{}}
	for _, sr := range runs {
		r := sr.res
		offset := 0
		if !r.StartedAt.IsZero() {
			offset = max(int(math.Round(r.StartedAt.Sub(start).Seconds())), 0)
		}
		pe := linkkeysresult.PrefixEnvelope(sr.stream.Name, &r.Envelope, offset)
		pe.Format, pe.Harness, pe.Command, pe.Segments, pe.Machines, pe.Flags = result.Format, linkkeysresult.Harness, CmdCombined, nil, nil, nil
		pe.StartedAt = start
		if err := env.Merge(&pe); err != nil {
			return Result{}, errorf("combined: %w", err)
		}
		if r.EndedAt.After(env.EndedAt) {
			env.EndedAt = r.EndedAt
		}
		if a := r.Attempts; a != nil {
			out.Attempts.Attempted += a.Attempted
			out.Attempts.Succeeded += a.Succeeded
			out.Attempts.Failed += a.Failed
			addCounts(out.Attempts.Classes, a.Classes)
			addCounts(out.Attempts.Reasons, a.Reasons)
			out.Attempts.Latency.Merge(a.Latency)
		}
		if out.Stop == nil && r.Stop != nil {
			s := *r.Stop
			out.Stop = &s
		}
		if sr.lostAt != nil {
			for len(env.Intervals) < len(sr.lostAt) {
				env.Intervals = appendInterval(env.Intervals)
			}
			for i, n := range sr.lostAt {
				if n == 0 {
					continue
				}
				if env.Intervals[i].Counters == nil {
					env.Intervals[i].Counters = map[string]int64{}
				}
				env.Intervals[i].Counters[linkkeysresult.Prefixed(sr.stream.Name, "lost")] += n
			}
		}
		st := sr.stream
		stream := r
		stream.Intervals, stream.Machines, stream.Flags = nil, nil, nil
		// The streams share one process: its CPU and RSS are the combined run's, not a stream's.
		stream.ClientCPU, stream.ServerCPU = 0, nil
		if h := stream.Hold; h != nil {
			hc := *h
			hc.RSSBaseline, hc.RSSHeld, hc.RSSBaselineSplit, hc.RSSHeldSplit = 0, 0, nil, nil
			stream.Hold = &hc
		}
		stream.Segments = []result.Segment{seg}
		st.Result = &stream
		st.Survival = sr.survival
		out.Combined.Streams = append(out.Combined.Streams, st)
	}
	for i := range out.Combined.Streams {
		s := &out.Combined.Streams[i]
		s.SourceFirst, s.SourceCount = sourceOf(s)
	}
	monotone(env.Intervals)
	out.Envelope = env
	out.Segments = []result.Segment{seg}
	out.Machines = append(out.Machines[:0:0], collectMachine())
	return out, nil
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// sourceOf reads a stream's source range back from its parameters.
func sourceOf(s *linkkeysresult.Stream) (string, uint32) {
	p := s.Params
	if s.Kind == CmdDDoS {
		return p.ClientIPBase, p.Sources
	}
	return p.ClientIPBase, max(p.ClientIPCount, 1)
}

// combinedSampler samples the server once a second from the run's start, prints a progress line
// every few seconds, and judges the live stop condition on every sample.
type combinedSampler struct {
	mu      sync.Mutex
	samples []timedSample
	stop    *result.StopEvent
	done    chan struct{}
	quit    chan struct{}
}

type timedSample struct {
	at time.Time
	m  map[string]float64
}

func (r *Run) startCombinedSampler(ctx context.Context, start time.Time, cancel context.CancelFunc) *combinedSampler {
	s := &combinedSampler{done: make(chan struct{}), quit: make(chan struct{})}
	read := serverSampler(r.Metrics)
	if read == nil && r.Stop == nil {
		close(s.done)
		return s
	}
	progress := r.stderr()
	go func() {
		defer close(s.done)
		sleepUntil(ctx, start)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.quit:
				return
			case now := <-tick.C:
				if read == nil {
					continue
				}
				sctx, c := context.WithTimeout(ctx, time.Second)
				m, err := read(sctx)
				c()
				if err != nil || m == nil {
					continue
				}
				s.mu.Lock()
				s.samples = append(s.samples, timedSample{now, m})
				s.mu.Unlock()
				n++
				if n%5 == 0 {
					fmt.Fprintf(progress, "  combined: t=%ds server open_connections=%.0f established_connections=%.0f accepted_connections=%.0f process_rss_bytes=%.0f\n",
						int(now.Sub(start).Seconds()), m["open_connections"], m["established_connections"], m["accepted_connections"], m["process_rss_bytes"])
				}
				if r.Stop != nil {
					if ev := r.Stop(now.Sub(start), m); ev != nil {
						if ev.ElapsedSecs == 0 {
							ev.ElapsedSecs = now.Sub(start).Seconds()
						}
						if ev.At == "" {
							ev.At = now.UTC().Format(time.RFC3339Nano)
						}
						s.mu.Lock()
						s.stop = ev
						s.mu.Unlock()
						cancel()
						return
					}
				}
			}
		}
	}()
	return s
}

// finish stops the sampler and returns its samples and the live stop event, if any.
func (s *combinedSampler) finish() ([]timedSample, *result.StopEvent) {
	select {
	case <-s.done:
	default:
		close(s.quit)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.stop
}

// attachSamples puts each sample in the interval it was taken in (the last one of an interval
// wins), from the run's start.
func attachSamples(res *Result, start time.Time, samples []timedSample) {
	for _, s := range samples {
		i := int(s.at.Sub(start) / time.Second)
		if i < 0 {
			continue
		}
		for len(res.Intervals) <= i {
			res.Intervals = appendInterval(res.Intervals)
		}
		res.Intervals[i].Server = s.m
	}
	monotone(res.Intervals)
}

// appendInterval adds an empty one-second interval after the last. Intervals are placed by index
// (one a second); under load an engine's ticks fall behind the wall clock, so the new one starts
// where the last one ends rather than at its index.
func appendInterval(ivs []result.Interval) []result.Interval {
	t := 0.0
	if n := len(ivs); n > 0 {
		t = ivs[n-1].T + max(ivs[n-1].Secs, 1)
	}
	return append(ivs, result.Interval{T: t, Secs: 1})
}

// monotone makes interval start times non-decreasing: streams merged by index may each have fallen
// behind the wall clock by a different amount.
func monotone(ivs []result.Interval) {
	for i := 1; i < len(ivs); i++ {
		if ivs[i].T < ivs[i-1].T {
			ivs[i].T = ivs[i-1].T
		}
	}
}

// Combined runs the combined command: header, every stream at once (in this process or fanned
// out), the server's accounting before and after (and per stream where the server reports
// counters per source prefix), the streams' DONE lines and the held population's survival.
//
// The run expects the server to count each stream's source range under the stream's name
// (TCP_SOURCE_PREFIXES=cfg.SourcePrefixes(); the capacity command starts its servers so): each
// stream then gets its own server accounting. A server that counts none of them, or not all, is
// still measured, with a line on stderr saying which streams' server figures are not attributed and
// the value that would attribute them.
func Combined(ctx context.Context, cfg CombinedConfig, r Run) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	out := r.stdout()
	WriteCombinedHeader(out, cfg)
	before, metricsErr := r.metricsBefore(ctx)
	if r.Metrics != nil && metricsErr == nil {
		if note := cfg.PrefixNote(before); note != "" {
			fmt.Fprintf(r.stderr(), "combined: %s\n", note)
		}
	}
	meter := r.startCPU(cfg.Target)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Worker processes need a moment to start: they begin their streams together at Start.
	delay := 50 * time.Millisecond
	if r.Workers > 1 {
		delay = min(time.Second+time.Duration(r.Workers)*200*time.Millisecond, 5*time.Second)
	}
	cfg.Start = time.Now().Add(delay)
	smp := r.startCombinedSampler(runCtx, cfg.Start, cancel)
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runCombinedSegment(runCtx, cfg, engine.Whole, r.stderr())
	} else {
		res, err = r.fanOut(runCtx, WorkerSpec{Command: CmdCombined, Combined: &cfg}, nil)
	}
	samples, live := smp.finish()
	if err != nil {
		return Result{}, err
	}
	attachSamples(&res, cfg.Start, samples)
	if live != nil {
		res.Stop = live
	}
	meter.stop(&res)
	r.stamp(&res)
	r.combinedAccounting(ctx, &res, before, metricsErr)
	WriteCombinedDone(out, res)
	return res, r.writeJSON(ctx, res)
}

// SourcePrefixes returns the TCP_SOURCE_PREFIXES value under which a server counts each stream's
// source range by the stream's name ("held=127.0.1.0/27,ddos-1=127.6.0.0-127.6.4.175"): a CIDR
// where the range is exactly one, else FIRST-LAST. It is "" for a configuration whose ranges wrap
// inside their /8 (Validate refuses those).
func (c CombinedConfig) SourcePrefixes() string {
	var parts []string
	for _, r := range c.SourceRanges() {
		first, n := uint32(r.First), uint64(max(r.Count, 1))
		if uint64(first&0xFFFFFF)+n > 1<<24 {
			return ""
		}
		last := IPv4(first + uint32(n-1))
		spec := r.First.String() + "-" + last.String()
		if n&(n-1) == 0 && uint64(first)%n == 0 {
			spec = fmt.Sprintf("%s/%d", r.First, 32-bitsLen(n-1))
		}
		parts = append(parts, r.Stream+"="+spec)
	}
	return strings.Join(parts, ",")
}

func bitsLen(v uint64) int {
	n := 0
	for ; v > 0; v >>= 1 {
		n++
	}
	return n
}

// PrefixNote says which of the configuration's streams a server reading counts no source prefix
// for ("" when it counts every one), and the TCP_SOURCE_PREFIXES value that would attribute them.
func (c CombinedConfig) PrefixNote(m linkkeys.MetricsLine) string {
	var missing []string
	for _, name := range c.CombinedNames() {
		if m.Source(name) == nil {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) == 0:
		return ""
	case len(m.Sources) == 0:
		return "the server counts no source prefix, so the streams' server figures are not attributed (only the whole run's); " +
			"start it with " + SourcePrefixesVar + "=" + c.SourcePrefixes() + " for each stream's own"
	}
	return fmt.Sprintf("the server counts source prefixes %s but not %s, whose server figures are not attributed; start it with %s=%s",
		strings.Join(m.SourceNames(), ", "), strings.Join(missing, ", "), SourcePrefixesVar, c.SourcePrefixes())
}

// SourcePrefixesVar is the server variable that names source prefixes (the reference server's
// TCP_SOURCE_PREFIXES).
const SourcePrefixesVar = "TCP_SOURCE_PREFIXES"

// combinedAccounting reads the server after the run: the whole run's accounting (every stream's
// connection attempts against the server's totals), the per-prefix accounting of each stream when
// the server counts the stream's source range under its name (Attribution "source-prefix"), and
// the server's close counters (every source's) for the held population's survival.
func (r *Run) combinedAccounting(ctx context.Context, res *Result, before linkkeys.MetricsLine, beforeErr error) {
	res.Combined.Attribution = "none"
	r.readAccounting(ctx, res, before, beforeErr)
	acc := res.Server
	if acc == nil || len(acc.Checks) == 0 {
		return
	}
	b, a := acc.Before, acc.After
	for i := range res.Combined.Streams {
		s := &res.Combined.Streams[i]
		if ss := StreamAccounting(s, b, a); ss != nil {
			res.Combined.Attribution = "source-prefix"
			s.Server = ss
		}
		if s.Survival != nil {
			// Every source's, as the survival records them; the held range's own closed_*
			// counters are in s.Server.Delta.
			s.Survival.ServerCloses = closeDeltas(b, a)
		}
	}
}

// PrefixField is the name of a server's per-source-prefix counter: source_<prefix>_<counter>.
func PrefixField(prefix, counter string) string { return linkkeys.SourceFieldName(prefix, counter) }

// prefixDeltas returns the changes of the server's counters of the prefix called name (every
// counter of linkkeys.SourceCounters, and source_<name>_* fields of other names a server appends),
// or nil when the server reports none for name.
func prefixDeltas(before, after linkkeys.MetricsLine, name string) map[string]int64 {
	var d map[string]int64
	if c := after.Source(name); c != nil {
		var b linkkeys.SourceCounters
		if bc := before.Source(name); bc != nil {
			b = *bc
		}
		d = map[string]int64{}
		for _, f := range linkkeys.SourceFields() {
			d[f.Name] = int64(f.Value(c)) - int64(f.Value(&b))
		}
	}
	p := PrefixField(name, "")
	for k, v := range after.Extra {
		c, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		if d == nil {
			d = map[string]int64{}
		}
		if _, known := d[c]; !known {
			d[c] = int64(v) - int64(before.Extra[k])
		}
	}
	return d
}

// closeDeltas returns the changes of the server's close counters: the closed_* fields of the
// METRICS line, and close_* or closed_* fields another server appends.
func closeDeltas(before, after linkkeys.MetricsLine) map[string]int64 {
	var d map[string]int64
	add := func(k string, a, b uint64) {
		if d == nil {
			d = map[string]int64{}
		}
		d[k] = int64(a) - int64(b)
	}
	for _, f := range linkkeys.MetricsFields() {
		if !strings.HasPrefix(f.Name, "closed_") {
			continue
		}
		av, aok := f.Value(&after)
		bv, _ := f.Value(&before)
		if aok {
			add(f.Name, av, bv)
		}
	}
	for k, v := range after.Extra {
		if strings.HasPrefix(k, "closed_") || strings.HasPrefix(k, "close_") {
			add(k, uint64(v), uint64(before.Extra[k]))
		}
	}
	return d
}

// StreamAccounting is a stream's own server accounting between two readings of a server that
// counts the stream's source range under the stream's name (see streamAccounting), or nil when
// the after reading has no such prefix.
func StreamAccounting(s *linkkeysresult.Stream, before, after linkkeys.MetricsLine) *linkkeysresult.StreamServer {
	d := prefixDeltas(before, after, s.Name)
	if d == nil {
		return nil
	}
	return streamAccounting(s, d)
}

// streamAccounting checks one stream's client counts against the server's counters of its prefix:
// attempts = accepted, attempts = admitted + shed, and (where the server counts them) successes =
// handshakes completed and failures = shed + handshake rejections + timeouts, as the whole run's
// accounting checks the server's totals.
func streamAccounting(s *linkkeysresult.Stream, d map[string]int64) *linkkeysresult.StreamServer {
	ss := &linkkeysresult.StreamServer{Prefix: s.Name, Delta: d}
	a := s.Result.Attempts
	if a == nil {
		a = newAttempts()
	}
	check := func(name string, client, server int64) {
		ss.Checks = append(ss.Checks, linkkeysresult.Check{Name: name, Client: client, Server: server, OK: client == server})
	}
	if v, ok := d["accepted"]; ok {
		check("attempts = server accepted", a.Attempted, v)
	}
	if v, ok := d["admitted"]; ok {
		check("attempts = server admitted + shed", a.Attempted, v+ss.Shed())
	}
	if v, ok := d["established"]; ok {
		check("established = server handshakes completed", a.Succeeded, v)
	}
	rej, rok := d["handshake_rejections"]
	tmo, tok := d["handshake_timeouts"]
	if rok && tok {
		check("failed = server shed + handshake rejections + timeouts", a.Failed, ss.Shed()+rej+tmo)
	}
	return ss
}

// CombinedNames lists the stream names of a configuration, in stream order.
func (c CombinedConfig) CombinedNames() []string {
	var out []string
	for _, r := range c.SourceRanges() {
		out = append(out, r.Stream)
	}
	return out
}
