package linkkeysload

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// HandshakeConfig is the seed's handshake-bench command (docs/protocol-linkkeys.md, handshake-bench).
type HandshakeConfig struct {
	Target         Target        `json:"target"`
	DurationSecs   uint64        `json:"duration_secs"`
	Concurrency    uint32        `json:"concurrency"`
	AttemptTimeout time.Duration `json:"attempt_timeout"`
	Sources        SourceAddrs   `json:"sources"`
	// Resume gives each worker loop a TLS session cache, so after its first full handshake it
	// offers resumption; the result splits completed handshakes into full and resumed.
	Resume bool `json:"resume"`
	// Rate, when > 0, paces the attempts at this total rate per second (the open model: latency
	// counted from each attempt's intended start) with at most Concurrency in flight; 0 runs
	// Concurrency loops back to back, as the seed does.
	Rate float64 `json:"rate,omitempty"`
}

// ticketWait bounds how long a resuming loop waits, after a handshake, for the server's session
// ticket. A TLS 1.3 ticket arrives after the handshake as a post-handshake message that the client
// only reads when it reads from the connection; a Go server sends it with its first flight and
// rustls right after the client's Finished, so on loopback it is there within a millisecond. A loop
// that sees no ticket three times in a row stops waiting (the server does not issue tickets).
const ticketWait = 100 * time.Millisecond

// ticketCache is a one-entry session cache that, when a ticket is stored, expires the read deadline
// of the connection being drained, so the wait for the ticket ends the moment it is processed.
type ticketCache struct {
	mu    sync.Mutex
	state *tls.ClientSessionState
	key   string
	conn  net.Conn
	got   bool
}

func (c *ticketCache) Get(key string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil || c.key != key {
		return nil, false
	}
	return c.state, true
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs == nil {
		if c.key == key {
			c.state = nil
		}
		return
	}
	c.key, c.state, c.got = key, cs, true
	if c.conn != nil {
		_ = c.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// drain reads from conn until the server's ticket has been stored or ticketWait passes.
func (c *ticketCache) drain(conn *tls.Conn) bool {
	c.mu.Lock()
	if c.got {
		c.mu.Unlock()
		return true
	}
	c.conn = conn.NetConn()
	_ = c.conn.SetReadDeadline(time.Now().Add(ticketWait))
	c.mu.Unlock()
	var b [1]byte
	_, _ = conn.Read(b[:])
	c.mu.Lock()
	got := c.got
	c.conn = nil
	c.mu.Unlock()
	return got
}

// handshake-bench's driver counters (engine.Worker.Add).
const (
	ctrFull = iota
	ctrResumed
)

// handshakeWorker is one connect+handshake+close loop's own state: its TLS configuration (with a
// session cache when resuming) and how often in a row the server sent no ticket.
type handshakeWorker struct {
	global uint32 // the worker's index in the whole run
	tls    *tls.Config
	cache  *ticketCache
	misses int
}

// runHandshakeSegment runs the segment's share of the loops for the configured duration: an engine
// run bounded in time whose operation is one attempt (connect, handshake, close).
func runHandshakeSegment(ctx context.Context, cfg HandshakeConfig, seg engine.Segment, sample *MetricsSource) (Result, error) {
	defer tuneGC(gcPercentChurn)()
	return prepareHandshakes(cfg, seg, sample).execute(ctx)
}

// prepareHandshakes is runHandshakeSegment's workload.
func prepareHandshakes(cfg HandshakeConfig, seg engine.Segment, sample *MetricsSource) workload {
	cpu0 := processCPU()
	wstart, workers := seg.Range(int64(cfg.Concurrency))
	dialer := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	base := dialer.tlsConfig()
	sources := cfg.Sources.In(seg) // this segment's own addresses
	ipCount := max(sources.Count, 1)
	d := &attemptDriver{
		dialer: dialer,
		source: func(w *engine.Worker, n int64) IPv4 {
			return NthLoopbackAddr(sources.Base, (uint32(n)+w.State.(*handshakeWorker).global)%ipCount)
		},
		config: func(w *engine.Worker) *tls.Config {
			hw := w.State.(*handshakeWorker)
			if hw.cache != nil {
				hw.cache.mu.Lock()
				hw.cache.got = false
				hw.cache.mu.Unlock()
			}
			return hw.tls
		},
		success: func(w *engine.Worker, c *tls.Conn, took time.Duration) {
			hw := w.State.(*handshakeWorker)
			if c.ConnectionState().DidResume {
				w.Add(ctrResumed, 1)
				w.Observe(kindResumed, took)
			} else {
				w.Add(ctrFull, 1)
			}
			if hw.cache != nil && hw.misses < 3 {
				if hw.cache.drain(c) {
					hw.misses = 0
				} else {
					hw.misses++
				}
			}
			closeConn(c)
		},
	}
	ec := attemptConfig(d, int(workers), 0, nil)
	ec.Counters = []string{"full", "resumed"}
	ec.Duration = time.Duration(cfg.DurationSecs) * time.Second
	ec.Sample = serverSampler(sample)
	if cfg.Rate > 0 {
		ec.Rate, ec.Phase, ec.LateThreshold = seg.Rate(cfg.Rate), seg.Offset(), LateThreshold
	}
	ec.NewState = func(id int) any {
		hw := &handshakeWorker{global: uint32(wstart) + uint32(id), tls: base}
		if cfg.Resume {
			hw.cache = &ticketCache{}
			hw.tls = base.Clone()
			hw.tls.ClientSessionCache = hw.cache
		}
		return hw
	}
	return workload{cfg: ec, nothing: workers == 0 || ec.Duration <= 0, finish: func(run *engine.Run) (Result, error) {
		r := segmentResult(CmdHandshakeBench, cfg.Target, seg, run)
		a := attemptsOf(&r)
		r.Attempts = a
		r.Handshakes = &Handshakes{
			DurationSecs: cfg.DurationSecs, Concurrency: workers, Resume: cfg.Resume,
			Completed: a.Succeeded, Failed: a.Failed, Full: run.Totals.Counters[ctrFull], Resumed: run.Totals.Counters[ctrResumed],
			ResumedLatency: cloneHist(r.Histograms[linkkeysresult.KindResumed]),
		}
		r.ClientCPU = Duration(processCPU() - cpu0)
		r.Finish()
		return r, nil
	}}
}

// HandshakeBench runs the handshake-bench command: header, the timed loops (in this process or
// fanned out), DONE line, and, when the server's METRICS are reachable, its accounting next to the
// client's. The attempts its admission control shed (they end with the stream closed, as failures
// would) are then refused by design, by reason, apart from the failures (Result.Refused).
func HandshakeBench(ctx context.Context, cfg HandshakeConfig, r Run) (Result, error) {
	out := r.stdout()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	WriteHandshakeHeader(out, cfg)
	before, metricsErr := r.metricsBeforeOf(ctx, cfg.Target)
	if metricsErr == nil && r.Metrics != nil && r.OnServerBefore != nil {
		r.OnServerBefore(before)
	}
	meter := r.startCPU(cfg.Target)
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runHandshakeSegment(ctx, cfg, r.seg(), r.Metrics)
	} else {
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdHandshakeBench, Handshake: &cfg}, nil)
	}
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res)
	WriteHandshakeDone(out, cfg, res)
	r.accounting(ctx, &res, before, metricsErr)
	res.Refused = res.Refusals()
	WriteHeadline(out, res)
	return res, r.writeJSON(ctx, res)
}
