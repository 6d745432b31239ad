package linkkeysload

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
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
	// DebugSample prints the seed's one DEBUG sample of a non-ok answer or a decode error (-v);
	// off, the line is not printed.
	DebugSample bool `json:"debug_sample,omitempty"`
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
		e = "Some(" + linkkeysresult.RustDebugString(r.Error) + ")"
	}
	fmt.Fprintf(s.w, "  DEBUG sample non-ok response: status=%s error=%s\n", r.Status, e)
}

func (s *sampler) decode(err error, n int) {
	if s.done.Swap(true) {
		return
	}
	fmt.Fprintf(s.w, "  DEBUG sample decode error: %v bytes_len=%d\n", err, n)
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
		recordAttempt(a, f, time.Since(t0))
		if f.Stage != StageNone {
			closeAll(conns)
			return nil, a, &SetupError{Index: i, Failure: f}
		}
		conns = append(conns, c)
	}
	return conns, a, nil
}

// The timed phase runs through engine.Execute with one of three drivers, each returning one
// request's outcome per call (linkkeysresult.RequestClasses; the causes name the status or the I/O
// error):
//
//   - pipeline 1, either model: a worker owns one connection and writes a request, then reads its
//     answer (the seed's loop; in the open model one send per ticket).
//   - pipeline K, closed model: a worker owns one connection and keeps K requests in flight. When it
//     would otherwise block on a read, it tops the window up with one write of every missing frame
//     (one TLS record for the batch), then returns the oldest answer; at the end it drains what is in
//     flight (engine.Worker.Pending). No goroutine hand-off sits between a send and its answer.
//   - pipeline K, open model: K workers share each connection; a worker writes its ticket's request
//     under the connection's write lock and waits for its answer, which the connection's reader
//     matches by order (the protocol answers in order).
//
// An I/O error ends the connection and counts once for it, as the seed counts it; the connection's
// workers retire.

// Request outcome classes, as indexes into linkkeysresult.RequestClasses.
const (
	classOK uint8 = iota
	classStatus
	classDecode
	classIO
)

// reqConn is one persistent connection of the timed phase.
type reqConn struct {
	c   *tls.Conn
	br  *bufio.Reader
	buf []byte
	// sent counts requests written.
	sent atomic.Int64
	// counted is set once the connection's I/O error has been counted.
	counted atomic.Bool

	// Window driver: the send times of the requests in flight, oldest at head (a ring of K).
	times []time.Time
	head  int

	// Shared driver: writes are serialised and each writer queues its waiter, in write order, for
	// the reader; failed is set once the connection is broken.
	wmu     sync.Mutex
	waiting chan *waiter
	failed  atomic.Bool
}

// waiter is a shared-driver worker waiting for its answer.
type waiter struct{ done chan engine.Outcome }

func newReqConn(c *tls.Conn, k int, shared bool) *reqConn {
	rc := &reqConn{c: c, br: bufio.NewReaderSize(c, 16<<10), buf: make([]byte, 0, 1024)}
	if k > 1 && !shared {
		rc.times = make([]time.Time, k)
	}
	if shared {
		rc.waiting = make(chan *waiter, k)
	}
	return rc
}

// read reads the next answer into the connection's buffer.
func (rc *reqConn) read() ([]byte, error) {
	body, err := readResponse(rc.br, rc.buf)
	if cap(body) > cap(rc.buf) {
		rc.buf = body[:0]
	}
	return body, err
}

// frameBuffered reports whether a whole answer is already buffered, so reading it will not block.
func (rc *reqConn) frameBuffered() bool {
	n := rc.br.Buffered()
	if n < 4 {
		return false
	}
	p, _ := rc.br.Peek(4)
	return n-4 >= int(binary.BigEndian.Uint32(p))
}

// requests is what the three drivers share: the connections, the frame, the outcome of an answer.
type requests struct {
	conns []*reqConn
	frame []byte
	smp   *sampler
}

// outcome classifies one answer, printing the process's one DEBUG sample of a non-zero status or a
// decode error.
func (q *requests) outcome(body []byte) engine.Outcome {
	r, err := linkkeys.DecodeResponse(body)
	switch {
	case err != nil:
		q.smp.decode(err, len(body))
		return engine.Outcome{Class: classDecode}
	case r.Status == linkkeys.StatusOK:
		return engine.Outcome{}
	default:
		q.smp.status(&r)
		return engine.Outcome{Class: classStatus, Cause: statusCause(r.Status)}
	}
}

// lost is the outcome of a request whose connection failed: the first one counts the connection's
// I/O error, later ones are not counted; a cut-off run (ctx ended) counts none of them.
func (q *requests) lost(ctx context.Context, rc *reqConn, err error) engine.Outcome {
	if ctx.Err() != nil || !rc.counted.CompareAndSwap(false, true) {
		return engine.Outcome{Skip: true, Retire: true}
	}
	return engine.Outcome{Class: classIO, Cause: linkkeysresult.ClassIO + ":" + Detail(err), Retire: true}
}

// statusCauses holds the cause string of each status seen, so an error answer allocates nothing.
var statusCauses sync.Map // linkkeys.Status -> string

func statusCause(st linkkeys.Status) string {
	if v, ok := statusCauses.Load(st); ok {
		return v.(string)
	}
	v, _ := statusCauses.LoadOrStore(st, linkkeysresult.CauseStatus+st.String())
	return v.(string)
}

// syncDriver is pipeline 1: write, then read, on the worker's own connection.
type syncDriver struct{ *requests }

func (d syncDriver) Do(ctx context.Context, w *engine.Worker, _ int64) engine.Outcome {
	rc := d.conns[w.ID]
	if _, err := rc.c.Write(d.frame); err != nil {
		return d.lost(ctx, rc, err)
	}
	rc.sent.Add(1)
	body, err := rc.read()
	if err != nil {
		return d.lost(ctx, rc, err)
	}
	return d.outcome(body)
}

// windowDriver is pipeline K in the closed model: K requests in flight on the worker's own
// connection, one answer returned per call.
type windowDriver struct {
	*requests
	k     int
	batch []byte // k frames
}

func (d windowDriver) Do(ctx context.Context, w *engine.Worker, _ int64) engine.Outcome {
	rc := d.conns[w.ID]
	if w.Pending < d.k && !w.Ending() && (w.Pending == 0 || !rc.frameBuffered()) {
		m := d.k - w.Pending
		now := time.Now()
		if _, err := rc.c.Write(d.batch[:m*len(d.frame)]); err != nil {
			w.Pending = 0
			return d.lost(ctx, rc, err)
		}
		rc.sent.Add(int64(m))
		for i := range m {
			rc.times[(rc.head+w.Pending+i)%d.k] = now
		}
		w.Pending += m
	}
	if w.Pending == 0 {
		return engine.Outcome{Skip: true} // the run ended before this call started anything
	}
	body, err := rc.read()
	sentAt := rc.times[rc.head]
	rc.head = (rc.head + 1) % d.k
	w.Pending--
	if err != nil {
		w.Pending = 0
		return d.lost(ctx, rc, err)
	}
	out := d.outcome(body)
	out.Took = max(time.Since(sentAt), 1)
	return out
}

// sharedDriver is pipeline K in the open model: K workers per connection.
type sharedDriver struct{ *requests }

func (d sharedDriver) Do(ctx context.Context, w *engine.Worker, _ int64) engine.Outcome {
	rc := d.conns[w.ID%len(d.conns)]
	wt := w.State.(*waiter)
	rc.wmu.Lock()
	if rc.failed.Load() {
		rc.wmu.Unlock()
		return engine.Outcome{Skip: true, Retire: true}
	}
	rc.waiting <- wt // never blocks: K workers per connection, each waits for one answer
	_, err := rc.c.Write(d.frame)
	rc.wmu.Unlock()
	if err != nil {
		// The reader fails the waiters in order, this one included.
		rc.failed.Store(true)
		_ = rc.c.SetReadDeadline(time.Unix(1, 0))
	} else {
		rc.sent.Add(1)
	}
	out := <-wt.done
	if out.Retire && ctx.Err() != nil {
		return engine.Outcome{Skip: true, Retire: true}
	}
	return out
}

// reader answers the connection's waiters in order until the channel closes.
func (d sharedDriver) reader(ctx context.Context, rc *reqConn) {
	for wt := range rc.waiting {
		if rc.failed.Load() {
			wt.done <- d.lost(ctx, rc, errConnectionFailed)
			continue
		}
		body, err := rc.read()
		if err != nil {
			rc.failed.Store(true)
			wt.done <- d.lost(ctx, rc, err)
			continue
		}
		wt.done <- d.outcome(body)
	}
}

// errConnectionFailed stands for the I/O error of a connection another request already saw fail.
var errConnectionFailed = errors.New("connection failed")

func runRequestSegment(ctx context.Context, cfg RequestConfig, seg engine.Segment, debugOut io.Writer, sample *MetricsSource) (Result, error) {
	conns, a, err := setupConns(ctx, cfg, seg)
	if err != nil {
		return Result{}, err
	}
	return driveRequests(ctx, cfg, seg, conns, a, debugOut, sample, nil)
}

// driveRequests runs the timed phase over established connections and closes them.
func driveRequests(ctx context.Context, cfg RequestConfig, seg engine.Segment, tlsConns []*tls.Conn, a *Attempts, debugOut io.Writer,
	sample *MetricsSource, established func(n int64)) (Result, error) {
	w, err := prepareRequests(ctx, cfg, seg, tlsConns, a, debugOut, sample, established)
	if err != nil {
		return Result{}, err
	}
	return w.execute(ctx)
}

// prepareRequests is driveRequests' workload: its readers (shared connections) start at once and
// run under ctx, and its result closes the connections.
func prepareRequests(ctx context.Context, cfg RequestConfig, seg engine.Segment, tlsConns []*tls.Conn, a *Attempts, debugOut io.Writer,
	sample *MetricsSource, established func(n int64)) (workload, error) {
	frame, err := RequestFrame(cfg.Op)
	if err != nil {
		closeAll(tlsConns)
		return workload{}, err
	}
	if established != nil {
		established(int64(len(tlsConns)))
	}
	cpu0 := processCPU()
	k := int(max(cfg.Pipeline, 1))
	open := cfg.Rate > 0
	shared := open && k > 1
	dur := time.Duration(cfg.DurationSecs) * time.Second
	if !cfg.DebugSample || debugOut == nil {
		debugOut = io.Discard
	}
	q := &requests{frame: frame, smp: &sampler{w: debugOut}}
	for _, c := range tlsConns {
		q.conns = append(q.conns, newReqConn(c, k, shared))
	}
	// Reads after the end (draining answers in flight) are bounded in every loop: an answer still
	// missing AttemptTimeout (at least 1 s) after the duration is an I/O error on its connection
	// (io_error:timeout), so a server that stops answering (stopped, or behind a black hole) cannot
	// hold the run open. The seed's one-at-a-time loop sets no read deadline and waits forever.
	drainBy := time.Now().Add(dur + max(cfg.AttemptTimeout, time.Second))
	for _, c := range tlsConns {
		_ = c.SetReadDeadline(drainBy)
	}
	ec := engine.Config{Classes: linkkeysresult.RequestClasses, Kinds: []string{linkkeysresult.KindRequest},
		Workers: len(q.conns), Duration: dur, LateThreshold: LateThreshold, Sample: serverSampler(sample),
		OnCutOff: func() {
			for _, c := range tlsConns {
				_ = c.SetDeadline(time.Unix(1, 0))
			}
		}}
	if open {
		ec.Rate, ec.Phase = seg.Rate(cfg.Rate), seg.Offset()
	}
	var readers sync.WaitGroup
	switch {
	case shared:
		d := sharedDriver{q}
		ec.Driver, ec.Workers = d, len(q.conns)*k
		ec.NewState = func(int) any { return &waiter{done: make(chan engine.Outcome, 1)} }
		for _, rc := range q.conns {
			readers.Go(func() { d.reader(ctx, rc) })
		}
	case k > 1:
		batch := make([]byte, 0, k*len(frame))
		for range k {
			batch = append(batch, frame...)
		}
		ec.Driver = windowDriver{requests: q, k: k, batch: batch}
	default:
		ec.Driver = syncDriver{q}
	}
	return workload{cfg: ec, nothing: len(q.conns) == 0 || dur <= 0, finish: func(run *engine.Run) (Result, error) {
		for _, rc := range q.conns {
			if rc.waiting != nil {
				close(rc.waiting)
			}
		}
		readers.Wait()
		closeAll(tlsConns)
		end := time.Now()
		tot := run.Envelope.Totals
		rq := &Requests{Op: cfg.Op, Connections: int64(len(q.conns)), DurationSecs: cfg.DurationSecs, Pipeline: int64(k),
			Completed: tot[linkkeysresult.RequestClasses[classOK]], IOErrors: tot[linkkeysresult.ClassIO], DecodeErrors: tot[linkkeysresult.ClassDecode],
			Statuses: linkkeysresult.Statuses(run.Causes), Latency: cloneHist(run.Histograms[linkkeysresult.KindRequest]),
			LateThreshold: Duration(LateThreshold)}
		rq.Errors = run.Total() - rq.Completed
		for _, rc := range q.conns {
			rq.Sent += rc.sent.Load()
		}
		if open {
			rq.TargetRate = seg.Rate(cfg.Rate)
			rq.Uncorrected = cloneHist(run.Histograms[linkkeysresult.KindUncorrected])
			rq.LateSends = run.Open.Late
			rq.Unsent = max(run.Open.Scheduled-rq.Sent, 0)
		}
		r := segmentResult(CmdRequestBench, cfg.Target, seg, run)
		r.EndedAt = end
		r.Attempts = a
		r.Requests = rq
		r.ClientCPU = Duration(processCPU() - cpu0)
		r.Finish()
		return r, nil
	}}, nil
}

// readResponse reads one framed response into buf (reused when large enough).
func readResponse(br *bufio.Reader, buf []byte) ([]byte, error) {
	return linkkeys.ReadFrame(br, maxResponseFrame, buf)
}

// RequestBench runs the request-bench command: header, connection setup, the timed phase (in this
// process or fanned out), DONE lines, and, when the server's METRICS are reachable, its accounting
// next to the client's: the setup connections, and the answers its public-read limiter refused
// (which the client counts by their Unavailable status, refused by design apart from failures).
func RequestBench(ctx context.Context, cfg RequestConfig, r Run) (Result, error) {
	out := r.stdout()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	WriteRequestHeader(out, cfg)
	before, metricsErr := r.metricsBeforeOf(ctx, cfg.Target)
	if metricsErr == nil && r.Metrics != nil && r.OnServerBefore != nil {
		r.OnServerBefore(before)
	}
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
		res, err = driveRequests(ctx, cfg, r.seg(), conns, a, r.stderr(), r.Metrics, func(n int64) { WriteRequestEstablished(out, n) })
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
	r.stamp(&res)
	WriteRequestDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	res.Refused = res.Refusals()
	WriteHeadline(out, res)
	return res, r.writeJSON(ctx, res)
}
