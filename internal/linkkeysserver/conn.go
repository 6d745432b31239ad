package linkkeysserver

import (
	"bufio"
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

// readBufSize is the read buffer a connection holds only while active; frames
// whose body fits are dispatched straight from it without a copy.
const readBufSize = 4096

// maxPooledOut is the largest write batch buffer returned to the pool.
const maxPooledOut = 64 << 10

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// conn is one established connection. Idle connections hold this struct,
// the tls.Conn and the socket, nothing else: no goroutine, no buffers.
type conn struct {
	srv   *Server
	nc    net.Conn
	tc    *tls.Conn
	fd    int32
	gen   uint32
	state atomic.Uint32
	armed bool // registered in the poller's epoll set (possibly disabled)

	peer    netip.Addr
	prKey   admit.SourceKey // public-read source key, computed on first use
	hasPr   bool
	authKey admit.SourceKey
	hasAuth bool

	idleStart int64 // mono ns when the wait for the current prefix began
	idleFresh bool  // a frame was dispatched: the next wait starts a new idle period
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
	c := &conn{srv: s, nc: nc, tc: tc, peer: peer, fd: -1, wslot: -1,
		idleStart: now, lastRead: now, rdl: dl, wdl: dl}
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

// serve runs the message loop (reference §1.6) until the connection closes
// or parks. One goroutine reads a frame, dispatches it in order and appends
// the encoded response to a write batch; the batch is written with one TLS
// write when no complete frame prefix is buffered any more, or when it holds
// min(MaxInflightFrames, WriteQueueBound) responses. While a write blocks
// nothing more is read, so a client that does not read its responses meets
// TCP backpressure, never an unbounded queue.
func (c *conn) serve() {
	s := c.srv
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(c.tc)
	out := outPool.Get().(*[]byte)
	pending := 0
	flushAt := min(s.cfg.MaxInflightFrames, s.cfg.WriteQueueBound)
	for {
		if br.Buffered() < 4 && pending > 0 {
			if !c.flush(*out) {
				c.finish(br, out, false)
				return
			}
			*out = (*out)[:0]
			pending = 0
		}
		if br.Buffered() < 4 {
			if c.idleFresh {
				c.idleStart = s.mono()
				c.idleFresh = false
			}
			switch c.waitPrefix(br) {
			case waitData:
			case waitPark:
				c.release(br, out)
				if c.park() {
					return
				}
				br = readerPool.Get().(*bufio.Reader)
				br.Reset(c.tc)
				out = outPool.Get().(*[]byte)
				continue
			default:
				c.finish(br, out, false)
				return
			}
		}
		hdr, _ := br.Peek(4)
		n := binary.BigEndian.Uint32(hdr)
		_, _ = br.Discard(4)
		if n > linkkeys.MaxFrameSize {
			// Checked before any allocation; no response, the stream
			// cannot be resynchronised.
			s.logger.Debug("linkkeysserver: oversized frame", "peer", c.peer, "len", n)
			c.finish(br, out, pending > 0)
			return
		}
		c.lastRead = s.mono()
		body, ok := c.readBody(br, int(n))
		if !ok {
			c.finish(br, out, pending > 0)
			return
		}
		var closeAfter bool
		*out, closeAfter = s.dispatch(*out, body, c)
		if int(n) <= br.Size() {
			_, _ = br.Discard(int(n))
		}
		s.m.frames.Add(1)
		c.idleFresh = true
		pending++
		if closeAfter {
			c.finish(br, out, true)
			return
		}
		if pending >= flushAt {
			if !c.flush(*out) {
				c.finish(br, out, false)
				return
			}
			*out = (*out)[:0]
			pending = 0
		}
	}
}

// readBody reads an n-byte frame body under the I/O timeout. A body that
// fits the read buffer is returned in place (valid until the next read);
// a larger one gets a buffer of exactly n bytes. frame_buffer_bytes counts n
// from the accepted prefix until the body is handed to dispatch or the read
// fails.
func (c *conn) readBody(br *bufio.Reader, n int) ([]byte, bool) {
	s := c.srv
	s.m.frameBuf.Add(int64(n))
	defer s.m.frameBuf.Add(-int64(n))
	if n <= br.Size() {
		if br.Buffered() < n {
			c.ensureReadDeadline()
		}
		body, err := br.Peek(n)
		if err != nil {
			s.logger.Debug("linkkeysserver: frame body read failed", "peer", c.peer, "err", err)
			return nil, false
		}
		return body, true
	}
	c.ensureReadDeadline()
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		s.logger.Debug("linkkeysserver: frame body read failed", "peer", c.peer, "err", err)
		return nil, false
	}
	return body, true
}

// slack is how far past the I/O timeout a body read or write may run: the
// deadline is renewed only when less than IOTimeout is left, to at most
// IOTimeout+slack, so a busy connection resets it once per slack period
// rather than per frame.
func (s *Server) slack() int64 {
	return int64(min(s.cfg.IOTimeout/8, time.Second))
}

// ensureReadDeadline puts the read deadline between IOTimeout and
// IOTimeout+slack away.
func (c *conn) ensureReadDeadline() {
	s := c.srv
	now := s.mono()
	if left := c.rdl - now; left < int64(s.cfg.IOTimeout) || left > int64(s.cfg.IOTimeout)+s.slack() {
		c.rdl = now + int64(s.cfg.IOTimeout) + s.slack()
		_ = c.nc.SetReadDeadline(s.wall(c.rdl))
	}
}

// waitPrefix waits until a whole 4-byte prefix is buffered, under the idle
// timeout (which covers the whole prefix). With nothing buffered for
// ParkAfter it reports waitPark. Deadlines are set lazily: one that fires
// before it is due is simply re-armed.
func (c *conn) waitPrefix(br *bufio.Reader) int {
	s := c.srv
	idle := int64(s.cfg.IdleTimeout)
	parkAfter := int64(s.cfg.ParkAfter)
	for br.Buffered() < 4 {
		idleEnd := c.idleStart + idle
		target := idleEnd
		canPark := s.poller != nil && br.Buffered() == 0
		if canPark {
			target = min(target, c.lastRead+parkAfter)
		}
		if s.closing.Load() && br.Buffered() == 0 {
			return waitClose
		}
		if c.rdl > target || c.rdl <= s.mono() {
			c.rdl = target
			_ = c.nc.SetReadDeadline(s.wall(target))
			if s.closing.Load() && br.Buffered() == 0 {
				return waitClose // Shutdown's interrupt may have been overwritten
			}
		}
		_, err := br.Peek(br.Buffered() + 1)
		if err == nil {
			continue
		}
		if !isTimeout(err) {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.logger.Debug("linkkeysserver: read failed", "peer", c.peer, "err", err)
			}
			return waitClose
		}
		now := s.mono()
		switch {
		case s.closing.Load() && br.Buffered() == 0:
			return waitClose
		case now >= idleEnd:
			s.logger.Debug("linkkeysserver: idle timeout", "peer", c.peer)
			return waitClose
		case canPark && now >= c.lastRead+parkAfter:
			return waitPark
		}
	}
	return waitData
}

// flush writes the batch with one TLS write under the I/O timeout.
func (c *conn) flush(b []byte) bool {
	s := c.srv
	now := s.mono()
	if left := c.wdl - now; left < int64(s.cfg.IOTimeout) || left > int64(s.cfg.IOTimeout)+s.slack() {
		c.wdl = now + int64(s.cfg.IOTimeout) + s.slack()
		_ = c.nc.SetWriteDeadline(s.wall(c.wdl))
	}
	if _, err := c.tc.Write(b); err != nil {
		s.logger.Debug("linkkeysserver: write failed", "peer", c.peer, "err", err)
		return false
	}
	return true
}

// finish ends an active connection: like upstream's writer stage, it first
// writes the responses already produced when flush is set.
func (c *conn) finish(br *bufio.Reader, out *[]byte, flush bool) {
	if flush && len(*out) > 0 {
		c.flush(*out)
	}
	c.release(br, out)
	c.close()
}

func (c *conn) release(br *bufio.Reader, out *[]byte) {
	br.Reset(nil)
	readerPool.Put(br)
	if cap(*out) <= maxPooledOut {
		*out = (*out)[:0]
		outPool.Put(out)
	}
}

// park hands the connection to the poller: its goroutine exits and the
// socket waits in the epoll set, with its idle deadline in the wheel. It
// returns false when the connection became readable while parking; the
// caller then keeps serving. Only called with nothing buffered in the read
// buffer, after a read timed out (so the tls.Conn holds no decrypted bytes
// either).
func (c *conn) park() bool {
	s := c.srv
	p := s.poller
	c.state.Store(stateParking)
	if s.closing.Load() {
		c.state.Store(stateActive)
		c.close()
		return true
	}
	s.m.parked.Add(1)
	p.wheelAdd(c, c.idleStart+int64(s.cfg.IdleTimeout))
	if err := p.arm(c); err != nil {
		s.logger.Warn("linkkeysserver: cannot park connection; closing it", "peer", c.peer, "err", err)
		p.wheelRemove(c)
		s.m.parked.Add(-1)
		c.state.Store(stateActive)
		c.close()
		return true
	}
	// Nothing may touch c after a successful CAS: the poller may already
	// have woken it into a new goroutine, or the wheel closed it.
	if c.state.CompareAndSwap(stateParking, stateParked) {
		if s.closing.Load() && c.state.CompareAndSwap(stateParked, stateClosed) {
			c.closeParked()
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

// close tears down an active connection (called by its goroutine). No TLS
// close_notify is sent, like upstream.
func (c *conn) close() {
	c.state.Store(stateClosed)
	c.teardown()
}

// closeParked tears down a connection that was parked; the caller won the
// CAS from stateParked to stateClosed.
func (c *conn) closeParked() {
	s := c.srv
	s.m.parked.Add(-1)
	s.poller.wheelRemove(c)
	c.teardown()
}

func (c *conn) teardown() {
	s := c.srv
	if s.poller != nil {
		s.poller.disarm(c) // before close: the fd number may be reused at once
	}
	if c.fd >= 0 {
		s.table.clear(int(c.fd), c)
	}
	_ = c.nc.Close()
	s.m.established.Add(-1)
	s.m.open.Add(-1)
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

// authAttemptKey is the API-key attempt limiter key: the peer address
// string, not prefix-normalised.
func (c *conn) authAttemptKey() admit.SourceKey {
	if !c.hasAuth {
		c.authKey = admit.KeyForAddr(c.peer, 128)
		c.hasAuth = true
	}
	return c.authKey
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
