package keycastserver

import (
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Accepting connections.
//
// Every listener is served by acceptLoop, whichever path then answers the connection. It keeps
// the number of open client connections under MaxConnections: at the cap it first closes the
// connection that has made no progress the longest, if one is waiting on its client
// (conntable.go); when every connection is being served, the new connection gets the shedding
// contract at once (HTTP 503, Retry-After: 1, the admission_rejected body) and is closed, rather
// than being accepted into a process that has no descriptors left to answer anyone. With
// MaxConnectionsPerSource, a source at its limit is shed the same way. When accept itself fails for lack of descriptors (EMFILE, ENFILE: something other
// than client connections used them up), the loop closes a descriptor it keeps in reserve,
// accepts the waiting connection, sheds it the same way and takes the reserve back, so the
// backlog drains instead of failing every accept again at once; it then backs off briefly and
// logs one line per logEvery however often that happens.

const (
	// DefaultMaxConnections is the most MaxConnections defaults to.
	DefaultMaxConnections = 10_000
	// shedLingerSlots bounds the shed connections that linger to deliver their 503; more are
	// answered and closed at once.
	shedLingerSlots = 64
	// shedLinger is how long a shed connection waits for the client to read its answer.
	shedLinger = 250 * time.Millisecond
	// logEvery is the least time between two log lines about shedding or descriptor trouble.
	logEvery = 10 * time.Second
	// acceptBackoffMax caps the pause after a failed accept.
	acceptBackoffMax = 250 * time.Millisecond
)

// shedResponse is the whole answer written to a connection shed at accept.
var shedResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n" +
	"Cache-Control: no-store\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(admissionBody)) + "\r\n\r\n" +
	string(admissionBody))

// defaultMaxConnections is the smaller of DefaultMaxConnections and half the open-file limit.
func defaultMaxConnections() int {
	if n, ok := openFileLimit(); ok && n/2 < DefaultMaxConnections {
		return max(int(n/2), 1)
	}
	return DefaultMaxConnections
}

// countedConn is a client connection counted in Server.open, and filed in Server.conns, until
// its first Close or its eviction.
type countedConn struct {
	net.Conn
	s    *Server
	once sync.Once
	node connNode
}

func newCountedConn(s *Server, c net.Conn) *countedConn {
	cc := &countedConn{Conn: c, s: s}
	cc.node.owner = cc
	return cc
}

func (c *countedConn) Close() error {
	c.node.state.Store(csGone)
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *countedConn) release() {
	c.s.conns.remove(&c.node)
	c.s.open.Add(-1)
}

// evict closes the connection for acceptLoop, which has taken it out of the table already;
// the slot is free when evict returns, whenever the goroutine serving it notices.
func (c *countedConn) evict() {
	c.Conn.Close()
	c.once.Do(c.release)
}

// Read is how net/http (and the fast path off Linux) reads: bytes arriving are progress, and
// the first bytes after an idle wait start a head.
func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.node.to(csIdle, csHead)
		c.s.conns.progress(&c.node, c.s.conns.clock(time.Now()))
	}
	return n, err
}

// countedOf finds the countedConn under the wrappers the server puts on a connection; nil when
// there is none.
func countedOf(c net.Conn) *countedConn {
	for {
		switch v := c.(type) {
		case *countedConn:
			return v
		case *framingGuard:
			c = v.Conn
		case *replayConn:
			c = v.Conn
		default:
			return nil
		}
	}
}

// CloseWrite lets net/http half-close as it does for a bare *net.TCPConn.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// rateLog writes a warning at most once per logEvery, with how many events it stands for.
type rateLog struct {
	last  atomic.Int64 // unix nanoseconds of the last line
	count atomic.Int64 // events since then
}

func (r *rateLog) event(s *Server, msg string, args ...any) {
	n := r.count.Add(1)
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(logEvery) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.count.Add(-n)
	s.log.Warn(msg, append(args, "events", n, "next_report_in", logEvery)...)
}

// acceptLoop accepts on ln until it is closed, handing each connection to serve (the fast path,
// or net/http through hand).
func (s *Server) acceptLoop(ln net.Listener, serve func(net.Conn)) error {
	spare, _ := os.Open(os.DevNull) // the reserve descriptor
	defer func() {
		if spare != nil {
			spare.Close()
		}
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closed.Load() {
				return ErrServerClosed
			}
			switch {
			case errors.Is(err, net.ErrClosed):
				return err
			case isFDExhausted(err):
				s.m.connsShedFD.Inc()
				s.fdLog.event(s, "accept: out of file descriptors; shedding new connections until some close",
					"err", err, "open_connections", s.open.Load())
				if spare == nil {
					spare, _ = os.Open(os.DevNull)
				}
				if spare != nil {
					// Free the reserve for the waiting connection, answer it, take the reserve back;
					// while that works there is no pause, so the backlog drains at accept speed.
					spare.Close()
					c, err := ln.Accept()
					if err == nil {
						s.shed(c, false) // closes c, which frees the reserve's descriptor again
					}
					spare, _ = os.Open(os.DevNull)
					if err == nil {
						continue
					}
				}
			default:
				// Anything else (a timeout, an aborted handshake, a short resource) is passing; a
				// server that stops accepting on it would be down for good.
				s.acceptLog.event(s, "accept failed; retrying", "err", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), acceptBackoffMax)
			select {
			case <-time.After(backoff):
			case <-s.stop:
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		cc := newCountedConn(s, c)
		if s.cfg.MaxConnectionsPerSource > 0 {
			cc.node.src = sourceOf(c)
		}
		// Filed busy, so that making room below cannot pick the newcomer itself.
		if !s.conns.add(&cc.node, csBusy, s.conns.clock(time.Now())) {
			s.m.connsShedSource.Inc()
			s.sourceLog.event(s, "per-source connection limit reached; answering that source's new connections 503 admission_rejected",
				"max_connections_per_source", s.cfg.MaxConnectionsPerSource, "source", cc.node.src)
			s.shed(c, true)
			continue
		}
		if s.open.Add(1) > int64(s.cfg.MaxConnections) && !s.makeRoom() {
			s.open.Add(-1)
			s.conns.remove(&cc.node)
			s.m.connsShedLimit.Inc()
			s.limitLog.event(s, "connection limit reached and every connection is being served; answering new connections 503 admission_rejected",
				"max_connections", s.cfg.MaxConnections)
			s.shed(c, true)
			continue
		}
		cc.node.state.Store(csHead)
		serve(cc)
	}
}

// makeRoom closes the open connection that has made no progress the longest and is not being
// served (conntable.go), counting it by what it was waiting for; false when there is none.
func (s *Server) makeRoom() bool {
	n, reason := s.conns.evict(s.conns.clock(time.Now()))
	if n == nil {
		return false
	}
	s.m.connsEvicted[reason].Inc()
	s.evictLog.event(s, "connection limit reached; closing the connections that made no progress the longest to make room",
		"max_connections", s.cfg.MaxConnections, "last_reason", reason)
	if n.owner != nil {
		n.owner.evict()
	}
	return true
}

// shed answers c with the shedding contract and closes it. With linger (and a free slot) it
// does so in the background after half-closing and reading what the client still sends for a
// moment, so that the client reads the 503 rather than a reset; otherwise at once.
func (s *Server) shed(c net.Conn, linger bool) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if linger {
		select {
		case s.shedSlots <- struct{}{}:
		default:
			linger = false
		}
	}
	if !linger {
		c.Write(shedResponse)
		c.Close()
		return
	}
	s.shedWG.Add(1)
	go func() {
		defer s.shedWG.Done()
		defer func() { <-s.shedSlots }()
		if _, err := c.Write(shedResponse); err == nil {
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(shedLinger))
			var buf [4096]byte
			for {
				if _, err := c.Read(buf[:]); err != nil {
					break
				}
			}
		}
		c.Close()
	}()
}
