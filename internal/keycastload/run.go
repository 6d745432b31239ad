package keycastload

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
)

// Stop reasons recorded in Results.Stop.
const (
	StopSignal        = "signal"
	StopCondition     = "stop-condition"
	MetricUnintErrors = "unintentional_error_rate"
	MetricLatencyP95  = "latency_p95_ms"
)

// Run executes one run. It returns results even when ctx ends early (partial, with Stop.Reason
// "signal") or a stop condition breaches (Stop.Reason "stop-condition" with metric, observed,
// limit and time). An error is returned only when the run could not be carried out: a bad
// configuration, no users, or a target that cannot be reached before any request.
func Run(ctx context.Context, cfg RunConfig) (*keycastresult.Results, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	t, err := parseTarget(cfg.URL)
	if err != nil {
		return nil, err
	}
	cfg.URL = t.base
	r := newRunner(cfg, t)
	if r.httpTLS, err = r.configureTLS(); err != nil { // tls.go
		return nil, err
	}

	// The target must answer before the run counts anything: a run against nothing is not a run.
	probeCtx, cancel := context.WithTimeout(ctx, min(cfg.HTTPTimeout, 10*time.Second))
	c, err := t.dial(probeCtx, cfg.HTTPTimeout)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("keycastload: target %s cannot be reached: %w; start the server or check --url", t.base, err)
	}
	c.close()

	log := cfg.Logger
	before, seriesBefore, errBefore := fetchServerMetrics(ctx, r.metricsClient(), cfg.URL)
	if errBefore != nil {
		log.Warn("Failed to fetch server metrics before the run; the results will carry no server snapshot", "err", errBefore)
	} else {
		log.Info(metricsLine("before", before))
	}

	res := r.run(ctx)
	splitConnectCauses(res)
	res.Metadata.TLS = cfg.TLS.Record()
	if errBefore != nil {
		return res, nil // no snapshot to pair with: spare a dead metrics endpoint its second timeout
	}

	after, seriesAfter, errAfter := fetchServerMetrics(context.WithoutCancel(ctx), r.metricsClient(), cfg.URL)
	switch {
	case errAfter != nil:
		log.Warn("Failed to fetch server metrics after the run; the results will carry no server snapshot", "err", errAfter)
	case errBefore == nil:
		log.Info(metricsLine("after", after))
		res.ServerMetrics = Snapshots(before, after, seriesBefore, seriesAfter)
	}
	return res, nil
}

// runner is the state of one run.
type runner struct {
	cfg     RunConfig
	t       *target
	open    bool
	seg     engine.Segment
	workers int
	limit   int64 // requests for this segment; meaningful when limited
	limited bool

	clients []atomic.Pointer[userClient]
	shards  []shard

	tickets atomic.Int64  // closed model: next local request number
	ending  atomic.Bool   // no new requests (deadline, stop, signal)
	endCh   chan struct{} // closed with ending set, for workers still waiting to start
	endOnce sync.Once
	aborted atomic.Bool // in-flight requests are being cut off (stop, signal)
	abort   context.CancelFunc
	runCtx  context.Context
	wks     []*worker

	stopMu sync.Mutex
	stop   *keycastresult.StopEvent
	start  time.Time

	failLogged atomic.Int32
	staticBody []byte
	runID      string      // register method: part of every email
	httpTLS    *tls.Config // the net/http clients' TLS configuration (tls.go)
}

func newRunner(cfg RunConfig, t *target) *runner {
	seg := cfg.Segment
	if seg.Count == 0 {
		seg = engine.Whole
	}
	r := &runner{cfg: cfg, t: t, open: cfg.Rate > 0, seg: seg, runID: newRunID(time.Now()), endCh: make(chan struct{})}
	r.workers = int(max(seg.Share(int64(cfg.Concurrency)), 1))
	if cfg.Requests > 0 {
		r.limited = true
		r.limit = seg.Share(cfg.Requests)
	}
	r.clients = make([]atomic.Pointer[userClient], len(cfg.Users))
	r.shards = make([]shard, min(r.workers, max(4, 4*runtime.GOMAXPROCS(0))))
	for i := range r.shards {
		r.shards[i].cur = newStats(r.open)
	}
	if cfg.Method == keycast.MethodGetPublicKey {
		r.staticBody, _ = keycast.AppendRPCBody(nil, cfg.Method, "", 0, "")
	}
	return r
}

// globalNum maps a local request number to the run-wide one (segments interleave).
func (r *runner) globalNum(local int64) uint64 {
	return uint64(local)*uint64(r.seg.Count) + uint64(r.seg.Index)
}

func (r *runner) client(i int) *userClient {
	if c := r.clients[i].Load(); c != nil {
		return c
	}
	c := newUserClient(r.t, keycast.PathNostr, r.cfg.Users[i].UcanToken)
	if r.clients[i].CompareAndSwap(nil, c) {
		return c
	}
	return r.clients[i].Load()
}

// worker is one request loop's scratch state.
type worker struct {
	id     int
	shard  *shard
	req    []byte
	body   []byte
	resp   []byte
	active atomic.Pointer[conn]
	rng    *rand.Rand
	hexbuf [64]byte
	delay  backoff // after failed connects (connect.go)
}

// setStop records the first reason the run ended early and cuts off in-flight requests.
func (r *runner) setStop(ev keycastresult.StopEvent) {
	r.stopMu.Lock()
	first := r.stop == nil
	if first {
		r.stop = &ev
	}
	r.stopMu.Unlock()
	if first {
		r.cutOff()
	}
}

// end stops new requests; those in flight finish.
func (r *runner) end() {
	r.ending.Store(true)
	r.endOnce.Do(func() { close(r.endCh) })
}

// cutOff stops new requests and interrupts those in flight; their outcome is unknown, so they are
// not counted.
func (r *runner) cutOff() {
	r.end()
	r.aborted.Store(true)
	r.abort()
	past := time.Unix(1, 0)
	for _, wk := range r.wks {
		if c := wk.active.Load(); c != nil {
			_ = c.nc.SetDeadline(past)
		}
	}
}

func (r *runner) run(ctx context.Context) *keycastresult.Results {
	cfg := r.cfg
	r.runCtx, r.abort = context.WithCancel(context.WithoutCancel(ctx))
	defer r.abort()
	r.wks = make([]*worker, r.workers)
	for i := range r.wks {
		r.wks[i] = &worker{
			id:    i,
			shard: &r.shards[i%len(r.shards)],
			rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)),
		}
	}

	total := newStats(r.open)
	var win *window
	if cfg.Stop != nil {
		win = newWindow(int(math.Ceil(cfg.Stop.Window.Seconds())))
	}
	spare := newStats(r.open)
	collect := func() {
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			s := sh.cur
			sh.cur = spare
			sh.mu.Unlock()
			s.mergeInto(total)
			if win != nil {
				win.add(s)
			}
			s.reset()
			spare = s
		}
	}
	var timeline []keycastresult.TimelinePoint
	point := func(now time.Time) {
		c := total.counts
		el := now.Sub(r.start).Seconds()
		p50, p99 := ms(total.lat.Quantile(0.50)), ms(total.lat.Quantile(0.99))
		timeline = append(timeline, keycastresult.TimelinePoint{
			ElapsedSecs: el, RequestsTotal: c.Total, RequestsSuccess: c.Success, RequestsError: c.Failed,
			LatencyP50Ms: p50, LatencyP99Ms: p99,
		})
	}
	progress := func(now time.Time) {
		c := total.counts
		el := now.Sub(r.start).Seconds()
		rps := 0.0
		if el > 0 {
			rps = float64(c.Total) / el
		}
		fmt.Fprintf(cfg.Progress, "Progress: %d req, %.1f req/s, p50=%.1fms, p99=%.1fms, errors=%d%s\n",
			c.Total, rps, ms(total.lat.Quantile(0.50)), ms(total.lat.Quantile(0.99)), c.Failed, connectNote(c))
	}

	cfg.Logger.Info("Starting load test", "url", cfg.URL, "scenario", string(cfg.Scenario), "method", string(cfg.Method),
		"concurrency", r.workers, "duration", cfg.Duration, "requests", r.limit, "rate", cfg.Rate, "segment", r.seg.String())

	r.start = time.Now()
	var wg sync.WaitGroup
	var openSched <-chan engine.Ticket
	var pacer engine.Pacer
	if r.open {
		pacer = r.pacer()
		schedCtx := r.runCtx
		if cfg.Duration > 0 {
			var cancelSched context.CancelFunc
			schedCtx, cancelSched = context.WithDeadline(r.runCtx, r.start.Add(cfg.Duration))
			defer cancelSched()
		}
		maxTickets := int64(0)
		if r.limited {
			maxTickets = r.limit
		}
		if !r.limited || r.limit > 0 {
			openSched = engine.Schedule(schedCtx, r.start, pacer, maxTickets, cfg.Duration)
		} else {
			c := make(chan engine.Ticket)
			close(c)
			openSched = c
		}
	}
	for _, wk := range r.wks {
		wg.Add(1)
		if r.open {
			go func() { defer wg.Done(); r.openWorker(wk, openSched) }()
		} else {
			go func() { defer wg.Done(); r.closedWorker(wk) }()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var deadline, drain <-chan time.Time
	if cfg.Duration > 0 {
		tm := time.NewTimer(cfg.Duration)
		defer tm.Stop()
		deadline = tm.C
	}
	second := time.NewTicker(time.Second)
	defer second.Stop()
	report := time.NewTicker(cfg.ReportInterval)
	defer report.Stop()
	point(r.start)
	progress(r.start)
	ctxDone := ctx.Done()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-deadline:
			r.end()
			deadline, drain = nil, time.After(cfg.Drain)
		case <-drain:
			drain = nil
			r.cutOff() // in-flight requests past the drain are cut off (drain.go)
		case <-ctxDone:
			ctxDone = nil
			now := time.Now()
			r.setStop(keycastresult.StopEvent{Reason: StopSignal, ElapsedSecs: now.Sub(r.start).Seconds(), At: keycast.FormatTimestamp(now)})
		case now := <-second.C:
			collect()
			if win != nil {
				r.judge(win, now)
				win.advance()
			}
		case now := <-report.C:
			collect()
			point(now)
			progress(now)
		}
	}
	end := time.Now()
	collect()
	point(end)
	duration := end.Sub(r.start)
	for i := range r.clients {
		if c := r.clients[i].Load(); c != nil {
			c.closeIdle()
		}
	}

	res := &keycastresult.Results{
		Metadata: keycastresult.Metadata{
			URL:          cfg.URL,
			Scenario:     cfg.Scenario.DebugName(),
			Method:       cfg.Method.DebugName(),
			Concurrency:  r.workers,
			DurationSecs: uint64(cfg.Duration / time.Second),
			Timestamp:    keycast.FormatTimestamp(time.Now()),
			Seed:         cfg.Seed,
			RampUpSecs:   uint64(cfg.RampUp / time.Second),
		},
		Summary:  keycastresult.Summarize(total.counts, total.lat, duration),
		Timeline: timeline,
		Latency:  total.lat,
	}
	if cfg.Method != keycast.MethodRegister {
		res.Metadata.UserCount = len(cfg.Users)
	}
	if r.limited {
		res.Metadata.Requests = r.limit
	}
	if len(total.causes) > 0 {
		res.FailureCauses = total.causes
	}
	if r.open {
		res.Metadata.TargetRate = r.seg.Rate(cfg.Rate)
		res.UncorrectedLatency = total.unc
		stopAt := duration
		if cfg.Duration > 0 {
			stopAt = min(duration, cfg.Duration)
		}
		if r.stop != nil {
			stopAt = time.Duration(r.stop.ElapsedSecs * float64(time.Second))
		}
		due := dueBy(pacer, stopAt, r.limit, r.limited)
		if !r.limited && cfg.Duration == 0 {
			due = int64(total.sent)
		}
		us := total.unc.Summary()
		res.OpenModel = &keycastresult.OpenModel{
			TargetRate:        r.seg.Rate(cfg.Rate),
			RampFrom:          r.seg.Rate(cfg.RateFrom),
			RampSecs:          cfg.RampUp.Seconds(),
			Scheduled:         uint64(max(due, int64(total.sent))),
			LateSends:         total.late,
			LateThresholdMs:   ms(LateThreshold),
			Dropped:           uint64(max(due-int64(total.sent), 0)),
			UncorrectedP50Ms:  us.P50Ms,
			UncorrectedP95Ms:  us.P95Ms,
			UncorrectedP99Ms:  us.P99Ms,
			UncorrectedP999Ms: us.P999Ms,
			UncorrectedMaxMs:  us.MaxMs,
		}
		if res.OpenModel.RampSecs == 0 {
			res.OpenModel.RampFrom = 0
		}
	}
	if r.seg.Count > 1 {
		res.Segments = []string{r.seg.String()}
	}
	m := machine.Collect("KEYCAST_", "HANDLER_CACHE_SIZE")
	m.Target = cfg.URL
	res.Machine = &m
	r.stopMu.Lock()
	res.Stop = r.stop
	r.stopMu.Unlock()
	cfg.Logger.Info("Load test finished", "requests", total.counts.Total, "failed", total.counts.Failed,
		"duration", duration.Round(time.Millisecond))
	return res
}

// pacer builds the open model's pacer for this segment.
func (r *runner) pacer() engine.Pacer {
	rate := r.seg.Rate(r.cfg.Rate)
	if r.cfg.RampUp > 0 {
		return engine.LinearPacer{From: r.seg.Rate(r.cfg.RateFrom), To: rate, Over: r.cfg.RampUp, Phase: r.seg.Offset()}
	}
	return engine.ConstantPacer{PerSecond: rate, Phase: r.seg.Offset()}
}

// dueBy counts the sends a pacer schedules before offset end (at most limit when limited).
func dueBy(p engine.Pacer, end time.Duration, limit int64, limited bool) int64 {
	if limited && (limit == 0 || p.At(limit-1) < end) {
		return limit
	}
	// Smallest n with At(n) >= end, by doubling then bisection.
	lo, hi := int64(0), int64(1)
	for p.At(hi) < end {
		lo = hi
		hi *= 2
		if hi > 1<<50 {
			break
		}
	}
	if p.At(lo) >= end {
		return lo
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if p.At(mid) < end {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// judge evaluates the live stop conditions over the window.
func (r *runner) judge(w *window, now time.Time) {
	sc := r.cfg.Stop
	c, lat := w.totals()
	if int64(c.Attempts()) < sc.MinRequests {
		return
	}
	ev := keycastresult.StopEvent{
		Reason:      StopCondition,
		WindowSecs:  float64(len(w.slots)),
		ElapsedSecs: now.Sub(r.start).Seconds(),
		At:          keycast.FormatTimestamp(now),
	}
	unint := c.UnintentionalErrorRate() // connect failures count as failed attempts
	if unint > sc.MaxUnintentionalErrorRate {
		ev.Metric, ev.Observed, ev.Limit = MetricUnintErrors, unint, sc.MaxUnintentionalErrorRate
		r.cfg.Logger.Warn("Stop condition breached", "metric", ev.Metric, "observed", ev.Observed, "limit", ev.Limit)
		r.setStop(ev)
		return
	}
	if sc.MaxLatencyP95Ms > 0 {
		if p95 := ms(lat.Quantile(0.95)); p95 > sc.MaxLatencyP95Ms {
			ev.Metric, ev.Observed, ev.Limit = MetricLatencyP95, p95, sc.MaxLatencyP95Ms
			r.cfg.Logger.Warn("Stop condition breached", "metric", ev.Metric, "observed", ev.Observed, "limit", ev.Limit)
			r.setStop(ev)
		}
	}
}

// closedWorker sends one request after another.
func (r *runner) closedWorker(wk *worker) {
	if d := r.rampDelay(wk.id); d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-r.endCh: // the run ended before this worker's turn came
			tm.Stop()
			return
		}
	}
	for !r.ending.Load() {
		n := r.tickets.Add(1) - 1
		if r.limited && n >= r.limit {
			r.end() // every ticket is out: workers still waiting for their ramp-up turn need not start
			return
		}
		r.do(wk, n, time.Time{})
	}
}

// rampDelay is upstream's linear worker start: ramp·w/(workers−1).
func (r *runner) rampDelay(w int) time.Duration {
	if r.cfg.RampUp <= 0 || r.workers <= 1 {
		return 0
	}
	return time.Duration(float64(r.cfg.RampUp) * float64(w) / float64(r.workers-1))
}

// openWorker sends the scheduled requests it receives.
func (r *runner) openWorker(wk *worker, sched <-chan engine.Ticket) {
	for tk := range sched {
		if r.aborted.Load() {
			return
		}
		r.do(wk, tk.N, tk.Intended)
	}
}

// do sends request number local and records its outcome. intended is the open model's intended
// send time (zero in the closed model).
func (r *runner) do(wk *worker, local int64, intended time.Time) {
	num := r.globalNum(local)
	if r.cfg.Method == keycast.MethodRegister {
		r.doRegister(wk, num, intended)
		return
	}
	ui := SelectUser(r.cfg.Scenario, len(r.cfg.Users), num, r.cfg.Seed)
	u := r.client(ui)
	wk.req = r.buildRequest(wk, u, ui)

	start := time.Now()
	resp, err := r.exchange(wk, u, start)
	end := time.Now()
	if err != nil && r.aborted.Load() {
		r.recordCutOff(wk, err) // cut off (drain, signal, stop condition): the outcome is unknown, not a failure
		return
	}
	if r.afterExchange(wk, num, err) {
		return // no connection: not a request (connect.go)
	}
	var smp sample
	if err != nil {
		smp.class, smp.cause = Network, NetworkCause(err)
		r.logFailure(num, err.Error())
	} else {
		smp.class, smp.cause = Classify(resp.status, resp.body)
		if smp.class != Success {
			r.logFailure(num, failureText(resp))
		}
	}
	r.finish(wk, &smp, intended, start, end)
}

func (r *runner) finish(wk *worker, smp *sample, intended, start, end time.Time) {
	if r.open {
		smp.lat = end.Sub(intended)
		smp.unc = end.Sub(start)
		smp.late = start.Sub(intended) > LateThreshold
	} else {
		smp.lat = end.Sub(start)
	}
	wk.shard.record(smp, r.open)
}

// logFailure logs the first three failures (upstream: failures among request numbers 0–2).
func (r *runner) logFailure(num uint64, text string) {
	if num < 3 || r.failLogged.Load() < 3 {
		if r.failLogged.Add(1) <= 3 {
			r.cfg.Logger.Warn(fmt.Sprintf("Request %d failed: %s", num, text))
		}
	}
}

func failureText(resp response) string {
	b := resp.body
	if len(b) > 200 {
		b = b[:200]
	}
	return "HTTP " + strconv.Itoa(resp.status) + ": " + string(b)
}

// buildRequest writes the whole request for user ui into wk.req.
func (r *runner) buildRequest(wk *worker, u *userClient, ui int) []byte {
	body := r.staticBody
	if body == nil {
		user := &r.cfg.Users[ui]
		switch r.cfg.Method {
		case keycast.MethodSignEvent:
			wk.body, _ = keycast.AppendRPCBody(wk.body[:0], r.cfg.Method, user.Pubkey, time.Now().Unix(), "")
		case keycast.MethodNIP44Encrypt:
			wk.body, _ = keycast.AppendRPCBody(wk.body[:0], r.cfg.Method, user.Pubkey, 0, wk.recipient())
		}
		body = wk.body
	}
	b := append(wk.req[:0], u.prefix...)
	if line := u.line.Load(); line != nil {
		b = append(b, *line...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// recipient returns a fresh random recipient public key (hex), as upstream generates one per
// nip44-encrypt request, so the server cannot reuse a conversation key. A random 32-byte string is
// an x coordinate on the curve about half the time; it is drawn until one is.
func (wk *worker) recipient() string {
	var b [32]byte
	for {
		for i := 0; i < 32; i += 8 {
			v := wk.rng.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		hex.Encode(wk.hexbuf[:], b[:])
		s := string(wk.hexbuf[:])
		if _, err := keycast.ParsePublicKey(s); err == nil {
			return s
		}
	}
}

// exchange sends wk.req on one of u's connections and reads the response.
func (r *runner) exchange(wk *worker, u *userClient, start time.Time) (response, error) {
	timeout := r.cfg.HTTPTimeout
	c := u.get(start)
	for attempt := 0; ; attempt++ {
		if c == nil {
			var err error
			if c, err = r.t.dial(r.runCtx, timeout); err != nil {
				return response{}, &connectError{err}
			}
		}
		wk.active.Store(c)
		if r.aborted.Load() {
			wk.active.Store(nil)
			c.close()
			return response{}, context.Canceled
		}
		// Refresh the deadline only when less than 90% of the timeout is left, to save a timer
		// update per request: every request still gets at least 90% of HTTPTimeout.
		if dl, ok := c.deadline(); !ok || dl.Sub(start) < timeout*9/10 {
			c.setDeadline(start.Add(timeout))
		}
		err := c.send(wk.req)
		retryable := err != nil // nothing reached the server intact
		var resp response
		if err == nil {
			resp, err = readResponse(c.br, wk.resp, u.setCookie)
			if cap(resp.body) > cap(wk.resp) {
				wk.resp = resp.body[:0]
			}
			// A failed write surfaces through the read; either way no response byte came back.
			retryable = c.werr != nil || errors.Is(err, errNoResponse)
		}
		wk.active.Store(nil)
		if err != nil {
			stale := c.reused && attempt == 0 && retryable && !isTimeout(err)
			c.close()
			if stale && !r.aborted.Load() {
				c = nil
				continue
			}
			return resp, err
		}
		if resp.close || c.br.Buffered() > 0 {
			// Bytes beyond the response are a protocol violation; the connection is not reused.
			c.close()
		} else {
			u.put(c, time.Now())
		}
		return resp, nil
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
