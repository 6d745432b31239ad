package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeT records a Fatalf and ends the goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeT on its own goroutine (Fatalf ends it) and returns the failure, if any.
func run(fn func(t testing.TB)) string {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done // fn either returns or calls Goexit: both close done
	return f.msg
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Second, "value"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	msg := run(func(t testing.TB) { Recv(t, make(chan int), 10*time.Millisecond, "reply") })
	if !strings.Contains(msg, "no reply within 10ms") {
		t.Fatalf("failure %q does not name what was awaited", msg)
	}
}

func TestWaitGroupAndCall(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	go wg.Done()
	WaitGroup(t, &wg, Long, "workers")

	var stuck sync.WaitGroup
	stuck.Add(1)
	defer stuck.Done()
	if msg := run(func(t testing.TB) { WaitGroup(t, &stuck, 10*time.Millisecond, "writers") }); !strings.Contains(msg, "no writers within") {
		t.Fatalf("failure %q does not name what was awaited", msg)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, Long, "third poll", func() bool { n++; return n >= 3 })
	if msg := run(func(t testing.TB) { Eventually(t, 10*time.Millisecond, "miracle", func() bool { return false }) }); !strings.Contains(msg, "no miracle within") {
		t.Fatalf("failure %q does not name what was awaited", msg)
	}
}
