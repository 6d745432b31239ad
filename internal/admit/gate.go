package admit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrGateFull is returned by Gate.Acquire, at once, when every slot is taken
// and the wait queue is full. Callers shed the work (close the connection,
// answer "busy") rather than queue it.
var ErrGateFull = errors.New("admit: gate full: every slot is busy and the wait queue is full; shed this work or raise the gate's slots or queue length")

// Gate bounds how many callers run a piece of work at once, with a bounded
// queue of waiters. It is safe for concurrent use.
type Gate struct {
	sem        chan struct{}
	maxWaiters int
	waiting    atomic.Int64
}

// NewGate returns a gate with slots concurrent holders and room for
// maxWaiters waiting callers; maxWaiters < 0 means the queue is unbounded
// and 0 means callers never wait. It panics if slots < 1.
func NewGate(slots, maxWaiters int) *Gate {
	if slots < 1 {
		panic(fmt.Sprintf("admit: NewGate(%d, %d): slots must be at least 1", slots, maxWaiters))
	}
	return &Gate{sem: make(chan struct{}, slots), maxWaiters: maxWaiters}
}

// Acquire takes a slot, waiting while none is free. It returns ErrGateFull
// at once when the wait queue is full, and an error wrapping ctx.Err() when
// ctx ends first. On success the caller must call release exactly once;
// extra calls do nothing.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case g.sem <- struct{}{}:
		return g.releaser(), nil
	default:
	}
	if n := g.waiting.Add(1); g.maxWaiters >= 0 && n > int64(g.maxWaiters) {
		g.waiting.Add(-1)
		return nil, ErrGateFull
	}
	defer g.waiting.Add(-1)
	select {
	case g.sem <- struct{}{}:
		return g.releaser(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("admit: gave up waiting for a gate slot: %w", ctx.Err())
	}
}

func (g *Gate) releaser() func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			<-g.sem
		}
	}
}

// InUse returns the number of slots held.
func (g *Gate) InUse() int { return len(g.sem) }

// Waiting returns the number of callers waiting for a slot.
func (g *Gate) Waiting() int { return int(g.waiting.Load()) }

// Slots returns the gate's number of slots.
func (g *Gate) Slots() int { return cap(g.sem) }
