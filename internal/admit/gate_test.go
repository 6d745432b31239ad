package admit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/loadproof/loadproof/internal/testwait"
)

func TestGateFullQueueRejectsAtOnce(t *testing.T) {
	g := NewGate(1, 0)
	release, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A context that never ends: if Acquire waited, the test would hang
	// rather than pass.
	if _, err := g.Acquire(context.Background()); !errors.Is(err, ErrGateFull) {
		t.Fatalf("second Acquire = %v, want ErrGateFull", err)
	}
	if g.Waiting() != 0 || g.InUse() != 1 {
		t.Fatalf("in use %d, waiting %d", g.InUse(), g.Waiting())
	}
	release()
	release() // idempotent
	if g.InUse() != 0 {
		t.Fatalf("in use after release = %d", g.InUse())
	}
}

func TestGateBoundedQueue(t *testing.T) {
	g := NewGate(1, 1)
	release, _ := g.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		r, err := g.Acquire(ctx)
		if r != nil {
			r()
		}
		done <- err
	}()
	testwait.Eventually(t, testwait.Long, "one waiter at the gate", func() bool { return g.Waiting() == 1 })
	if _, err := g.Acquire(context.Background()); !errors.Is(err, ErrGateFull) {
		t.Fatalf("Acquire past the queue = %v, want ErrGateFull", err)
	}
	cancel()
	if err := testwait.Recv(t, done, testwait.Long, "the cancelled waiter's return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter = %v, want context.Canceled", err)
	}
	release()
}

func TestGateContextTimeout(t *testing.T) {
	g := NewGate(1, -1)
	release, _ := g.Acquire(context.Background())
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 1) // already past by the time it waits
	defer cancel()
	<-ctx.Done()
	_, err := g.Acquire(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
	}
	if g.Waiting() != 0 {
		t.Fatalf("waiting = %d after timeout", g.Waiting())
	}
}

func TestGateReleaseWakesAWaiter(t *testing.T) {
	g := NewGate(2, -1)
	r1, _ := g.Acquire(context.Background())
	r2, _ := g.Acquire(context.Background())
	got := make(chan func(), 1)
	go func() {
		r, err := g.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	testwait.Eventually(t, testwait.Long, "one waiter at the gate", func() bool { return g.Waiting() == 1 })
	r1()
	r3 := testwait.Recv(t, got, testwait.Long, "the woken waiter's slot")
	if g.InUse() != 2 || g.Waiting() != 0 {
		t.Fatalf("in use %d, waiting %d", g.InUse(), g.Waiting())
	}
	r2()
	r3()
	if g.InUse() != 0 {
		t.Fatalf("in use %d", g.InUse())
	}
}

func TestGateNeverExceedsSlots(t *testing.T) {
	const slots = 3
	g := NewGate(slots, -1)
	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 50 {
				r, err := g.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				held++
				peak = max(peak, held)
				mu.Unlock()
				mu.Lock()
				held--
				mu.Unlock()
				r()
			}
		})
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the 32 acquirers' ends")
	if peak > slots {
		t.Fatalf("peak holders %d > %d slots", peak, slots)
	}
}

func TestNewGatePanicsWithoutSlots(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewGate(0, 0) did not panic")
		}
	}()
	NewGate(0, 0)
}
