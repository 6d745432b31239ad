package keycastload

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
)

// Stop reasons recorded in Results.Stop.
const (
	StopSignal        = result.StopSignal
	StopCondition     = result.StopCondition
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
	r.hc = r.newHTTPClient()

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
	r.sampleServer = errBefore == nil // a dead metrics endpoint is not asked again each second
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

// Outcome classes in engine order: the index of each is its Class value; then the two outcomes
// that are not requests: a connect failure (no connection could be opened, so nothing was sent;
// counted apart from requests, see connect.go) and a request cut off in flight (its outcome is
// unknown, see drain.go). Neither has a latency.
var engineClasses = append(classNames[:len(classNames):len(classNames)], "connect_failure", "cut_off")

const (
	classConnectFailure = Class(len(classNames))
	classCutOff         = classConnectFailure + 1
)

// Driver counters.
const (
	ctrCacheHit = iota // successful requests faster than cacheHitUnder
)

// runner is one run's driver: it performs one Keycast request per engine operation and classifies
// it. Loops, pacing, ramp, intervals and stop conditions are the engine's.
type runner struct {
	cfg     RunConfig
	t       *target
	open    bool
	seg     engine.Segment
	workers int
	limit   int64 // requests for this segment; meaningful when limited
	limited bool

	clients []atomic.Pointer[userClient]
	aborted atomic.Bool // in-flight requests are being cut off (stop, signal)
	wksMu   sync.Mutex
	wks     []*worker

	hc         httpClient // fast (client.go) or std (stdclient.go)
	failLogged atomic.Int32
	staticBody []byte
	runID      string      // register method: part of every email
	httpTLS    *tls.Config // the net/http clients' TLS configuration (tls.go)
	// sampleServer says /api/metrics answered before the run, so it is sampled each interval.
	sampleServer bool
	clock        monoClock // the per-request clock readings
}

func newRunner(cfg RunConfig, t *target) *runner {
	seg := cfg.Segment
	if seg.Count == 0 {
		seg = engine.Whole
	}
	r := &runner{cfg: cfg, t: t, open: cfg.Rate > 0, seg: seg, runID: newRunID(time.Now()), clock: newMonoClock()}
	r.workers = int(max(seg.Share(int64(cfg.Concurrency)), 1))
	if cfg.Requests > 0 {
		r.limited = true
		r.limit = seg.Share(cfg.Requests)
	}
	r.clients = make([]atomic.Pointer[userClient], len(cfg.Users))
	if cfg.Method == keycast.MethodGetPublicKey {
		r.staticBody, _ = keycast.AppendRPCBody(nil, cfg.Method, "", 0, "")
	}
	return r
}

// newHTTPClient makes the run's HTTP client (after configureTLS: the std client copies the
// target's TLS configuration).
func (r *runner) newHTTPClient() httpClient {
	if r.cfg.HTTPClient == HTTPClientStd {
		return newStdClient(r.t, r.workers, r.cfg.HTTPTimeout)
	}
	return fastClient{r}
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

// worker is one request loop's scratch state (the engine worker's State).
type worker struct {
	req    []byte
	body   []byte
	resp   []byte
	active atomic.Pointer[conn]
	rng    *rand.Rand
	hexbuf [64]byte
	delay  backoff // after failed connects (connect.go)
}

func (r *runner) newWorker(id int) any {
	wk := &worker{rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(id)+1))}
	r.wksMu.Lock()
	r.wks = append(r.wks, wk)
	r.wksMu.Unlock()
	return wk
}

// cutOff interrupts requests in flight; their outcome is unknown, so they are not counted.
func (r *runner) cutOff() {
	r.aborted.Store(true)
	r.hc.cutOff()
}

// timelineBuilder turns the engine's intervals into upstream's timeline points (cumulative
// percentiles every report interval) and the progress lines.
type timelineBuilder struct {
	cfg    RunConfig
	points []keycastresult.TimelinePoint
	next   time.Duration
}

func (tb *timelineBuilder) add(el time.Duration, t *engine.Totals, progress bool) {
	c := countsOf(t)
	lat := t.Latency[0]
	p50, p99 := ms(lat.Quantile(0.50)), ms(lat.Quantile(0.99))
	tb.points = append(tb.points, keycastresult.TimelinePoint{
		ElapsedSecs: el.Seconds(), RequestsTotal: c.Total, RequestsSuccess: c.Success, RequestsError: c.Failed,
		LatencyP50Ms: p50, LatencyP99Ms: p99,
	})
	if !progress {
		return
	}
	rps := 0.0
	if el > 0 {
		rps = float64(c.Total) / el.Seconds()
	}
	fmt.Fprintf(tb.cfg.Progress, "Progress: %d req, %.1f req/s, p50=%.1fms, p99=%.1fms, errors=%d%s\n",
		c.Total, rps, p50, p99, c.Failed, connectNote(c))
}

// countsOf converts the engine's per-class totals into upstream's counts.
func countsOf(t *engine.Totals) keycastresult.Counts {
	var c keycastresult.Counts
	at := func(cl Class) uint64 {
		if int(cl) < len(t.Counts) {
			return uint64(t.Counts[cl])
		}
		return 0
	}
	c.Success = at(Success)
	c.Auth, c.RateLimited, c.Intentional = at(Auth), at(RateLimited), at(Intentional)
	c.Server, c.Client, c.Network, c.Other = at(Server), at(Client), at(Network), at(Other)
	c.Failed = c.Auth + c.RateLimited + c.Intentional + c.Server + c.Client + c.Network + c.Other
	c.Total = c.Success + c.Failed
	c.ConnectFailures, c.CutOff = at(classConnectFailure), at(classCutOff)
	if len(t.Counters) > ctrCacheHit {
		c.CacheHitEstimate = uint64(t.Counters[ctrCacheHit])
	}
	return c
}

// engineConfig is this run's engine configuration.
func (r *runner) engineConfig(tb *timelineBuilder) engine.Config {
	cfg := r.cfg
	interval := min(time.Second, cfg.ReportInterval)
	ec := engine.Config{
		Driver:      engine.DriverFunc(r.do),
		DriverTimed: true,
		NewState:    r.newWorker,
		Classes:     engineClasses,
		Kinds:       []string{"latency"},
		Counters:    []string{"cache_hit_estimate"},
		Workers:     r.workers,
		RampUp:      cfg.RampUp,
		Duration:    cfg.Duration,
		Interval:    interval,
		Drain:       cfg.Drain,
		OnCutOff:    r.cutOff,
		// LateThreshold is upstream-independent: ours, documented with the open model.
		LateThreshold: LateThreshold,
		OnInterval: func(iv *result.Interval, t *engine.Totals) {
			for t.Elapsed >= tb.next {
				tb.add(t.Elapsed, t, true)
				tb.next += cfg.ReportInterval
			}
		},
	}
	ec.Start = cfg.Start
	if r.sampleServer && !cfg.NoServerSample {
		ec.Sample = func(ctx context.Context) (map[string]float64, error) {
			_, series, err := fetchServerMetrics(ctx, r.metricsClient(), cfg.URL)
			return series, err
		}
	}
	if r.limited {
		ec.Count = r.limit
		if r.limit == 0 {
			ec.Count, ec.Duration = 0, time.Nanosecond // this segment has no requests: end at once
		}
	}
	if r.open {
		ec.Rate = r.seg.Rate(cfg.Rate)
		ec.RateFrom = r.seg.Rate(cfg.RateFrom)
		ec.Phase = r.seg.Offset()
	}
	if cfg.Stop != nil {
		ec.StopWindow = int(math.Ceil(cfg.Stop.Window.Seconds() / interval.Seconds()))
		ec.Stop = r.judge
	}
	return ec
}

func (r *runner) run(ctx context.Context) *keycastresult.Results {
	cfg := r.cfg
	cfg.Logger.Info("Starting load test", "url", cfg.URL, "scenario", string(cfg.Scenario), "method", string(cfg.Method),
		"concurrency", r.workers, "duration", cfg.Duration, "requests", r.limit, "rate", cfg.Rate, "segment", r.seg.String())
	tb := &timelineBuilder{cfg: cfg, next: cfg.ReportInterval}
	zero := &engine.Totals{Latency: []*hist.Histogram{hist.New()}}
	tb.add(0, zero, true)
	run, err := engine.Execute(ctx, r.engineConfig(tb))
	if err != nil {
		// The configuration was normalized before; an engine refusal is a bug worth its message.
		panic(fmt.Sprintf("keycastload: engine refused the run configuration: %v", err))
	}
	duration := run.Elapsed()
	tb.add(duration, run.Totals, false)
	r.hc.closeIdle()
	return r.results(run, tb.points)
}

// results assembles the results file from the engine's run.
func (r *runner) results(run *engine.Run, timeline []keycastresult.TimelinePoint) *keycastresult.Results {
	cfg := r.cfg
	counts := countsOf(run.Totals)
	lat := run.Totals.Latency[0]
	duration := run.Elapsed()
	env := run.Envelope
	env.Format, env.Harness, env.Command, env.Target = result.Format, "keycast", "run", cfg.URL
	env.Flags, env.RunID = cfg.Flags, cfg.RunID
	if r.seg.Count > 1 {
		env.Segments = []result.Segment{r.seg}
	}
	m := machine.Collect("KEYCAST_", "HANDLER_CACHE_SIZE")
	m.Target = cfg.URL
	if rs := run.Kernel; rs != nil {
		rs.SharedStack = machine.OnThisStack(cfg.URL)
		m.Run = machine.Judge(rs)
	}
	env.Machines = []machine.Record{m}
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
			HTTPClient:   cfg.HTTPClient,
		},
		Summary:  keycastresult.Summarize(counts, lat, duration),
		Timeline: timeline,
		Envelope: &env,
		Stop:     run.Stop,
	}
	if cfg.Method != keycast.MethodRegister {
		res.Metadata.UserCount = len(cfg.Users)
	}
	if r.limited {
		res.Metadata.Requests = r.limit
	}
	if o := run.Open; o != nil {
		res.Metadata.TargetRate = r.seg.Rate(cfg.Rate)
		us := run.Histograms["uncorrected"].Summary()
		res.OpenModel = &keycastresult.OpenModel{
			TargetRate:        r.seg.Rate(cfg.Rate),
			RampFrom:          r.seg.Rate(cfg.RateFrom),
			RampSecs:          cfg.RampUp.Seconds(),
			Scheduled:         uint64(o.Scheduled),
			LateSends:         uint64(o.Late),
			LateThresholdMs:   ms(LateThreshold),
			Dropped:           uint64(o.Dropped),
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
	cfg.Logger.Info("Load test finished", "requests", counts.Total, "failed", counts.Failed,
		"duration", duration.Round(time.Millisecond))
	return res
}

// judge evaluates the live stop conditions over the engine's window.
func (r *runner) judge(_ time.Duration, w *engine.Window) *result.StopEvent {
	byClass := w.Counts()
	counts := make(map[string]int64, len(byClass))
	for cl, n := range byClass {
		if cl < len(engineClasses) {
			counts[engineClasses[cl]] += n
		}
	}
	ev := JudgeWindow(r.cfg.Stop, counts, w.Latency())
	if ev != nil {
		r.cfg.Logger.Warn("Stop condition breached", "metric", ev.Metric, "observed", ev.Observed, "limit", ev.Limit)
	}
	return ev
}

// JudgeWindow applies live stop conditions to one window's counts by outcome class (class names as
// in the results' envelope) and latency histogram: the rule a single run applies to its own window
// and a coordinator applies to the window merged from every segment of a distributed run. Connect
// failures count as failed attempts, cut-off requests not at all. A nil return means no breach; sc
// nil never breaches. sc's zero Window and MinRequests mean their defaults.
func JudgeWindow(sc *StopConditions, counts map[string]int64, lat *hist.Histogram) *result.StopEvent {
	if sc == nil {
		return nil
	}
	minReq := sc.MinRequests
	if minReq == 0 {
		minReq = DefaultStopMinimum
	}
	var c keycastresult.Counts
	for cl, n := range counts {
		switch cl {
		case engineClasses[classCutOff]:
		case engineClasses[classConnectFailure]:
			c.ConnectFailures += uint64(n)
		case Success.String():
			c.Total += uint64(n)
		case Intentional.String():
			c.Total += uint64(n)
			c.Failed += uint64(n)
			c.Intentional += uint64(n)
		default:
			c.Total += uint64(n)
			c.Failed += uint64(n)
		}
	}
	if int64(c.Attempts()) < minReq || c.Attempts() == 0 {
		return nil
	}
	ev := &result.StopEvent{Reason: StopCondition}
	unint := c.UnintentionalErrorRate() // connect failures count as failed attempts
	if unint > sc.MaxUnintentionalErrorRate {
		ev.Metric, ev.Observed, ev.Limit = MetricUnintErrors, unint, sc.MaxUnintentionalErrorRate
		return ev
	}
	if sc.MaxLatencyP95Ms > 0 && lat != nil {
		if p95 := ms(lat.Quantile(0.95)); p95 > sc.MaxLatencyP95Ms {
			ev.Metric, ev.Observed, ev.Limit = MetricLatencyP95, p95, sc.MaxLatencyP95Ms
			return ev
		}
	}
	return nil
}

// do is the driver: it sends request number local of this segment and classifies its outcome.
func (r *runner) do(ctx context.Context, ew *engine.Worker, local int64) engine.Outcome {
	wk := ew.State.(*worker)
	num := engine.Global(r.seg, local)
	if r.cfg.Method == keycast.MethodRegister {
		return r.doRegister(ctx, ew, wk, num)
	}
	ui := SelectUser(r.cfg.Scenario, len(r.cfg.Users), num, r.cfg.Seed)
	u := r.client(ui)
	body := r.requestBody(wk, ui)

	start := r.clock.now()
	resp, end, err := r.hc.exchange(ctx, wk, u, body, start)
	took := end.Sub(start)
	if err != nil && r.aborted.Load() {
		return r.cutOffOutcome(err, start) // cut off (drain, signal, stop condition): outcome unknown
	}
	if out, ok := r.afterExchange(ew, wk, num, err, start); ok {
		return out // no connection: not a request (connect.go)
	}
	var out engine.Outcome
	var cl Class
	cl, out.Cause = outcomeOf(resp, err)
	switch {
	case err != nil:
		r.logFailure(num, err.Error())
	case cl != Success:
		r.logFailure(num, failureText(resp))
	}
	out.Class, out.Took, out.Start = uint8(cl), took, start
	if cl == Success && took < cacheHitUnder {
		out.Tally = ctrCacheHit + 1
	}
	return out
}

// outcomeOf classifies one exchange: a transport failure by its cause, a response by Classify.
func outcomeOf(resp httpwire.Response, err error) (Class, string) {
	if err != nil {
		return Network, NetworkCause(err)
	}
	return Classify(resp.Status, resp.Body)
}

// logFailure logs the first three failures (upstream: failures among request numbers 0–2).
func (r *runner) logFailure(num uint64, text string) {
	if num < 3 || r.failLogged.Load() < 3 {
		if r.failLogged.Add(1) <= 3 {
			r.cfg.Logger.Warn(fmt.Sprintf("Request %d failed: %s", num, text))
		}
	}
}

func failureText(resp httpwire.Response) string {
	b := resp.Body
	if len(b) > 200 {
		b = b[:200]
	}
	return "HTTP " + strconv.Itoa(resp.Status) + ": " + string(b)
}

// requestBody returns the /api/nostr body for user ui (in wk.body unless it is the same for all).
func (r *runner) requestBody(wk *worker, ui int) []byte {
	if r.staticBody != nil {
		return r.staticBody
	}
	user := &r.cfg.Users[ui]
	switch r.cfg.Method {
	case keycast.MethodSignEvent:
		wk.body, _ = keycast.AppendRPCBody(wk.body[:0], r.cfg.Method, user.Pubkey, time.Now().Unix(), "")
	case keycast.MethodNIP44Encrypt:
		wk.body, _ = keycast.AppendRPCBody(wk.body[:0], r.cfg.Method, user.Pubkey, 0, wk.recipient())
	}
	return wk.body
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
