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
	rc        syscall.RawConn // plain TCP only: the write-then-wait path of Read
	pending   []byte          // a request to write at the start of the next Read
	werr      error           // the failure of that write
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

func (c *conn) close() { _ = c.nc.Close() }

func (c *conn) deadline() (time.Time, bool) { return c.dl, !c.dl.IsZero() }

func (c *conn) setDeadline(t time.Time) {
	c.dl = t
	_ = c.nc.SetDeadline(t)
}

// userClient is one simulated user's HTTP client: its connections and its cookie jar.
type userClient struct {
	t      *target
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
	b = append(b, "\r\nUser-Agent: keycast-loadtest (loadproof)\r\n"...)
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Type: application/json\r\n"...)
	return &userClient{t: t, prefix: b}
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

// response is what the client keeps of one response.
type response struct {
	status int
	body   []byte // up to maxBody bytes
	close  bool   // the server asked to close, or the body was delimited by close
}

// errNoResponse wraps a failure to read the first byte of a response.
var errNoResponse = errors.New("no response")

// protoError is a malformed response.
type protoError struct{ msg string }

func (e *protoError) Error() string { return "keycastload: malformed HTTP response: " + e.msg }

// readResponse reads one HTTP/1.1 response from br. body is reused as the body buffer. setCookie,
// when not nil, is called with each Set-Cookie value. headOnly responses (1xx, 204, 304) carry no body.
func readResponse(br *bufio.Reader, body []byte, setCookie func([]byte)) (response, error) {
	var r response
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return r, &protoError{"status line longer than 4096 bytes"}
		}
		if len(line) == 0 {
			return r, fmt.Errorf("%w: %w", errNoResponse, err)
		}
		return r, unexpectedEOF(err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' {
		return r, &protoError{fmt.Sprintf("bad status line %q", truncateBytes(line, 40))}
	}
	st := line[9:12]
	if st[0] < '1' || st[0] > '5' || st[1] < '0' || st[1] > '9' || st[2] < '0' || st[2] > '9' ||
		(len(line) > 12 && line[12] != ' ' && line[12] != '\r' && line[12] != '\n') {
		return r, &protoError{fmt.Sprintf("bad status code in %q", truncateBytes(line, 40))}
	}
	r.status = int(st[0]-'0')*100 + int(st[1]-'0')*10 + int(st[2]-'0')
	http10 := line[7] == '0'
	r.close = http10
	contentLength := int64(-1)
	chunked := false
	for nh := 0; ; nh++ {
		if nh > 100 {
			return r, &protoError{"more than 100 header lines"}
		}
		line, err = br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return r, &protoError{"header line longer than 4096 bytes"}
			}
			return r, unexpectedEOF(err)
		}
		line = trimCRLF(line)
		if len(line) == 0 {
			break
		}
		colon := indexByte(line, ':')
		if colon <= 0 {
			return r, &protoError{fmt.Sprintf("header line without a name: %q", truncateBytes(line, 40))}
		}
		name, val := line[:colon], trimSpace(line[colon+1:])
		switch len(name) {
		case 14: // content-length
			if equalFold(name, "content-length") {
				n, ok := parseUint(val)
				if !ok || (contentLength >= 0 && n != contentLength) {
					return r, &protoError{fmt.Sprintf("bad Content-Length %q", truncateBytes(val, 40))}
				}
				contentLength = n
			}
		case 17: // transfer-encoding
			if equalFold(name, "transfer-encoding") {
				if !equalFold(lastToken(val), "chunked") {
					return r, &protoError{fmt.Sprintf("unsupported Transfer-Encoding %q", truncateBytes(val, 40))}
				}
				chunked = true
			}
		case 10: // connection, set-cookie
			if equalFold(name, "connection") {
				if containsTokenFold(val, "close") {
					r.close = true
				} else if http10 && containsTokenFold(val, "keep-alive") {
					r.close = false
				}
			} else if setCookie != nil && equalFold(name, "set-cookie") {
				setCookie(val)
			}
		}
	}
	if r.status < 200 || r.status == 204 || r.status == 304 {
		if r.status < 200 {
			// An interim response (100 Continue) precedes the real one; we never send Expect, so
			// treat it as a protocol violation rather than loop.
			return r, &protoError{fmt.Sprintf("unexpected interim status %d", r.status)}
		}
		r.body = body[:0]
		return r, nil
	}
	switch {
	case chunked:
		r.body, err = readChunked(br, body[:0])
	case contentLength >= 0:
		r.body, err = readN(br, body[:0], contentLength)
	default:
		r.close = true
		r.body, err = readToEOF(br, body[:0])
	}
	return r, err
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readN reads n body bytes, keeping at most maxBody of them.
func readN(br *bufio.Reader, dst []byte, n int64) ([]byte, error) {
	keep := min(n, int64(maxBody))
	if int64(cap(dst)) < keep {
		dst = make([]byte, 0, keep)
	}
	dst = dst[:keep]
	if _, err := io.ReadFull(br, dst); err != nil {
		return dst[:0], unexpectedEOF(err)
	}
	if rest := n - keep; rest > 0 {
		if _, err := br.Discard(int(rest)); err != nil {
			return dst, unexpectedEOF(err)
		}
	}
	return dst, nil
}

// readChunked reads a chunked body (RFC 9112, section 7.1), keeping at most maxBody bytes, and skips
// trailers.
func readChunked(br *bufio.Reader, dst []byte) ([]byte, error) {
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return dst, &protoError{"chunk size line too long"}
			}
			return dst, unexpectedEOF(err)
		}
		line = trimCRLF(line)
		if i := indexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, ok := parseHex(trimSpace(line))
		if !ok {
			return dst, &protoError{fmt.Sprintf("bad chunk size %q", truncateBytes(line, 20))}
		}
		if size == 0 {
			for nt := 0; ; nt++ {
				if nt > 100 {
					return dst, &protoError{"more than 100 trailer lines"}
				}
				line, err := br.ReadSlice('\n')
				if err != nil {
					return dst, unexpectedEOF(err)
				}
				if len(trimCRLF(line)) == 0 {
					return dst, nil
				}
			}
		}
		keep := min(size, int64(maxBody-len(dst)))
		if keep > 0 {
			if cap(dst)-len(dst) < int(keep) {
				nd := make([]byte, len(dst), len(dst)+int(keep))
				copy(nd, dst)
				dst = nd
			}
			start := len(dst)
			dst = dst[:start+int(keep)]
			if _, err := io.ReadFull(br, dst[start:]); err != nil {
				return dst[:start], unexpectedEOF(err)
			}
		}
		if rest := size - keep; rest > 0 {
			if _, err := br.Discard(int(rest)); err != nil {
				return dst, unexpectedEOF(err)
			}
		}
		crlf, err := br.ReadSlice('\n')
		if err != nil {
			return dst, unexpectedEOF(err)
		}
		if len(trimCRLF(crlf)) != 0 {
			return dst, &protoError{"chunk data not followed by CRLF"}
		}
	}
}

// readToEOF reads a close-delimited body.
func readToEOF(br *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		if len(dst) >= maxBody {
			_, err := io.Copy(io.Discard, br)
			return dst, err
		}
		if cap(dst) == len(dst) {
			nd := make([]byte, len(dst), max(2*cap(dst), 512))
			copy(nd, dst)
			dst = nd
		}
		n, err := br.Read(dst[len(dst):min(cap(dst), maxBody)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// dial opens a connection (TLS for https targets).
func (t *target) dial(ctx context.Context, timeout time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls != nil {
		tc := tls.Client(nc, t.tls)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{nc: nc}
	if tc, ok := nc.(*net.TCPConn); ok && rawSocketIO {
		if rc, err := tc.SyscallConn(); err == nil {
			c.rc = rc
			c.readFn = c.rawIO
		}
	}
	c.br = bufio.NewReaderSize(c, readBufSize)
	return c, nil
}

// send writes req and arranges for the response to be read. On a plain TCP connection the write
// happens inside the first read of the response (see Read), which saves the read system call that
// would find nothing yet; on TLS it is an ordinary write.
func (c *conn) send(req []byte) error {
	if c.rc == nil {
		_, err := c.nc.Write(req)
		return err
	}
	c.pending, c.werr = req, nil
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
		if _, err := c.nc.Write(rest); err != nil {
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

// --- small byte helpers (no allocation) ---

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// equalFold compares b with a lower-case ASCII string, ignoring ASCII case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// lastToken returns the last comma-separated token of a header value.
func lastToken(v []byte) []byte {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == ',' {
			return trimSpace(v[i+1:])
		}
	}
	return trimSpace(v)
}

func containsTokenFold(v []byte, lower string) bool {
	for len(v) > 0 {
		i := indexByte(v, ',')
		tok := v
		if i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if equalFold(trimSpace(tok), lower) {
			return true
		}
	}
	return false
}

func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
