package linkkeysload

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loadproof/loadproof/internal/linkkeysresult"
)

// holdWatcher notices held connections that end during the hold, as they end: every held socket
// is registered, one-shot, for peer hang-up in an epoll set of its own (next to Go's netpoller
// registration of the same descriptor), and one goroutine collects the events. Data the server
// sends (session tickets) does not wake it, and the connections stay unread. Cost: one epoll_ctl
// per held connection at the start, nothing per connection afterwards.
type holdWatcher struct {
	epfd    int
	stopped atomic.Bool
	done    chan struct{}
	watched int
	allGone chan struct{} // closed when every watched connection has ended

	last int // events of the last collect (run's goroutine only)

	mu    sync.Mutex
	loss  HoldLoss
	seen  int
	onEnd func(reason string) // told of each connection seen to end, as it is seen (may be nil)
}

// Loss reasons, by what the socket saw.
const (
	lossClosed = linkkeysresult.LossClosed // FIN: the server closed it, or its process exited
	lossReset  = linkkeysresult.LossReset  // RST or a socket error
)

// watchHeld starts watching conns; onEnd (optional) is told the reason of each one seen to end, as
// it is seen, on the watcher's goroutine.
func watchHeld(conns []net.Conn, onEnd func(reason string)) *holdWatcher {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &holdWatcher{epfd: epfd, done: make(chan struct{}), allGone: make(chan struct{}), onEnd: onEnd}
	for i, c := range conns {
		sc, ok := socketOf(c).(syscall.Conn)
		if !ok {
			continue
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			continue
		}
		_ = raw.Control(func(fd uintptr) {
			ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(i)}
			if unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) == nil {
				w.watched++
			}
		})
	}
	go w.run()
	return w
}

func (w *holdWatcher) run() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 256)
	for !w.stopped.Load() {
		if !w.collect(events, 100) {
			return
		}
	}
	// A last look without waiting: connections that ended just before the stop.
	for w.collect(events, 0) && w.last == len(events) {
	}
}

// collect waits up to timeoutMs for ended connections and records them; false on an epoll error.
func (w *holdWatcher) collect(events []unix.EpollEvent, timeoutMs int) bool {
	n, err := unix.EpollWait(w.epfd, events, timeoutMs)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false
	}
	w.last = max(n, 0)
	if n <= 0 {
		return true
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range events[:n] {
		reason := lossClosed
		if ev.Events&unix.EPOLLERR != 0 { // a reset sets the socket error; a FIN does not
			reason = lossReset
		}
		w.loss.Add(reason, now)
		w.seen++
		if w.onEnd != nil {
			w.onEnd(reason)
		}
	}
	if w.seen == w.watched {
		close(w.allGone)
		w.seen++ // once
	}
	return true
}

// gone is closed once every held connection has ended (never for a nil watcher, or one that
// watches nothing).
func (w *holdWatcher) gone() <-chan struct{} {
	if w == nil || w.watched == 0 {
		return nil
	}
	return w.allGone
}

// stop ends the watch and returns what it saw.
func (w *holdWatcher) stop() HoldLoss {
	if w == nil {
		return HoldLoss{}
	}
	w.stopped.Store(true)
	<-w.done
	_ = unix.Close(w.epfd)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loss
}
