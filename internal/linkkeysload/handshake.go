package linkkeysload

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/hist"
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

func runHandshakeSegment(ctx context.Context, cfg HandshakeConfig, seg engine.Segment) (Result, error) {
	defer tuneGC(gcPercentChurn)()
	cpu0 := processCPU()
	wstart, workers := seg.Range(int64(cfg.Concurrency))
	d := &Dialer{Target: cfg.Target, Timeout: cfg.AttemptTimeout}
	base := d.tlsConfig()
	t := newTally(nil)
	resumed := hist.New()
	var full, res atomic.Int64
	var counter atomic.Uint32
	began := time.Now()
	deadline := began.Add(time.Duration(cfg.DurationSecs) * time.Second)
	sources := cfg.Sources.In(seg) // this segment's own addresses
	ipCount := max(sources.Count, 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw := uint32(wstart + w) // the worker's index in the whole run
			tc := base
			var cache *ticketCache
			misses := 0
			if cfg.Resume {
				cache = &ticketCache{}
				tc = base.Clone()
				tc.ClientSessionCache = cache
			}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				n := counter.Add(1) - 1
				src := NthLoopbackAddr(sources.Base, (n+gw)%ipCount)
				if cache != nil {
					cache.mu.Lock()
					cache.got = false
					cache.mu.Unlock()
				}
				t0 := time.Now()
				c, f := d.Dial(ctx, src, tc)
				took := time.Since(t0)
				if f.Stage == StageNone {
					did := c.ConnectionState().DidResume
					if did {
						res.Add(1)
						t.mu.Lock()
						resumed.Record(took)
						t.mu.Unlock()
					} else {
						full.Add(1)
					}
					if cache != nil && misses < 3 {
						if cache.drain(c) {
							misses = 0
						} else {
							misses++
						}
					}
					closeConn(c)
				}
				t.record(f, took)
			}
		}()
	}
	wg.Wait()
	a := t.a
	r := Result{
		Command: CmdHandshakeBench, Target: cfg.Target, Start: began, End: time.Now(),
		Segments: []engine.Segment{seg}, Attempts: a,
		Handshakes: &Handshakes{
			DurationSecs: cfg.DurationSecs, Concurrency: workers, Resume: cfg.Resume,
			Completed: a.Succeeded, Failed: a.Failed, Full: full.Load(), Resumed: res.Load(), ResumedLatency: resumed,
		},
		ClientCPU: Duration(processCPU() - cpu0),
	}
	r.finish()
	return r, nil
}

// HandshakeBench runs the handshake-bench command: header, the timed loops (in this process or
// fanned out), DONE line.
func HandshakeBench(ctx context.Context, cfg HandshakeConfig, r Run) (Result, error) {
	out := r.stdout()
	WriteHandshakeHeader(out, cfg)
	meter := r.startCPU(cfg.Target)
	var res Result
	var err error
	if r.Workers <= 1 {
		res, err = runHandshakeSegment(ctx, cfg, r.seg())
	} else {
		res, err = r.fanOut(ctx, WorkerSpec{Command: CmdHandshakeBench, Handshake: &cfg}, nil)
	}
	if err != nil {
		return Result{}, err
	}
	meter.stop(&res)
	r.stamp(&res, cfg.Target)
	WriteHandshakeDone(out, cfg, res)
	return res, r.writeJSON(res)
}
