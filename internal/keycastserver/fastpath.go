package keycastserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loadproof/loadproof/internal/httpwire"
	"github.com/loadproof/loadproof/internal/keycast"
)

// The HTTP/1.1 fast path.
//
// On this class of machine net/http spends about 15 µs of CPU per request (request parsing,
// header maps, per-request deadlines, a background read after each response); a plain
// read-parse-write loop spends about 6 µs. For get_public_key that is most of the work and for
// sign_event it is a fifth, so Serve answers the hot request shape itself: a well-formed
// "POST /api/nostr HTTP/1.1" with a Content-Length body and only ordinary headers. The first
// request on a connection that is anything else (another path or method, chunked bodies,
// Expect, Upgrade, odd or oversized headers, HTTP/1.0) hands the connection, with every byte
// not yet consumed, to net/http for the rest of its life. Decisions are made before a request's
// bytes are consumed, so net/http sees exactly what the client sent. Both paths answer through
// Server.nostr, so their answers are the same (TestFastPathMatchesNetHTTP).

const (
	fastReadBuf = 4 << 10 // header block larger than this → net/http
	// fastDeadlineEvery is how often a busy connection's read deadline is pushed forward; a
	// deadline per request costs a timer update each time.
	fastDeadlineEvery = time.Second
	// fastWriteCoalesce caps answers held back while pipelined requests are still buffered.
	fastWriteCoalesce = 32 << 10
	// fastIdleTimeout closes a connection that sends nothing for this long (net/http's
	// IdleTimeout here too).
	fastIdleTimeout = 2 * time.Minute
)

var fastReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, fastReadBuf) }}

// fastConn is one connection served by the fast path.
type fastConn struct {
	c      net.Conn
	active atomic.Bool // a request is being read or answered
}

// handoffListener passes connections from the fast path to net/http's Serve.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

func (l *handoffListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// replayConn gives net/http the bytes the fast path buffered but did not consume, then the
// connection itself.
type replayConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http half-close as it does for a bare *net.TCPConn.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// serveFast serves an accepted connection with the fast path.
func (s *Server) serveFast(c net.Conn, hand *handoffListener) {
	fc := &fastConn{c: c}
	s.fastMu.Lock()
	if s.closed.Load() {
		s.fastMu.Unlock()
		c.Close()
		return
	}
	s.fastConns[fc] = struct{}{}
	s.fastWG.Add(1)
	s.fastMu.Unlock()
	go s.serveFastConn(fc, hand)
}

// fastReq is what the fast path reads from a request head.
type fastReq struct {
	contentLength int64
	jsonCT        bool
	authz, host   string // alias the read buffer: valid until the next read
	origin        bool
	close         bool
}

func (s *Server) serveFastConn(fc *fastConn, hand *handoffListener) {
	c := fc.c
	// The connection's entry in s.conns: its state says whether it waits on its client (and
	// may be evicted at the connection cap) or is being served.
	node := &connNode{}
	if cc, ok := c.(*countedConn); ok {
		node = &cc.node
	}
	sock := newFastSock(c)
	br := fastReaders.Get().(*bufio.Reader)
	br.Reset(sock)
	wbuf := make([]byte, 0, 2048)
	scratch := make([]byte, 0, 1024)
	var bodyBuf []byte
	var memo tokenMemo
	var heads headMemo
	handed, counted := false, false
	// yield: the answers just written include one that took signing or encryption (see below).
	yield := false
	defer func() {
		s.fastMu.Lock()
		delete(s.fastConns, fc)
		s.fastMu.Unlock()
		if !handed {
			c.Close()
			br.Reset(nil)
			fastReaders.Put(br)
		}
		s.fastWG.Done()
	}()
	// The first head must arrive within HeaderTimeout of the accept, as on net/http; later ones
	// within fastIdleTimeout of the last answer, then HeaderTimeout from their first byte.
	c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	first := true
	var deadlineSet time.Time
	for {
		// Answers wait while further pipelined requests are already here, or already in the
		// socket (topUp); never across a read that could block.
		if len(wbuf) > 0 && !headBuffered(br) && !(sock.topUp(br) && headBuffered(br)) {
			if yield {
				// Let the other ready connections compute their answers first, so that the
				// answers go out close together: on loopback the write of an answer runs the
				// client's receive path, and when the client sleeps between answers each one
				// pays for waking it (5.6 µs of a 51 µs sign_event here, docs/benchmarks.md);
				// answers written back to back find it awake.
				runtime.Gosched()
			}
			if _, err := sock.Write(wbuf); err != nil {
				return
			}
			wbuf = wbuf[:0]
			if yield {
				// A client that waits for this answer cannot have sent its next request yet, so
				// reading now would most likely find nothing: a read system call that returns
				// EAGAIN, then a trip through the poller. Letting the other ready connections
				// run first gives the client time to send it, and the read below then finds it.
				runtime.Gosched()
			}
		}
		yield = false
		fc.active.Store(false)
		if s.closed.Load() {
			return
		}
		if now := time.Now(); !first {
			// Answered: waiting for the next request is progress, and idle.
			node.to(csBusy, csIdle)
			s.conns.progress(node, s.conns.clock(now))
			if now.Sub(deadlineSet) > fastDeadlineEvery {
				c.SetReadDeadline(now.Add(fastIdleTimeout))
				deadlineSet = now
			}
		}
		end, armed, err := peekHead(br, c, s.cfg.HeaderTimeout, !first, node, s.conns)
		if armed || first {
			deadlineSet = time.Time{} // a head deadline replaced the idle one
		}
		first = false
		fc.active.Store(true)
		if err != nil {
			if errors.Is(err, errHandoff) {
				handed = s.handoff(c, br, hand, wbuf, node)
			}
			return
		}
		if !node.busy() {
			return // evicted while its head arrived
		}
		head, _ := br.Peek(end)
		req, ok := heads.parse(s, head)
		if !ok {
			handed = s.handoff(c, br, hand, wbuf, node)
			return
		}
		if !counted {
			counted = true
			s.fastConnServed(c)
		}
		start := time.Now()
		br.Discard(end)
		// The body: in the buffer already (usual), else read into a buffer of our own.
		cl := int(req.contentLength)
		cloned := false
		if br.Buffered() < cl && len(wbuf) > 0 && sock.filled {
			// A pipelined request cut by the buffer's end: the rest is most likely in the
			// socket already. topUp moves the buffer, which the auth and host strings alias.
			req.authz, req.host, cloned = strings.Clone(req.authz), strings.Clone(req.host), true
			sock.topUp(br)
		}
		var body []byte
		if br.Buffered() >= cl {
			body, _ = br.Peek(cl)
		} else {
			if cap(bodyBuf) < cl {
				bodyBuf = make([]byte, cl)
			}
			body = bodyBuf[:cl]
			// Copy the auth and host strings first: reading overwrites the buffer they alias.
			if !cloned {
				req.authz = strings.Clone(req.authz)
				req.host = strings.Clone(req.host)
			}
			if len(wbuf) > 0 {
				if _, err := sock.Write(wbuf); err != nil {
					return
				}
				wbuf = wbuf[:0]
			}
			c.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
			deadlineSet = time.Time{}
			// Waiting on the client for the body: evictable, each read being progress.
			if !node.to(csBusy, csBody) {
				return
			}
			for n := 0; n < cl; {
				m, err := br.Read(body[n:])
				if err != nil {
					return
				}
				n += m
				s.conns.progress(node, s.conns.clock(time.Now()))
			}
			if !node.to(csBody, csBusy) {
				return // evicted
			}
			cl = 0
		}
		var out rpcOut
		if req.jsonCT {
			out = s.nostr(context.Background(), req.authz, req.host, body, start, scratch[:0], &memo)
		} else {
			out = outNeedJSON
		}
		wbuf = appendFastResponse(wbuf, &out, req.origin, req.close)
		if out.heavy {
			yield = true
			// Let the other connections whose requests are ready run first, so that answers
			// leave in bursts. Each write to a peer that has gone to sleep wakes it, and on a
			// virtual machine that wake-up costs the writer about 8 µs of system time; with the
			// burst, one wake-up serves many answers (measured: 14 → 7 µs of system time per
			// sign_event). get_public_key answers are too quick to need it.
			runtime.Gosched()
		}
		br.Discard(cl)
		if req.close {
			sock.Write(wbuf)
			return
		}
		if len(wbuf) > fastWriteCoalesce {
			if _, err := sock.Write(wbuf); err != nil {
				return
			}
			wbuf = wbuf[:0]
		}
	}
}

// handoff gives the connection to net/http, after writing any answers still held back.
func (s *Server) handoff(c net.Conn, br *bufio.Reader, hand *handoffListener, pending []byte, node *connNode) bool {
	if len(pending) > 0 {
		if _, err := c.Write(pending); err != nil {
			return false
		}
	}
	// net/http reads the head (again) first: until then the connection waits on its client.
	node.to(csBusy, csHead)
	c.SetReadDeadline(time.Time{})
	if !hand.hand(newFramingGuard(&replayConn{Conn: c, r: br})) {
		return false
	}
	return true
}

// headBuffered reports, without reading, whether a whole request head is already buffered.
func headBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := br.Peek(n)
	return bytes.Contains(b, crlfcrlf)
}

var errHandoff = errors.New("keycastserver: request needs net/http")

// peekHead waits until the buffer holds a whole request head (through the blank line) and
// returns its length without consuming it. A head that does not fit the buffer is errHandoff.
// With arm, before it waits for the rest of a head it has part of, it sets c's read deadline to
// headTimeout from now (armed reports that it did): waiting for a head's first byte is the
// idle timeout's business, the rest must follow within headTimeout (net/http's
// ReadHeaderTimeout, which never sees the heads read here). The first bytes of a head are
// progress, and node then waits for the rest of the head (csHead) in tab.
func peekHead(br *bufio.Reader, c net.Conn, headTimeout time.Duration, arm bool, node *connNode, tab *connTable) (end int, armed bool, err error) {
	for {
		n := br.Buffered()
		if n > 0 {
			b, _ := br.Peek(n)
			if i := bytes.Index(b, crlfcrlf); i >= 0 {
				return i + 4, armed, nil
			}
			if n >= br.Size() {
				return 0, armed, errHandoff
			}
			if arm && !armed {
				now := time.Now()
				c.SetReadDeadline(now.Add(headTimeout))
				armed = true
				node.to(csIdle, csHead)
				tab.progress(node, tab.clock(now))
			}
		}
		if _, err := br.Peek(n + 1); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return 0, armed, errHandoff
			}
			return 0, armed, err
		}
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// parseHead reads a request head in the fast path's shape; ok false sends the connection to
// net/http. The head must be plain (httpwire.ParseRequestHead: tokens, no control bytes, Host
// and Content-Length once, nothing that asks for behaviour only net/http has) and be
// "POST /api/nostr HTTP/1.1" with a Content-Length body within the body limit.
func (s *Server) parseHead(h []byte) (fastReq, bool) {
	hd, ok := httpwire.ParseRequestHead(h)
	if !ok || hd.Minor != 1 || string(hd.Method) != "POST" || string(hd.Target) != keycast.PathNostr ||
		hd.ContentLength < 0 || hd.ContentLength > s.cfg.BodyLimit { // net/http answers 413
		return fastReq{}, false
	}
	return fastReq{
		contentLength: hd.ContentLength,
		jsonCT:        httpwire.IsJSONMediaType(hd.ContentType),
		authz:         unsafeString(hd.Authorization),
		host:          unsafeString(hd.Host),
		origin:        hd.Origin,
		close:         hd.Close,
	}, true
}

// headMemo remembers the last request head a connection sent and what parseHead made of it.
// Clients send the same head again and again on a connection (the same path, token and body
// length), and comparing a head of some 700 bytes with the last one costs a few dozen
// nanoseconds where parsing it again costs about a microsecond.
type headMemo struct {
	head []byte  // a copy of the last head parseHead accepted
	req  fastReq // its parse, with authz and host empty: they are at the offsets below
	authzOff, authzLen,
	hostOff, hostLen int
}

// parse is s.parseHead(h), answered from the memo when h is the head parsed last. The strings
// of the result alias h, as parseHead's do.
func (m *headMemo) parse(s *Server, h []byte) (fastReq, bool) {
	if len(m.head) == len(h) && len(h) > 0 && bytes.Equal(m.head, h) {
		r := m.req
		r.authz = unsafeString(h[m.authzOff : m.authzOff+m.authzLen])
		r.host = unsafeString(h[m.hostOff : m.hostOff+m.hostLen])
		return r, true
	}
	r, ok := s.parseHead(h)
	if !ok || len(h) > fastReadBuf {
		return r, ok
	}
	ao, ho := offsetIn(h, r.authz), offsetIn(h, r.host)
	if ao < 0 || ho < 0 {
		m.head = m.head[:0] // not slices of h: nothing to remember them by
		return r, true
	}
	m.head = append(m.head[:0], h...)
	m.req = r
	m.req.authz, m.req.host = "", ""
	m.authzOff, m.authzLen = ao, len(r.authz)
	m.hostOff, m.hostLen = ho, len(r.host)
	return r, true
}

// offsetIn is where sub starts in h when sub is empty (0) or lies within h; otherwise -1.
func offsetIn(h []byte, sub string) int {
	if len(sub) == 0 {
		return 0
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(sub))) - uintptr(unsafe.Pointer(&h[0])))
	if off < 0 || off > len(h)-len(sub) {
		return -1
	}
	return off
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// appendFastResponse appends the status line, headers and body of out.
func appendFastResponse(dst []byte, out *rpcOut, origin, closeConn bool) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(out.status), 10)
	dst = append(dst, ' ')
	dst = append(dst, http.StatusText(out.status)...)
	if out.text {
		dst = append(dst, "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff"...)
	} else {
		dst = append(dst, "\r\nContent-Type: application/json"...)
	}
	if origin {
		dst = append(dst, "\r\nAccess-Control-Allow-Origin: *"...)
	}
	if out.retryAfter != "" {
		dst = append(dst, "\r\nRetry-After: "...)
		dst = append(dst, out.retryAfter...)
		dst = append(dst, "\r\nCache-Control: no-store"...)
	}
	dst = append(dst, "\r\nDate: "...)
	dst = append(dst, httpDate()...)
	dst = append(dst, "\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(out.body)), 10)
	if closeConn {
		dst = append(dst, "\r\nConnection: close"...)
	}
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, out.body...)
}

type dateCache struct {
	sec int64
	b   []byte
}

var cachedDate atomic.Pointer[dateCache]

// httpDate is the Date header value, formatted once a second.
func httpDate() []byte {
	now := time.Now()
	if d := cachedDate.Load(); d != nil && d.sec == now.Unix() {
		return d.b
	}
	d := &dateCache{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
	cachedDate.Store(d)
	return d.b
}
