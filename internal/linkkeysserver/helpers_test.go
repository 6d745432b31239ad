package linkkeysserver

import (
	"bufio"
	"crypto/tls"
	"flag"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/testwait"
)

var update = flag.Bool("update", false, "rewrite golden files")

// permissive is upstream's TCP test base config: max_conn 1000, backlog 128,
// handshake timeout 5 s, concurrency 64, idle and I/O timeouts 5 s, inflight
// and write queue 4, and a permissive limiter.
func permissive() Config {
	lim := admit.LimiterConfig{
		RatePerMinute: 1e9, Burst: 1e9, GlobalRatePerSecond: 1e9, GlobalBurst: 1e9,
		OverflowRatePerSecond: 1e9, OverflowBurst: 1e9, DistinctSourceThreshold: 1e6,
	}
	return Config{
		MaxConnections: 1000, ListenBacklog: 128, HandshakeTimeout: 5 * time.Second, HandshakeConcurrency: 64,
		IdleTimeout: 5 * time.Second, IOTimeout: 5 * time.Second, MaxInflightFrames: 4, WriteQueueBound: 4,
		Handshake: lim, PublicRead: lim,
	}
}

func startServer(t testing.TB, opt TestServerOptions) *TestServer {
	t.Helper()
	ts, err := NewTestServer(opt)
	if err != nil {
		t.Fatalf("starting test server: %v", err)
	}
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("closing test server: %v", err)
		}
	})
	return ts
}

// client is a TLS client connection with a buffered reader.
type client struct {
	t  testing.TB
	tc *tls.Conn
	br *bufio.Reader
}

func dialFrom(t testing.TB, ts *TestServer, local string) *client {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	nc, err := d.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatalf("dial %s: %v", ts.Addr, err)
	}
	tc := tls.Client(nc, ts.ClientTLSConfig())
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		nc.Close()
		t.Fatalf("TLS handshake: %v", err)
	}
	t.Cleanup(func() { tc.Close() })
	return &client{t: t, tc: tc, br: bufio.NewReader(tc)}
}

func dial(t testing.TB, ts *TestServer) *client { return dialFrom(t, ts, "") }

func (c *client) send(service, op string, payload []byte) {
	c.t.Helper()
	body := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: service, Op: op, Payload: payload})
	if err := linkkeys.WriteFrame(c.tc, body); err != nil {
		c.t.Fatalf("writing %s/%s: %v", service, op, err)
	}
}

func (c *client) recv() linkkeys.Response {
	c.t.Helper()
	body, err := linkkeys.ReadFrame(c.br, 0, nil)
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	resp, err := linkkeys.DecodeResponse(body)
	if err != nil {
		c.t.Fatalf("decoding response: %v", err)
	}
	return resp
}

func (c *client) call(service, op string, payload []byte) linkkeys.Response {
	c.t.Helper()
	c.send(service, op, payload)
	return c.recv()
}

// expectClosed reads until the server closes the connection and fails if a
// response frame arrives first.
func (c *client) expectClosed() {
	c.t.Helper()
	_ = c.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := linkkeys.ReadFrame(c.br, 0, nil)
	if err == nil {
		c.t.Fatalf("got a response frame, want the connection closed without one")
	}
	var ne net.Error
	if ok := asNetErr(err, &ne); ok && ne.Timeout() {
		c.t.Fatalf("connection still open after 10 s: %v", err)
	}
}

func asNetErr(err error, ne *net.Error) bool {
	for err != nil {
		if e, ok := err.(net.Error); ok {
			*ne = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// eventually polls cond (no signal exists for these server-side counters)
// until it holds, failing after 10 s. It asserts a state, never a time.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, what, cond)
}

// rawDial opens a plain TCP connection (no TLS).
func rawDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// readUntilClosed reads a raw connection until EOF or reset, returning the
// bytes seen.
func readUntilClosed(t testing.TB, nc net.Conn) []byte {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(nc)
	var ne net.Error
	if err != nil && asNetErr(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed within 10 s")
	}
	return b
}

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func notifySignals() <-chan os.Signal {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch
}
