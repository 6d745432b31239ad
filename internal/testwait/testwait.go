// Package testwait bounds the waits of tests: a receive, a WaitGroup, a blocking call or a state
// polled for, each with a deadline and a message that names what never came. A test that blocks
// forever fails only when the binary's -timeout panics, minutes later and with a dump of every
// goroutine instead of a line saying what was awaited; these helpers fail the test at once with
// "no <what> within <d>".
//
// Only _test.go files import it (internal/deps_test.go checks). The helpers call t.Fatalf, so they
// belong on the test's own goroutine. Deadlines should be generous (tens of seconds): they catch a
// hang, they never assert a speed, and the machines that run the tests are often loaded.
package testwait

import (
	"sync"
	"testing"
	"time"
)

// Long is a deadline for waits that should end at once but run on a loaded machine: long enough
// never to fail a slow but correct test, short enough to report a hang well before -timeout.
const Long = 30 * time.Second

// Recv returns the next value from ch, failing t with "no <what> within <d>" when none comes in time.
// A closed channel yields its zero value, as a bare receive would.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable") // Fatalf ends the goroutine; the compiler does not know it
	}
}

// Call runs fn on its own goroutine and waits up to d for it to return, failing t with
// "no <what> within <d>" otherwise. It bounds calls that block with no deadline of their own
// (cmd.Wait, a Read on a connection the test does not own). On failure fn keeps running: the
// test binary's end reaps it.
func Call(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	Recv(t, done, d, what)
}

// WaitGroup waits up to d for wg, failing t with "no <what> within <d>" otherwise.
func WaitGroup(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	Call(t, d, what, wg.Wait)
}

// Eventually polls cond every few milliseconds until it holds, failing t with "no <what> within <d>"
// when it still does not after d. Use it for states nothing signals (a server-side counter, a
// kernel queue); where a channel or callback tells the state, wait on that instead.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		<-tick.C
	}
}
