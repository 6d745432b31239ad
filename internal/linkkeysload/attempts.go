package linkkeysload

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"
)

// tally records finished attempts under one lock and reports the totals to a Progress. Recording is
// shared because per-goroutine histograms would cost far more memory than the lock costs time: an
// attempt is a TLS handshake, thousands of times slower than the critical section.
type tally struct {
	mu       sync.Mutex
	a        *Attempts
	progress Progress
}

func newTally(p Progress) *tally {
	if p == nil {
		p = nopProgress{}
	}
	return &tally{a: newAttempts(), progress: p}
}

func (t *tally) record(f Failure, took time.Duration) {
	t.mu.Lock()
	t.a.record(f, took)
	t.progress.Update(t.a.Attempted, t.a.Succeeded, t.a.Failed)
	t.mu.Unlock()
}

// attemptPool runs count connection attempts, global indexes start..start+count-1, with at most
// concurrency in flight. Each attempt's slot is released as soon as its handshake resolves.
type attemptPool struct {
	dialer      *Dialer
	start       int64
	count       int64
	concurrency int
	source      func(global int64) IPv4
	// onSuccess takes over an established connection (keep it, or close it).
	onSuccess func(c *tls.Conn)
	tally     *tally
}

func (p *attemptPool) run(ctx context.Context) {
	var next atomic.Int64
	workers := int64(max(p.concurrency, 1))
	workers = min(workers, max(p.count, 1))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= p.count {
					return
				}
				t0 := time.Now()
				c, f := p.dialer.Dial(ctx, p.source(p.start+i), nil)
				took := time.Since(t0)
				if f.Stage == StageNone {
					p.onSuccess(c)
				}
				p.tally.record(f, took)
			}
		}()
	}
	wg.Wait()
}
