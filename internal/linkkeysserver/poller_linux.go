//go:build linux

package linkkeysserver

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// wheelTick is the granularity of the idle-timeout wheel for parked
// connections: a parked connection is closed between IdleTimeout and
// IdleTimeout+wheelTick after it began waiting for its next frame.
const wheelTick = 100 * time.Millisecond

// wheelSlots is the number of wheel slots (a power of two); one turn of the
// wheel covers wheelSlots*wheelTick, and longer deadlines simply stay in
// their slot for several turns.
const wheelSlots = 1024

// eventfdID marks the shutdown eventfd in epoll event data.
const eventfdID = -1

// poller holds parked connections: an epoll set of their sockets (one-shot,
// level-triggered, alongside Go's own netpoller registration of the same
// fds) and a hashed timer wheel of their idle deadlines. One goroutine waits
// in epoll_wait with a wheelTick timeout, starts a serving goroutine for each
// socket that becomes readable, and closes the ones whose idle deadline has
// passed.
type poller struct {
	srv  *Server
	epfd int
	evfd int
	done chan struct{}

	mu    sync.Mutex // guards the wheel and conn.wnext/wprev/wslot
	slots [wheelSlots]*conn
	cur   int64 // last tick processed

	fdMu   sync.Mutex // guards closed: kick must never write to a closed (reused) fd number
	closed bool
}

func newPoller(s *Server) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("linkkeysserver: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("linkkeysserver: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: eventfdID}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("linkkeysserver: epoll_ctl eventfd: %w", err)
	}
	p := &poller{srv: s, epfd: epfd, evfd: evfd, done: make(chan struct{})}
	p.cur = s.mono() / int64(wheelTick)
	go p.run()
	return p, nil
}

// arm registers c's socket for one readiness event. Level-triggered: bytes
// that arrived before the call fire at once.
func (p *poller) arm(c *conn) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: c.fd, Pad: int32(c.gen)}
	op := unix.EPOLL_CTL_ADD
	if c.armed {
		op = unix.EPOLL_CTL_MOD
	}
	err := unix.EpollCtl(p.epfd, op, int(c.fd), &ev)
	if err != nil && op == unix.EPOLL_CTL_MOD && errors.Is(err, unix.ENOENT) {
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(c.fd), &ev)
	}
	if err != nil {
		return fmt.Errorf("linkkeysserver: epoll_ctl fd %d: %w", c.fd, err)
	}
	c.armed = true
	return nil
}

// disarm removes c's socket from the epoll set. It must run before the
// socket is closed, so a reused fd number is never confused with c.
func (p *poller) disarm(c *conn) {
	if c.armed {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(c.fd), nil)
		c.armed = false
	}
}

func (p *poller) wheelAdd(c *conn, deadline int64) {
	p.mu.Lock()
	c.wdeadline = deadline
	// The slot of the first tick at or after the deadline: processing tick
	// t happens at or after t*wheelTick, when the entry is due.
	t := (deadline + int64(wheelTick) - 1) / int64(wheelTick)
	if t <= p.cur {
		t = p.cur + 1
	}
	i := int32(t & (wheelSlots - 1))
	c.wslot = i
	c.wprev = nil
	c.wnext = p.slots[i]
	if c.wnext != nil {
		c.wnext.wprev = c
	}
	p.slots[i] = c
	p.mu.Unlock()
}

func (p *poller) wheelRemove(c *conn) {
	p.mu.Lock()
	p.unlinkLocked(c)
	p.mu.Unlock()
}

func (p *poller) unlinkLocked(c *conn) {
	if c.wslot < 0 {
		return
	}
	if c.wprev != nil {
		c.wprev.wnext = c.wnext
	} else {
		p.slots[c.wslot] = c.wnext
	}
	if c.wnext != nil {
		c.wnext.wprev = c.wprev
	}
	c.wnext, c.wprev, c.wslot = nil, nil, -1
}

// expire closes the parked connections whose idle deadline has passed.
func (p *poller) expire(now int64) {
	var due []*conn
	p.mu.Lock()
	last := now / int64(wheelTick)
	first := p.cur + 1
	if last-first >= wheelSlots {
		first = last - wheelSlots + 1
	}
	for t := first; t <= last; t++ {
		for c := p.slots[t&(wheelSlots-1)]; c != nil; {
			next := c.wnext
			if c.wdeadline <= now && c.state.CompareAndSwap(stateParked, stateClosed) {
				p.unlinkLocked(c)
				due = append(due, c)
			}
			c = next
		}
	}
	if last > p.cur {
		p.cur = last
	}
	p.mu.Unlock()
	for _, c := range due {
		c.closeParked(closeIdleTimeout)
	}
}

func (p *poller) run() {
	defer close(p.done)
	defer func() {
		p.fdMu.Lock()
		p.closed = true
		unix.Close(p.evfd)
		unix.Close(p.epfd)
		p.fdMu.Unlock()
	}()
	events := make([]unix.EpollEvent, 256)
	s := p.srv
	for {
		n, err := unix.EpollWait(p.epfd, events, int(wheelTick/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			s.logger.Error("linkkeysserver: epoll_wait failed; parked connections are no longer served", "err", err)
			return
		}
		for i := 0; i < n; i++ {
			ev := events[i]
			if ev.Fd == eventfdID {
				var buf [8]byte
				_, _ = unix.Read(p.evfd, buf[:])
				continue
			}
			c := s.table.get(int(ev.Fd))
			if c == nil || c.gen != uint32(ev.Pad) {
				continue
			}
			c.wake()
		}
		p.expire(s.mono())
		// After Shutdown or Close, stop once no connection is left that
		// could still park (every connection counts in open until closed).
		if s.closing.Load() && s.m.open.Load() == 0 {
			return
		}
	}
}

// kick wakes the poller goroutine so it notices a shutdown at once.
func (p *poller) kick() {
	p.fdMu.Lock()
	defer p.fdMu.Unlock()
	if !p.closed {
		var one = [8]byte{1}
		_, _ = unix.Write(p.evfd, one[:])
	}
}
