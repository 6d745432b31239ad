package linkkeysserver

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Connection states. A connection is owned by exactly one party at a time:
// its serving goroutine (active, parking), the poller (parked) or whoever
// moved it to closed.
const (
	stateHandshaking uint32 = iota // admitted, in the TLS handshake
	stateActive                    // a goroutine serves it
	stateParking                   // its goroutine is registering it with the poller
	stateWakePending               // readable while parking: the parking goroutine keeps serving
	stateParked                    // no goroutine; waits in the epoll set and the wheel
	stateClosed
)

// readBufSize is the size of the read buffer a connection holds only while
// bytes of a frame are buffered; frames whose body fits are dispatched
// straight from it without a copy.
const readBufSize = 4096

// maxPooledOut is the largest write batch buffer returned to the pool.
const maxPooledOut = 64 << 10

// rbuf is a connection's read buffer: b[r:w] is unread.
type rbuf struct {
	b    []byte
	r, w int
}

var rbufPool = sync.Pool{New: func() any { return &rbuf{b: make([]byte, readBufSize)} }}
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// fill reads once from src into the free end of the buffer, moving unread
// bytes to the front first. It reports an error only when no byte was read.
func (rb *rbuf) fill(src io.Reader) error {
	if rb.r > 0 {
		rb.w = copy(rb.b, rb.b[rb.r:rb.w])
		rb.r = 0
	}
	n, err := src.Read(rb.b[rb.w:])
	rb.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// conn is one established connection. A parked connection holds this struct,
// the tls.Conn and the socket, nothing else: no goroutine, no buffers.
type conn struct {
	srv    *Server
	nc     net.Conn
	tc     *tls.Conn
	fd     int32
	gen    uint32
	state  atomic.Uint32
	armed  bool  // registered in the poller's epoll set (possibly disabled)
	noPark bool  // the poller refused it once: keep the goroutine
	src    uint8 // source prefix index + 1 (Server.srcs), 0 for none; fits the padding before pre

	pre   [4]byte // landing area of a wait's first bytes, before a buffer is taken
	rb    *rbuf   // read buffer, only while unread bytes are buffered
	out   *[]byte // responses not yet written, only while there are some
	peer  netip.Addr
	prKey admit.SourceKey // public-read source key, computed on first use
	hasPr bool

	idleFresh bool  // a frame was dispatched: the next wait starts a new idle period
	idleStart int64 // mono ns when the wait for the current prefix began
	lastRead  int64 // mono ns of the last frame read (or wake-up); parking counts from it
	rdl       int64 // read deadline in force (mono ns)
	wdl       int64 // write deadline in force (mono ns)

	// Idle-timeout wheel links, guarded by the poller's mutex.
	wdeadline    int64
	wnext, wprev *conn
	wslot        int32
}

func (s *Server) newConn(nc net.Conn, tc *tls.Conn, peer netip.Addr, hsDeadline time.Time) *conn {
	now := s.mono()
	dl := int64(hsDeadline.Sub(s.epoch))
	// lastRead one ParkAfter ago: right after the handshake the connection
	// checks for a first request without waiting (a zero-deadline read) and
	// parks at once if there is none, so the handshake goroutine and its
	// large stack go away immediately.
	c := &conn{srv: s, nc: nc, tc: tc, peer: peer, fd: -1, wslot: -1,
		idleStart: now, lastRead: now - int64(s.cfg.ParkAfter), rdl: dl, wdl: dl}
	c.gen = s.gens.Add(1)
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { c.fd = int32(fd) })
		}
	}
	if c.fd >= 0 {
		s.table.set(int(c.fd), c)
	}
	return c
}

// Results of waitPrefix.
const (
	waitData = iota
	waitPark
	waitClose
)

func (c *conn) buffered() int {
	if c.rb == nil {
		return 0
	}
	return c.rb.w - c.rb.r
}

// releaseRead returns an empty read buffer to the pool.
func (c *conn) releaseRead() {
	if c.rb != nil && c.rb.r == c.rb.w {
		c.rb.r, c.rb.w = 0, 0
		rbufPool.Put(c.rb)
		c.rb = nil
	}
}

// outBuf returns the pending-responses buffer, taking one from the pool.
func (c *conn) outBuf() *[]byte {
	if c.out == nil {
		c.out = outPool.Get().(*[]byte)
	}
	return c.out
}

func (c *conn) releaseOut() {
	if c.out != nil {
		if cap(*c.out) <= maxPooledOut {
			*c.out = (*c.out)[:0]
			outPool.Put(c.out)
		}
		c.out = nil
	}
}

// serve runs the message loop until the connection closes
// or parks. One goroutine reads a frame, dispatches it in order and appends
// the encoded response to a write batch; the batch is written with one TLS
// write when no complete frame prefix is buffered any more, or when it holds
// min(MaxInflightFrames, WriteQueueBound) responses (frames read but not yet
// answered on the wire, and encoded responses held). While a write blocks
// nothing more is read, so a client that does not read its responses meets
// TCP backpressure, never an unbounded queue.
func (c *conn) serve() {
	s := c.srv
	pending := 0
	flushAt := min(s.cfg.MaxInflightFrames, s.cfg.WriteQueueBound)
	for {
		if c.buffered() < 4 {
			if pending > 0 {
				if why, ok := c.flush(); !ok {
					c.finish(false, why)
					return
				}
				pending = 0
			}
			if c.idleFresh {
				c.idleStart = s.mono()
				c.idleFresh = false
			}
			c.releaseRead()
			switch res, why := c.waitPrefix(); res {
			case waitData:
			case waitPark:
				if c.park() {
					return
				}
				continue
			default:
				c.finish(false, why)
				return
			}
		}
		rb := c.rb
		n := binary.BigEndian.Uint32(rb.b[rb.r:])
		rb.r += 4
		if n > linkkeys.MaxFrameSize {
			// Checked before any allocation; no response, the stream
			// cannot be resynchronised.
			s.logger.Debug("linkkeysserver: oversized frame", "peer", c.peer, "len", n)
			c.finish(pending > 0, closeOversizedFrame)
			return
		}
		c.lastRead = s.mono()
		body, inPlace, why, ok := c.readBody(int(n))
		if !ok {
			c.finish(pending > 0, why)
			return
		}
		out := c.outBuf()
		var closeAfter bool
		*out, closeAfter = s.dispatch(*out, body, c)
		if inPlace {
			c.rb.r += int(n)
		}
		s.m.frames.Add(1)
		c.idleFresh = true
		pending++
		if closeAfter {
			// The response would exceed the frame limit: like upstream's
			// writer, send the responses before it, then close.
			s.logger.Debug("linkkeysserver: response too large; closing", "peer", c.peer)
			c.finish(true, closeOversizedResponse)
			return
		}
		if pending >= flushAt {
			if why, ok := c.flush(); !ok {
				c.finish(false, why)
				return
			}
			pending = 0
		}
	}
}

// readBody reads an n-byte frame body. A body already buffered whole is
// returned in place at once: nothing of it waits on the wire, so it holds no
// part of the frame budget. Otherwise the body first reserves n bytes of
// TCP_MAX_INFLIGHT_FRAME_BYTES (frame_buffer_bytes counts them until the body
// is handed to dispatch or the read fails; a frame that does not fit closes
// the connection, closed_frame_budget), then is read under a bodyPacer: the
// whole body within TCP_IO_TIMEOUT_SECONDS of its prefix, and at least the
// minimum rate in every grace window. A body that fits the read buffer is
// returned in place (valid until the buffer is read again; inPlace reports
// it); a larger one gets a buffer of exactly n bytes.
func (c *conn) readBody(n int) (body []byte, inPlace bool, why closeReason, ok bool) {
	s := c.srv
	rb := c.rb
	if rb.w-rb.r < n && n <= len(rb.b) {
		// The rest of the record the prefix came in may already sit in the
		// tls.Conn (a woken connection reads its first 4 bytes alone): take
		// what is there, with a deadline in the past so that no read waits.
		c.rdl = 0
		_ = c.nc.SetReadDeadline(s.epoch)
		for rb.w-rb.r < n && rb.fill(c.tc) == nil {
		}
	}
	if rb.w-rb.r >= n {
		return rb.b[rb.r : rb.r+n], true, 0, true
	}
	if !s.reserveFrameBytes(n) {
		s.logger.Debug("linkkeysserver: frame budget exhausted; closing", "peer", c.peer, "len", n,
			"budget", s.cfg.MaxInflightFrameBytes)
		return nil, false, closeFrameBudget, false
	}
	defer s.m.frameBuf.Add(-int64(n))
	small := n <= len(rb.b)
	got := rb.w - rb.r
	if !small {
		body = make([]byte, n)
		copy(body, rb.b[rb.r:rb.w])
		rb.r = rb.w
	}
	p := c.newBodyPacer(n, got)
	for got < n {
		if why, ok := p.arm(); !ok {
			return nil, false, why, false
		}
		var k int
		var err error
		if small {
			before := rb.w - rb.r
			err = rb.fill(c.tc)
			k = rb.w - rb.r - before
		} else {
			k, err = c.tc.Read(body[got:])
		}
		got += k
		if why, ok := p.step(got, err); !ok {
			s.logger.Debug("linkkeysserver: frame body read failed", "peer", c.peer, "len", n, "got", got, "err", err, "reason", why)
			return nil, false, why, false
		}
	}
	if small {
		return rb.b[rb.r : rb.r+n], true, 0, true
	}
	return body, false, 0, true
}

// reserveFrameBytes adds n to frame_buffer_bytes unless that would exceed
// TCP_MAX_INFLIGHT_FRAME_BYTES, so the gauge never passes the budget.
func (s *Server) reserveFrameBytes(n int) bool {
	for {
		cur := s.m.frameBuf.Load()
		if cur+int64(n) > s.cfg.MaxInflightFrameBytes {
			return false
		}
		if s.m.frameBuf.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// bodyPacer enforces the deadlines of one frame body: all of it within
// IOTimeout of the prefix (closed_io_timeout), and in each window of
// FrameBodyGrace from the prefix at least MinFrameBodyRate x FrameBodyGrace
// bytes, or the rest of the body when that is less (closed_slow_frame_body).
// A client that sends all of a large frame but its last byte meets the
// second rule one window after it stops, not at the I/O timeout.
type bodyPacer struct {
	c         *conn
	n         int   // body length
	deadline  int64 // mono: the whole body by then
	winEnd    int64 // mono: end of the current window
	winStart  int   // bytes read when the window began
	need      int   // bytes the window must bring
	rearm     bool  // the deadline was moved by someone else (Shutdown)
	grace     int64
	ratePerWn int
}

func (c *conn) newBodyPacer(n, got int) *bodyPacer {
	s := c.srv
	now := s.mono()
	perWindow := max(1, min(float64(s.cfg.MinFrameBodyRate)*s.cfg.FrameBodyGrace.Seconds(), linkkeys.MaxFrameSize+1))
	p := &bodyPacer{c: c, n: n, deadline: now + int64(s.cfg.IOTimeout), grace: int64(s.cfg.FrameBodyGrace),
		ratePerWn: int(perWindow)}
	p.openWindow(now, got)
	return p
}

func (p *bodyPacer) openWindow(now int64, got int) {
	p.winEnd, p.winStart, p.need = now+p.grace, got, min(p.ratePerWn, p.n-got)
}

// arm sets the read deadline to the nearer of the body deadline and the
// window's end; it changes only once per window.
func (p *bodyPacer) arm() (closeReason, bool) {
	c := p.c
	s := c.srv
	target := min(p.deadline, p.winEnd)
	if c.rdl != target || p.rearm {
		c.rdl, p.rearm = target, false
		_ = c.nc.SetReadDeadline(s.wall(target))
	}
	if s.closing.Load() { // Shutdown's interrupt may have been overwritten
		return closeShutdown, false
	}
	return 0, true
}

// step accounts for one read that brought the body to got bytes and ended
// with err.
func (p *bodyPacer) step(got int, err error) (closeReason, bool) {
	c := p.c
	s := c.srv
	now := s.mono()
	if now >= p.winEnd && got < p.n {
		if got-p.winStart < p.need {
			return closeSlowBody, false
		}
		p.openWindow(now, got)
	}
	if err == nil {
		return 0, true
	}
	if !isTimeout(err) {
		return c.readFailure(err, true), false
	}
	switch {
	case s.closing.Load():
		return closeShutdown, false
	case now >= p.deadline:
		return closeIOTimeout, false
	}
	// Early: the window ended (handled above) or Shutdown moved the
	// deadline; set it again.
	p.rearm = true
	return 0, true
}

// readFailure classifies a read error other than a timeout: the stream
// ending inside a frame (inFrame, or a partial prefix buffered) or a TLS
// record the server cannot read is a malformed request; EOF or a reset
// between frames is the peer's doing; anything while the server shuts down
// is the shutdown.
func (c *conn) readFailure(err error, inFrame bool) closeReason {
	if c.srv.closing.Load() || errors.Is(err, net.ErrClosed) {
		return closeShutdown
	}
	var rh tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if inFrame || c.buffered() > 0 {
			return closeMalformed
		}
		return closePeer
	case errors.As(err, &rh), errors.As(err, &op) && op.Op == "local error":
		// crypto/tls reports records it cannot decrypt or parse as a
		// "local error" alert it sends back.
		return closeMalformed
	}
	return closePeer
}

// slack is how far past the I/O timeout a write may run: the deadline is
// renewed only when less than IOTimeout or more than IOTimeout+slack is
// left, so a busy connection resets it about once per slack period rather
// than per frame.
func (s *Server) slack() int64 {
	return int64(min(s.cfg.IOTimeout/8, time.Second))
}

// waitPrefix waits until a whole 4-byte prefix is buffered, under the idle
// timeout (which covers the whole prefix). It holds no buffer while nothing
// has arrived: the first bytes land in c.pre. With nothing buffered for
// ParkAfter since the last frame it reports waitPark; its last read then
// timed out, which proves the tls.Conn holds no decrypted bytes and no whole
// record (Go's tls.Conn serves those before touching the socket), so the
// socket's readability is a complete wake-up signal. Deadlines are set
// lazily: one that fires before it is due is simply re-armed. With
// waitClose it says why.
func (c *conn) waitPrefix() (int, closeReason) {
	s := c.srv
	idle := int64(s.cfg.IdleTimeout)
	parkAfter := int64(s.cfg.ParkAfter)
	for c.buffered() < 4 {
		idleEnd := c.idleStart + idle
		target := idleEnd
		canPark := s.poller != nil && !c.noPark && c.buffered() == 0
		if canPark {
			target = min(target, c.lastRead+parkAfter)
		}
		if s.closing.Load() && c.buffered() == 0 {
			return waitClose, closeShutdown
		}
		if now := s.mono(); c.rdl > target || c.rdl <= now {
			c.rdl = target
			_ = c.nc.SetReadDeadline(s.wall(target))
			if s.closing.Load() && c.buffered() == 0 {
				return waitClose, closeShutdown // Shutdown's interrupt may have been overwritten
			}
		}
		var err error
		if c.rb == nil {
			var n int
			n, err = c.tc.Read(c.pre[:])
			if n > 0 {
				c.rb = rbufPool.Get().(*rbuf)
				c.rb.r, c.rb.w = 0, copy(c.rb.b, c.pre[:n])
				err = nil
			} else if err == nil {
				err = io.ErrNoProgress
			}
		} else {
			err = c.rb.fill(c.tc)
		}
		if err == nil {
			continue
		}
		if !isTimeout(err) {
			why := c.readFailure(err, false)
			if why != closePeer || !errors.Is(err, io.EOF) {
				s.logger.Debug("linkkeysserver: read failed", "peer", c.peer, "err", err, "reason", why)
			}
			return waitClose, why
		}
		now := s.mono()
		switch {
		case s.closing.Load() && c.buffered() == 0:
			return waitClose, closeShutdown
		case now >= idleEnd:
			s.logger.Debug("linkkeysserver: idle timeout", "peer", c.peer)
			return waitClose, closeIdleTimeout
		case canPark && now >= c.lastRead+parkAfter:
			return waitPark, 0
		}
	}
	return waitData, 0
}

// flush writes the pending responses with one TLS write under the I/O
// timeout and releases the buffer. On failure it says why.
func (c *conn) flush() (closeReason, bool) {
	s := c.srv
	if c.out == nil || len(*c.out) == 0 {
		return 0, true
	}
	now := s.mono()
	if left := c.wdl - now; left < int64(s.cfg.IOTimeout) || left > int64(s.cfg.IOTimeout)+s.slack() {
		c.wdl = now + int64(s.cfg.IOTimeout) + s.slack()
		_ = c.nc.SetWriteDeadline(s.wall(c.wdl))
	}
	_, err := c.tc.Write(*c.out)
	c.releaseOut()
	if err != nil {
		s.logger.Debug("linkkeysserver: write failed", "peer", c.peer, "err", err)
		switch {
		case s.closing.Load() || errors.Is(err, net.ErrClosed):
			return closeShutdown, false
		case isTimeout(err):
			return closeIOTimeout, false
		}
		return closePeer, false
	}
	return 0, true
}

// finish ends an active connection for the reason why: like upstream's
// writer stage, it first writes the responses already produced when flush
// is set.
func (c *conn) finish(flush bool, why closeReason) {
	if flush {
		c.flush()
	}
	c.releaseOut()
	if c.rb != nil {
		c.rb.r, c.rb.w = 0, 0
		rbufPool.Put(c.rb)
		c.rb = nil
	}
	c.close(why)
}

// park hands the connection to the poller: its goroutine exits and the
// socket waits in the epoll set, with its idle deadline in the wheel. It
// returns false when the connection became readable while parking, or
// cannot be parked; the caller then keeps serving. Only called with nothing
// buffered in the read buffer, after a read timed out (so the tls.Conn holds
// no decrypted bytes either).
func (c *conn) park() bool {
	s := c.srv
	p := s.poller
	c.state.Store(stateParking)
	if s.closing.Load() {
		c.state.Store(stateActive)
		c.close(closeShutdown)
		return true
	}
	s.m.parked.Add(1)
	p.wheelAdd(c, c.idleStart+int64(s.cfg.IdleTimeout))
	if err := p.arm(c); err != nil {
		// Keep the connection, with its goroutine: closing it would drop
		// a healthy client for the server's own trouble.
		s.logger.Warn("linkkeysserver: cannot park connection; it keeps its goroutine", "peer", c.peer, "err", err)
		p.wheelRemove(c)
		s.m.parked.Add(-1)
		c.state.Store(stateActive)
		c.noPark = true
		return false
	}
	// Nothing may touch c after a successful CAS: the poller may already
	// have woken it into a new goroutine, or the wheel closed it.
	if c.state.CompareAndSwap(stateParking, stateParked) {
		if s.closing.Load() && c.state.CompareAndSwap(stateParked, stateClosed) {
			c.closeParked(closeShutdown)
		}
		return true
	}
	// The poller saw it readable during parking (stateWakePending).
	p.wheelRemove(c)
	s.m.parked.Add(-1)
	c.state.Store(stateActive)
	c.lastRead = s.mono() // a fresh grace period, so the wait reads instead of re-parking
	return false
}

// wake is called by the poller when a parked connection's socket is
// readable.
func (c *conn) wake() {
	for {
		switch c.state.Load() {
		case stateParked:
			if c.state.CompareAndSwap(stateParked, stateActive) {
				c.srv.poller.wheelRemove(c)
				c.srv.m.parked.Add(-1)
				// A fresh grace period: the read deadline fired before
				// parking, and the wait must read, not re-park at once.
				c.lastRead = c.srv.mono()
				go c.serve()
				return
			}
		case stateParking:
			if c.state.CompareAndSwap(stateParking, stateWakePending) {
				return
			}
		default:
			return
		}
	}
}

// close tears down an active connection (called by its goroutine) for the
// reason why. No TLS close_notify is sent, like upstream.
func (c *conn) close(why closeReason) {
	c.state.Store(stateClosed)
	c.teardown(why)
}

// closeParked tears down a connection that was parked; the caller won the
// CAS from stateParked to stateClosed.
func (c *conn) closeParked(why closeReason) {
	s := c.srv
	s.m.parked.Add(-1)
	s.poller.wheelRemove(c)
	c.teardown(why)
}

func (c *conn) teardown(why closeReason) {
	s := c.srv
	if s.poller != nil {
		s.poller.disarm(c) // before close: the fd number may be reused at once
	}
	if c.fd >= 0 {
		s.table.clear(int(c.fd), c)
	}
	_ = c.nc.Close()
	s.m.closed[why].Add(1)
	if c.src != 0 {
		s.srcs.at(c.src).closed[why].Add(1)
	}
	s.m.established.Add(-1)
	s.addOpen(-1)
}

// publicReadKey is the connection's public-read limiter key (the peer
// address under PUBLIC_READ_IPV6_PREFIX), hashed once.
func (c *conn) publicReadKey() admit.SourceKey {
	if !c.hasPr {
		c.prKey = admit.KeyForAddr(c.peer, c.srv.cfg.PublicRead.IPv6Prefix)
		c.hasPr = true
	}
	return c.prKey
}

// authAttemptKey is the API-key attempt limiter key: the peer address,
// not prefix-normalised. Requests with auth are rare here, so it is not
// cached.
func (c *conn) authAttemptKey() admit.SourceKey {
	return admit.KeyForAddr(c.peer, 128)
}

// connTable maps socket descriptors to established connections, so the
// poller can find a woken connection and Shutdown can reach every one. It is
// a two-level array of atomic pointers grown under a mutex.
type connTable struct {
	mu     sync.Mutex
	chunks atomic.Pointer[[]*connChunk]
}

const tableChunk = 4096

type connChunk [tableChunk]atomic.Pointer[conn]

func (t *connTable) get(fd int) *conn {
	if fd < 0 {
		return nil
	}
	cs := t.chunks.Load()
	if cs == nil || fd/tableChunk >= len(*cs) {
		return nil
	}
	return (*cs)[fd/tableChunk][fd%tableChunk].Load()
}

func (t *connTable) set(fd int, c *conn) {
	i := fd / tableChunk
	cs := t.chunks.Load()
	if cs == nil || i >= len(*cs) {
		t.mu.Lock()
		cs = t.chunks.Load()
		if cs == nil || i >= len(*cs) {
			var grown []*connChunk
			if cs != nil {
				grown = append(grown, *cs...)
			}
			for len(grown) <= i {
				grown = append(grown, new(connChunk))
			}
			t.chunks.Store(&grown)
			cs = &grown
		}
		t.mu.Unlock()
	}
	(*cs)[i][fd%tableChunk].Store(c)
}

func (t *connTable) clear(fd int, c *conn) {
	cs := t.chunks.Load()
	if cs == nil || fd/tableChunk >= len(*cs) {
		return
	}
	(*cs)[fd/tableChunk][fd%tableChunk].CompareAndSwap(c, nil)
}

func (t *connTable) each(f func(*conn)) {
	cs := t.chunks.Load()
	if cs == nil {
		return
	}
	for _, ch := range *cs {
		for i := range ch {
			if c := ch[i].Load(); c != nil {
				f(c)
			}
		}
	}
}
