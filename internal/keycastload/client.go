package keycastload

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/httpwire"
)

const (
	// maxBody bounds how much of a response body is kept for judging; the rest is read and discarded
	// so the connection stays usable.
	maxBody = 1 << 20
	// maxIdlePerUser is each user's idle-connection limit (upstream: pool_max_idle_per_host 50).
	maxIdlePerUser = 50
	// idleTimeout closes pooled connections idle for longer (hyper's default pool idle timeout).
	idleTimeout = 90 * time.Second
	// readBufSize is each connection's read buffer: every Keycast response header fits.
	readBufSize = 4096
	// idleCheckAfter is how long a pooled connection must have been idle before it is checked for
	// a close by the server ahead of the next request (conn.send). The check is a system call
	// (280–380 ns here, BenchmarkIdleCheck: 4–6 % of a request's client CPU), so connections reused
	// at once under load are not checked; servers close idle connections after seconds, not
	// milliseconds.
	idleCheckAfter = time.Millisecond
)

// target is a parsed base URL.
type target struct {
	base   string // scheme://host[:port][/prefix], trailing "/" trimmed
	scheme string
	addr   string // host:port to dial
	host   string // Host header value
	prefix string // path prefix, without trailing "/"
	tls    *tls.Config
}

// parseTarget checks a base URL: http or https, a host, no query or fragment.
func parseTarget(raw string) (*target, error) {
	base := strings.TrimRight(raw, "/")
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("keycastload: target URL %q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("keycastload: target URL %q must start with http:// or https://", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("keycastload: target URL %q has no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("keycastload: target URL %q must not carry credentials, a query or a fragment", raw)
	}
	// The host goes into the Host header and the path into the request line verbatim; url.Parse
	// refuses control bytes, and this refuses what it lets through that a request head cannot carry.
	if err := checkHostBytes(u.Host); err != nil {
		return nil, fmt.Errorf("keycastload: target URL %q: host %w", raw, err)
	}
	t := &target{base: base, scheme: u.Scheme, host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/")}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	if u.Scheme == "https" {
		// HTTP/1.1 only: the fast client speaks nothing else, so it offers nothing else by ALPN.
		t.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	return t, nil
}

// conn is one keep-alive connection.
type conn struct {
	nc        net.Conn
	sc        syscall.RawConn // the TCP socket under nc, for the idle check (nil where there is none)
	rc        syscall.RawConn // plain TCP with rawSocketIO only: the write-then-wait path of Read
	tls       bool
	sent      *int64 // TLS: bytes written to the socket (countingConn)
	wrote     int64  // bytes of the current request written to the socket
	pending   []byte // a request to write at the start of the next Read
	werr      error  // the failure of that write
	readFn    func(uintptr) bool
	rbuf      []byte // rawIO's destination
	rn        int    // rawIO's result
	rerr      error
	slow      bool
	br        *bufio.Reader
	reused    bool
	idleSince time.Time
	dl        time.Time // the read/write deadline in force
}

// countingConn counts the bytes written to a TLS connection's socket: tls.Conn.Write reports
// plaintext bytes, and the retry rule is about what reached the wire.
type countingConn struct {
	net.Conn
	n int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *conn) close() { _ = c.nc.Close() }

func (c *conn) deadline() (time.Time, bool) { return c.dl, !c.dl.IsZero() }

func (c *conn) setDeadline(t time.Time) {
	c.dl = t
	_ = c.nc.SetDeadline(t)
}

// userClient is one simulated user's HTTP client: its connections and its cookie jar.
type userClient struct {
	t      *target
	token  string
	prefix []byte // request line and fixed headers, ending with "\r\n" (no blank line)

	mu      sync.Mutex
	idle    []*conn
	cookies []cookie               // the jar; one host, so no domain or path matching
	line    atomic.Pointer[[]byte] // "Cookie: a=b; c=d\r\n", or nil
}

type cookie struct{ name, value string }

// newUserClient precomputes a user's request head for POST {prefix}/api/nostr.
func newUserClient(t *target, path, token string) *userClient {
	var b []byte
	b = append(b, "POST "...)
	b = append(b, t.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\nUser-Agent: "...)
	b = append(b, userAgent...)
	b = append(b, "\r\n"...)
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Type: application/json\r\n"...)
	return &userClient{t: t, token: token, prefix: b}
}

// userAgent is the User-Agent of every /api/nostr request.
const userAgent = "keycast-loadtest (loadproof)"

// appendRequest appends the whole request with body: the precomputed head, the cookie line and
// Content-Length.
func (u *userClient) appendRequest(b, body []byte) []byte {
	b = append(b, u.prefix...)
	if line := u.line.Load(); line != nil {
		b = append(b, *line...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// get returns an idle connection (most recently used first) or nil.
func (u *userClient) get(now time.Time) *conn {
	u.mu.Lock()
	for n := len(u.idle); n > 0; n = len(u.idle) {
		c := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		if now.Sub(c.idleSince) < idleTimeout {
			u.mu.Unlock()
			return c
		}
		c.close()
	}
	u.mu.Unlock()
	return nil
}

// put returns a connection to the pool, or closes it when the pool is full.
func (u *userClient) put(c *conn, now time.Time) {
	c.idleSince = now
	c.reused = true
	u.mu.Lock()
	if len(u.idle) < maxIdlePerUser {
		u.idle = append(u.idle, c)
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	c.close()
}

// closeIdle closes every pooled connection.
func (u *userClient) closeIdle() {
	u.mu.Lock()
	for _, c := range u.idle {
		c.close()
	}
	u.idle = nil
	u.mu.Unlock()
}

// setCookie applies one Set-Cookie header value to the jar.
func (u *userClient) setCookie(v []byte) {
	name, value, del, ok := parseSetCookie(v)
	if !ok {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	i := 0
	for ; i < len(u.cookies); i++ {
		if u.cookies[i].name == name {
			break
		}
	}
	switch {
	case del && i < len(u.cookies):
		u.cookies = append(u.cookies[:i], u.cookies[i+1:]...)
	case del:
		return
	case i < len(u.cookies):
		if u.cookies[i].value == value {
			return
		}
		u.cookies[i].value = value
	default:
		u.cookies = append(u.cookies, cookie{name, value})
	}
	if len(u.cookies) == 0 {
		u.line.Store(nil)
		return
	}
	line := []byte("Cookie: ")
	for j, c := range u.cookies {
		if j > 0 {
			line = append(line, "; "...)
		}
		line = append(line, c.name...)
		line = append(line, '=')
		line = append(line, c.value...)
	}
	line = append(line, "\r\n"...)
	u.line.Store(&line)
}

// parseSetCookie reads "name=value; attr; attr=v". del is true when Max-Age<=0 or Expires is in the
// past (the cookie is to be removed).
func parseSetCookie(v []byte) (name, value string, del, ok bool) {
	s := string(v)
	first, attrs, _ := strings.Cut(s, ";")
	n, val, found := strings.Cut(first, "=")
	n = strings.TrimSpace(n)
	if !found {
		return "", "", false, false
	}
	val = strings.TrimSpace(val)
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		val = val[1 : len(val)-1]
	}
	// The cookie goes back out in the Cookie header: a name must be an RFC 9110 token and a value
	// may hold no control byte and no ';' (it would end the pair).
	if !isToken(n) || strings.ContainsFunc(val, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ';' }) {
		return "", "", false, false
	}
	for attrs != "" {
		var a string
		a, attrs, _ = strings.Cut(attrs, ";")
		k, av, _ := strings.Cut(strings.TrimSpace(a), "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "max-age":
			if secs, err := strconv.Atoi(strings.TrimSpace(av)); err == nil && secs <= 0 {
				del = true
			}
		case "expires":
			if t, err := time.Parse(time.RFC1123, strings.TrimSpace(av)); err == nil && t.Before(time.Now()) {
				del = true
			}
		}
	}
	return n, val, del, true
}

// dial opens a connection (TLS for https targets).
func (t *target) dial(ctx context.Context, timeout time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc}
	if tc, ok := nc.(*net.TCPConn); ok {
		if sc, err := tc.SyscallConn(); err == nil {
			c.sc = sc
		}
	}
	if t.tls != nil {
		cc := &countingConn{Conn: nc}
		tc := tls.Client(cc, t.tls)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		c.nc, c.tls, c.sent = tc, true, &cc.n
	} else if rawSocketIO && c.sc != nil {
		c.rc = c.sc
		c.readFn = c.rawIO
	}
	c.br = bufio.NewReaderSize(c, readBufSize)
	return c, nil
}

// errIdleClosed is a pooled connection the server closed while it was idle: nothing was written.
var errIdleClosed = errors.New("keycastload: the server closed the idle connection")

// send writes req and arranges for the response to be read; c.wrote counts the bytes of req that
// reached the socket. A connection that has been idle for idleCheckAfter or longer is first
// checked for a close by the server (peekIdle: one non-blocking read), so that the request goes
// on a fresh connection instead (errIdleClosed, nothing written). On a plain TCP connection the
// write happens inside the first read of the response (see Read), which saves the read system
// call that would find nothing yet; on TLS it is an ordinary write.
func (c *conn) send(req []byte, now time.Time) error {
	c.wrote, c.werr = 0, nil
	if c.reused && c.sc != nil && now.Sub(c.idleSince) >= idleCheckAfter {
		// Any byte waiting on plain HTTP/1.1 is a protocol violation or the start of a close; on
		// TLS it may be a record the TLS layer owns, so there only an end or an error counts.
		if closed, data := peekIdle(c.sc); closed || (data && !c.tls) {
			return errIdleClosed
		}
	}
	if c.rc == nil {
		before := int64(0)
		if c.sent != nil {
			before = *c.sent
		}
		n, err := c.nc.Write(req)
		if c.sent != nil {
			c.wrote = *c.sent - before
		} else {
			c.wrote = int64(n)
		}
		return err
	}
	c.pending = req
	return nil
}

// Read implements io.Reader for the connection's bufio.Reader. With a request pending it runs
// inside the runtime poller's read: the poller's readiness flag is reset first, then the request
// is written and, since the response cannot have arrived before it was sent, the goroutine waits
// for readability without trying a read that would only return EAGAIN. The reset preceding the
// write is what makes skipping that read safe: any response byte arrives after it and wakes us.
func (c *conn) Read(p []byte) (int, error) {
	if c.rc == nil {
		return c.nc.Read(p)
	}
	c.rbuf, c.rn, c.rerr, c.slow = p, 0, nil, false
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	if c.slow {
		rest := c.pending
		c.pending = nil
		n, err := c.nc.Write(rest)
		c.wrote += int64(n)
		if err != nil {
			c.werr = err
			return 0, err
		}
		return c.nc.Read(p)
	}
	if c.werr != nil {
		return 0, c.werr
	}
	if err != nil {
		return 0, err
	}
	if c.rerr != nil {
		return 0, os.NewSyscallError("read", c.rerr)
	}
	if c.rn == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return c.rn, nil
}

// rawIO is the callback of c.rc.Read (bound once per connection, so that a read allocates
// nothing): it writes a pending request and asks to wait, or reads into c.rbuf.
func (c *conn) rawIO(fd uintptr) bool {
	if c.pending != nil {
		for len(c.pending) > 0 {
			w, err := rawWrite(fd, c.pending)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				c.slow = true // the send buffer is full: Read finishes with a poller write
				return true
			case err != nil:
				c.werr = os.NewSyscallError("write", err)
				c.pending = nil
				return true
			}
			c.wrote += int64(w)
			c.pending = c.pending[w:]
		}
		c.pending = nil
		return false // wait until the response is readable
	}
	for {
		c.rn, c.rerr = rawRead(fd, c.rbuf)
		if c.rerr != syscall.EINTR {
			break
		}
	}
	return c.rerr != syscall.EAGAIN
}

// fastClient is the hand-written HTTP/1.1 client (`--http-client fast`, the default): per-user
// connection pools and cookie jars, precomputed request heads, responses read by
// httpwire.ReadResponse.
type fastClient struct {
	r *runner
}

// exchange sends body as user u on one of u's connections and reads the response.
//
// A request is retried, once and on a fresh connection, only when it went out on a reused
// connection and not a single byte of it was written: the server closed the idle connection
// (errIdleClosed), or the first write failed outright. Once any byte is on the wire the server
// may have acted on the request, so a failure then is the request's outcome and is counted, as
// net/http does for a request that is not idempotent.
func (f fastClient) exchange(ctx context.Context, wk *worker, u *userClient, body []byte, start time.Time) (httpwire.Response, time.Time, error) {
	r := f.r
	wk.req = u.appendRequest(wk.req[:0], body)
	timeout := r.cfg.HTTPTimeout
	c := u.get(start)
	for attempt := 0; ; attempt++ {
		if c == nil {
			var err error
			if c, err = r.t.dial(ctx, timeout); err != nil {
				return httpwire.Response{}, r.clock.now(), &connectError{err}
			}
		}
		wk.active.Store(c)
		// Refresh the deadline only when less than 90% of the timeout is left, to save a timer
		// update per request: every request still gets at least 90% of HTTPTimeout.
		if dl, ok := c.deadline(); !ok || dl.Sub(start) < timeout*9/10 {
			c.setDeadline(start.Add(timeout))
		}
		// Only now look at aborted: cutOff sets aborted before it moves the deadlines of the
		// active connections into the past, so either it sees c (and its past deadline comes after
		// the refresh above) or this load sees aborted. Checked before the refresh, a cut-off
		// landing between the two had its past deadline overwritten by start+timeout, and the
		// request outlived the drain by up to the whole request timeout.
		if r.aborted.Load() {
			wk.active.Store(nil)
			c.close()
			return httpwire.Response{}, r.clock.now(), context.Canceled
		}
		err := c.send(wk.req, start)
		var resp httpwire.Response
		if err == nil {
			resp, err = httpwire.ReadResponse(c.br, wk.resp, maxBody, u.setCookie)
			if cap(resp.Body) > cap(wk.resp) {
				wk.resp = resp.Body[:0]
			}
		}
		wk.active.Store(nil)
		if err != nil {
			retry := c.reused && attempt == 0 && c.wrote == 0 && !isTimeout(err)
			c.close()
			if retry && !r.aborted.Load() {
				c = nil
				continue
			}
			return resp, r.clock.now(), err
		}
		end := r.clock.now()
		if resp.Close || c.br.Buffered() > 0 {
			// Bytes beyond the response are a protocol violation; the connection is not reused.
			c.close()
		} else {
			u.put(c, end)
		}
		return resp, end, nil
	}
}

// cutOff interrupts the requests in flight: their connections' deadlines are moved to the past.
func (f fastClient) cutOff() {
	past := time.Unix(1, 0)
	r := f.r
	r.wksMu.Lock()
	defer r.wksMu.Unlock()
	for _, wk := range r.wks {
		if c := wk.active.Load(); c != nil {
			_ = c.nc.SetDeadline(past)
		}
	}
}

// closeIdle closes every user's pooled connections.
func (f fastClient) closeIdle() {
	for i := range f.r.clients {
		if c := f.r.clients[i].Load(); c != nil {
			c.closeIdle()
		}
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
