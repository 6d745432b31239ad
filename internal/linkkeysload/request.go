package linkkeysload

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Request-bench operations.
const (
	OpDomainKeys = "domain-keys"
	OpHello      = "hello"
)

// LateThreshold is how far behind its intended time an open-model send may go before it counts as
// late.
const LateThreshold = time.Millisecond

// maxResponseFrame bounds a response frame. The seed's client sets no cap; we apply the server's
// own 1 MiB limit (a LinkKeys server refuses to write a larger frame), so a hostile peer cannot make
// the client allocate without bound. A larger announced frame is a decode error that ends the
// connection (an I/O error in the counts).
const maxResponseFrame = linkkeys.MaxFrameSize

// RequestConfig is the seed's request-bench command (docs/protocol-linkkeys.md, request-bench).
type RequestConfig struct {
	Target         Target        `json:"target"`
	Connections    uint32        `json:"connections"`
	DurationSecs   uint64        `json:"duration_secs"`
	Op             string        `json:"op"`
	Sources        SourceAddrs   `json:"sources"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	// Pipeline is how many requests each connection keeps in flight; 0 or 1 is the seed's one at a
	// time. Responses are matched to requests by order, as the protocol requires.
	Pipeline uint32 `json:"pipeline"`
	// Rate, when > 0, switches to the open model: requests are sent at this total rate across all
	// connections, and latency is measured from each request's intended send time.
	Rate float64 `json:"rate,omitempty"`
}

// RequestFrame returns the framed request of an op: the envelope encoded once with an empty map
// ({}) for domain-keys or {"name": null} for hello as the payload, plus its length prefix.
func RequestFrame(op string) ([]byte, error) {
	var req linkkeys.Request
	switch op {
	case OpDomainKeys:
		req = linkkeys.Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}
	case OpHello:
		req = linkkeys.Request{Service: "Hello", Op: "hello", Payload: []byte{0xa1, 0x64, 'n', 'a', 'm', 'e', 0xf6}}
	default:
		return nil, errorf("unknown --op %q: use %q or %q", op, OpDomainKeys, OpHello)
	}
	return linkkeys.AppendFrame(nil, linkkeys.AppendRequest(nil, &req)), nil
}

// SetupError is request-bench's failure to open one of its connections; the command then exits 1,
// as the seed does. Its text is the seed's.
type SetupError struct {
	Index   int64
	Failure Failure
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("failed to establish request-bench connection %d: %s", e.Index, e.Failure.Stage.RustName())
}

func (e *SetupError) Unwrap() error { return e.Failure.Err }

// connStats is one connection's tally, merged at the end (no sharing on the hot path).
type connStats struct {
	sent, completed, errors, ioErrors, decodeErrors, late int64
	statuses                                              map[linkkeys.Status]int64
	lat, uncorrected                                      *hist.Histogram
}

func newConnStats(open bool) *connStats {
	s := &connStats{statuses: map[linkkeys.Status]int64{}, lat: hist.New()}
	if open {
		s.uncorrected = hist.New()
	}
	return s
}

// sampler prints at most one DEBUG line per process, of whichever kind comes first, as the seed does.
type sampler struct {
	w    io.Writer
	done atomic.Bool
}

func (s *sampler) status(r *linkkeys.Response) {
	if s.done.Swap(true) {
		return
	}
	e := "None"
	if r.HasError {
		e = "Some(" + RustDebugString(r.Error) + ")"
	}
	fmt.Fprintf(s.w, "  DEBUG sample non-ok response: status=%s error=%s\n", r.Status, e)
}

func (s *sampler) decode(err error, n int) {
	if s.done.Swap(true) {
		return
	}
	fmt.Fprintf(s.w, "  DEBUG sample decode error: %v bytes_len=%d\n", err, n)
}

// handle accounts one response body.
func (s *connStats) handle(body []byte, smp *sampler) {
	r, err := linkkeys.DecodeResponse(body)
	switch {
	case err != nil:
		s.errors++
		s.decodeErrors++
		smp.decode(err, len(body))
	case r.Status == linkkeys.StatusOK:
		s.completed++
	default:
		s.errors++
		s.statuses[r.Status]++
		smp.status(&r)
	}
}

// setupConns opens the segment's connections one after another, as the seed does.
func setupConns(ctx context.Context, cfg RequestConfig, seg engine.Segment) ([]*tls.Conn, *Attempts, error) {
	start, count := seg.Range(int64(cfg.Connections))
	d := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	a := newAttempts()
	conns := make([]*tls.Conn, 0, count)
	sources := cfg.Sources.In(seg) // this segment's own addresses
	for i := start; i < start+count; i++ {
		t0 := time.Now()
		c, f := d.Dial(ctx, sources.For(i), nil)
		a.record(f, time.Since(t0))
		if f.Stage != StageNone {
			closeAll(conns)
			return nil, a, &SetupError{Index: i, Failure: f}
		}
		conns = append(conns, c)
	}
	return conns, a, nil
}

func runRequestSegment(ctx context.Context, cfg RequestConfig, seg engine.Segment, debugOut io.Writer) (Result, error) {
	conns, a, err := setupConns(ctx, cfg, seg)
	if err != nil {
		return Result{}, err
	}
	return driveRequests(ctx, cfg, seg, conns, a, debugOut, nil)
}

// driveRequests runs the timed phase over established connections and closes them.
func driveRequests(ctx context.Context, cfg RequestConfig, seg engine.Segment, conns []*tls.Conn, a *Attempts, debugOut io.Writer, established func(n int64)) (Result, error) {
	frame, err := RequestFrame(cfg.Op)
	if err != nil {
		closeAll(conns)
		return Result{}, err
	}
	if established != nil {
		established(int64(len(conns)))
	}
	cpu0 := processCPU()
	smp := &sampler{w: debugOut}
	k := int(max(cfg.Pipeline, 1))
	open := cfg.Rate > 0
	dur := time.Duration(cfg.DurationSecs) * time.Second
	began := time.Now()
	deadline := began.Add(dur)
	// Reads after the deadline (draining pipelined answers) are bounded too.
	drainBy := deadline.Add(max(cfg.AttemptTimeout, time.Second))

	stats := make([]*connStats, len(conns))
	var wg sync.WaitGroup
	var tickets <-chan engine.Ticket
	var due int64
	if open {
		rate := seg.Rate(cfg.Rate)
		phase := seg.Offset()
		sctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		tickets = engine.Schedule(sctx, began, engine.ConstantPacer{PerSecond: rate, Phase: phase}, 0, dur)
		due = int64(math.Max(0, math.Ceil(dur.Seconds()*rate-phase)))
	}
	for i, c := range conns {
		s := newConnStats(open)
		stats[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case open:
				openLoop(ctx, c, frame, k, tickets, began, drainBy, s, smp)
			case k == 1:
				closedLoop(ctx, c, frame, deadline, s, smp)
			default:
				pipelinedLoop(ctx, c, frame, k, deadline, drainBy, s, smp)
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	closeAll(conns)

	q := &Requests{Op: cfg.Op, Connections: int64(len(conns)), DurationSecs: cfg.DurationSecs, Pipeline: int64(k),
		Statuses: map[string]int64{}, Latency: hist.New(), LateThreshold: Duration(LateThreshold)}
	if open {
		q.TargetRate = seg.Rate(cfg.Rate)
		q.Uncorrected = hist.New()
	}
	for _, s := range stats {
		q.Sent += s.sent
		q.Completed += s.completed
		q.Errors += s.errors
		q.IOErrors += s.ioErrors
		q.DecodeErrors += s.decodeErrors
		q.LateSends += s.late
		for st, n := range s.statuses {
			q.Statuses[st.String()] += n
		}
		q.Latency.Merge(s.lat)
		if open {
			q.Uncorrected.Merge(s.uncorrected)
		}
	}
	if open && due > q.Sent {
		q.Unsent = due - q.Sent
	}
	r := Result{Command: CmdRequestBench, Target: cfg.Target, Start: began, End: end, Segments: []engine.Segment{seg}, Attempts: a, Requests: q,
		ClientCPU: Duration(processCPU() - cpu0)}
	r.finish()
	return r, nil
}

// readResponse reads one framed response into buf (reused when large enough).
func readResponse(br *bufio.Reader, buf []byte) ([]byte, error) {
	return linkkeys.ReadFrame(br, maxResponseFrame, buf)
}

// closedLoop is the seed's loop: one request in flight, write then read, until the deadline. An I/O
// error counts once and ends the connection's loop.
func closedLoop(ctx context.Context, c *tls.Conn, frame []byte, deadline time.Time, s *connStats, smp *sampler) {
	br := bufio.NewReaderSize(c, 4096)
	buf := make([]byte, 0, 1024)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return
		}
		if _, err := c.Write(frame); err != nil {
			s.errors++
			s.ioErrors++
			return
		}
		s.sent++
		body, err := readResponse(br, buf)
		if err != nil {
			s.errors++
			s.ioErrors++
			return
		}
		s.lat.Record(time.Since(t0))
		if cap(body) > cap(buf) {
			buf = body[:0]
		}
		s.handle(body, smp)
	}
}

// pipelinedLoop keeps k requests in flight: a writer takes as many free slots as there are and
// sends that many frames in one write (so one TLS record carries the batch), and the reader matches
// each answer to the oldest outstanding send time, freeing its slot only once the answer is read.
func pipelinedLoop(ctx context.Context, c *tls.Conn, frame []byte, k int, deadline, drainBy time.Time, s *connStats, smp *sampler) {
	batch := make([]byte, 0, k*len(frame))
	for range k {
		batch = append(batch, frame...)
	}
	slots := make(chan struct{}, k)
	times := make(chan time.Time, k)
	var failed atomic.Bool
	var sent int64
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	go func() {
		defer close(times)
		for {
			slots <- struct{}{} // waits for a free slot
			now := time.Now()
			if !now.Before(deadline) || failed.Load() {
				return
			}
			m := 1
		fill:
			for m < k {
				select {
				case slots <- struct{}{}:
					m++
				default:
					break fill
				}
			}
			for range m {
				times <- now
			}
			if _, err := c.Write(batch[:m*len(frame)]); err != nil {
				failed.Store(true)
				_ = c.SetReadDeadline(time.Unix(1, 0))
				return
			}
			sent += int64(m)
		}
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	buf := make([]byte, 0, 1024)
	_ = c.SetReadDeadline(drainBy)
	ioFailed := false
	for t0 := range times {
		if ioFailed || failed.Load() {
			ioFailed = true
			<-slots
			continue // drain the writer's channel
		}
		body, err := readResponse(br, buf)
		<-slots
		if err != nil {
			ioFailed = true
			failed.Store(true)
			continue
		}
		s.lat.Record(time.Since(t0))
		if cap(body) > cap(buf) {
			buf = body[:0]
		}
		s.handle(body, smp)
	}
	// The writer has exited (times is closed), so sent is final.
	s.sent += sent
	if ioFailed || failed.Load() {
		s.ioErrors++
		s.errors++
	}
}

// openSend is one open-model request in flight: when it was meant to go and when it went.
type openSend struct {
	intended, actual time.Time
}

// openLoop serves tickets of the open-model schedule on one connection with up to k in flight. A
// slot is taken before a ticket, so a busy connection leaves tickets to idle ones; a ticket that no
// connection can take in time is sent late and its latency still counts from the intended time.
func openLoop(ctx context.Context, c *tls.Conn, frame []byte, k int, tickets <-chan engine.Ticket, began, drainBy time.Time, s *connStats, smp *sampler) {
	batch := make([]byte, 0, k*len(frame))
	for range k {
		batch = append(batch, frame...)
	}
	slots := make(chan struct{}, k)
	inflight := make(chan openSend, k)
	var failed atomic.Bool
	var sent, late int64
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	go func() {
		defer close(inflight)
		pending := make([]time.Time, 0, k)
		for {
			slots <- struct{}{}
			tk, ok := <-tickets
			if !ok || failed.Load() {
				return
			}
			m := 1
			pending = append(pending[:0], tk.Intended)
		more:
			for m < k {
				select {
				case slots <- struct{}{}:
					select {
					case tk2, ok2 := <-tickets:
						if !ok2 {
							<-slots
							break more
						}
						pending = append(pending, tk2.Intended)
						m++
					default:
						<-slots
						break more
					}
				default:
					break more
				}
			}
			now := time.Now()
			for _, in := range pending {
				inflight <- openSend{intended: in, actual: now}
				if now.Sub(in) > LateThreshold {
					late++
				}
			}
			if _, err := c.Write(batch[:m*len(frame)]); err != nil {
				failed.Store(true)
				_ = c.SetReadDeadline(time.Unix(1, 0))
				return
			}
			sent += int64(m)
		}
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	buf := make([]byte, 0, 1024)
	_ = c.SetReadDeadline(drainBy)
	for snd := range inflight {
		if failed.Load() {
			<-slots
			continue
		}
		body, err := readResponse(br, buf)
		<-slots
		if err != nil {
			failed.Store(true)
			continue
		}
		now := time.Now()
		s.lat.Record(now.Sub(snd.intended))
		s.uncorrected.Record(now.Sub(snd.actual))
		if cap(body) > cap(buf) {
			buf = body[:0]
		}
		s.handle(body, smp)
	}
	// The writer has exited (inflight is closed), so its counters are final.
	s.sent += sent
	s.late += late
	if failed.Load() {
		s.ioErrors++
		s.errors++
	}
}

// RequestBench runs the request-bench command: header, connection setup, the timed phase (in this
// process or fanned out), DONE lines.
func RequestBench(ctx context.Context, cfg RequestConfig, r Run) (Result, error) {
	out := r.stdout()
	if _, err := RequestFrame(cfg.Op); err != nil {
		return Result{}, err
	}
	WriteRequestHeader(out, cfg)
	meter := r.startCPU(cfg.Target)
	var res Result
	var err error
	if r.Workers <= 1 {
		var conns []*tls.Conn
		var a *Attempts
		conns, a, err = setupConns(ctx, cfg, r.seg())
		if err != nil {
			return Result{}, err
		}
		res, err = driveRequests(ctx, cfg, r.seg(), conns, a, r.stderr(), func(n int64) { WriteRequestEstablished(out, n) })
	} else {
		// Workers set up their own connections; the line reports the total once all are done.
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdRequestBench, Requests: &cfg}, nil)
		if err == nil && res.Attempts != nil {
			WriteRequestEstablished(out, res.Attempts.Succeeded)
		}
	}
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res, cfg.Target)
	WriteRequestDone(out, cfg, res)
	return res, r.writeJSON(res)
}
