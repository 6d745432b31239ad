package linkkeysserver

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/testwait"
)

// Regression tests for the defects recorded in docs/reliability.md ("LinkKeys server").

// expectClosedRaw reads from the connection until the server closes it and fails if any byte of a
// response arrives first (unlike expectClosed, an oversized frame counts as a response).
func (c *client) expectClosedRaw() {
	c.t.Helper()
	_ = c.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	n, err := io.ReadFull(c.br, b[:])
	if n > 0 {
		c.t.Fatalf("got response bytes, want the connection closed without any")
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after 10 s: %v", err)
	}
}

// quietCloses waits until the server has closed every connection it is going to close and checks the
// close accounting: established_total = established_connections + the closed_* counters.
func closeIdentity(t *testing.T, ts *TestServer) {
	t.Helper()
	eventually(t, "established_total = established_connections + closed_*", func() bool {
		m := ts.Metrics()
		return m.EstablishedTotal == m.EstablishedConnections+m.Closed()
	})
}

// TestStalledLargeFramesStayWithinTheBudget: many connections announce a 1 MiB frame and send all
// of it but its last byte. The server's own accounting (frame_buffer_bytes) never passes
// TCP_MAX_INFLIGHT_FRAME_BYTES, the frames beyond the budget are shed (closed_frame_budget), the
// admitted ones are closed by the body rate rule long before the I/O timeout
// (closed_slow_frame_body), and honest clients are served throughout.
func TestStalledLargeFramesStayWithinTheBudget(t *testing.T) {
	const (
		budget    = 4 << 20
		attackers = 16
	)
	cfg := permissive()
	cfg.MaxInflightFrameBytes = budget
	cfg.IOTimeout = 60 * time.Second // the upstream default: the rate rule must act first
	cfg.FrameBodyGrace = 300 * time.Millisecond
	ts := startServer(t, TestServerOptions{Config: cfg})

	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			if b := ts.Metrics().FrameBufferBytes; b > peak.Load() {
				peak.Store(b)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})

	honest := dial(t, ts)
	conns := make([]*client, attackers)
	for i := range conns {
		conns[i] = dial(t, ts)
	}
	stalled := make([]byte, 4+linkkeys.MaxFrameSize-1)
	binary.BigEndian.PutUint32(stalled, linkkeys.MaxFrameSize)
	var writers sync.WaitGroup
	for _, c := range conns {
		writers.Go(func() { _, _ = c.tc.Write(stalled) }) // shed ones fail; that is fine
	}
	// While the attack holds the budget, honest requests (whole in one record) are answered, on an
	// existing connection and on a new one.
	eventually(t, "the budget full of stalled frames", func() bool {
		return ts.Metrics().FrameBufferBytes > budget-linkkeys.MaxFrameSize
	})
	fresh := dial(t, ts)
	for i := range 20 {
		for _, c := range []*client{honest, fresh} {
			if g := greeting(t, c.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
				t.Fatalf("honest request %d: greeting %q", i, g)
			}
		}
	}
	testwait.WaitGroup(t, &writers, testwait.Long, "the stalled frames' writes")
	eventually(t, "every stalled frame closed", func() bool {
		m := ts.Metrics()
		return m.ClosedFrameBudget+m.ClosedSlowFrameBody == attackers && m.FrameBufferBytes == 0
	})
	close(stop)
	testwait.WaitGroup(t, &sampler, testwait.Long, "the sampler's end")
	m := ts.Metrics()
	if p := peak.Load(); p > budget {
		t.Errorf("frame_buffer_bytes peaked at %d, above the %d budget", p, budget)
	}
	if m.ClosedFrameBudget != attackers-budget/linkkeys.MaxFrameSize || m.ClosedSlowFrameBody != budget/linkkeys.MaxFrameSize {
		t.Errorf("closed_frame_budget %d closed_slow_frame_body %d, want %d and %d",
			m.ClosedFrameBudget, m.ClosedSlowFrameBody, attackers-budget/linkkeys.MaxFrameSize, budget/linkkeys.MaxFrameSize)
	}
	if m.ClosedIOTimeout != 0 {
		t.Errorf("closed_io_timeout %d: the stalled frames waited for the I/O timeout", m.ClosedIOTimeout)
	}
	for _, c := range conns {
		c.expectClosedRaw()
	}
	closeIdentity(t, ts)
}

// TestFrameBodyRate: a body trickled below the minimum rate is closed after its first window; one
// that arrives slowly but above the rate is served.
func TestFrameBodyRate(t *testing.T) {
	cfg := permissive()
	cfg.IOTimeout = 30 * time.Second
	cfg.FrameBodyGrace = 200 * time.Millisecond
	cfg.MinFrameBodyRate = 1000 // 200 bytes per window
	ts := startServer(t, TestServerOptions{Config: cfg})
	req := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: helloPayload(t, nil)})
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(req)))
	frame = append(frame, req...)

	t.Run("trickle", func(t *testing.T) {
		c := dial(t, ts)
		if _, err := c.tc.Write([]byte{0, 0, 0x0b, 0xb8}); err != nil { // 3000 bytes announced
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 50 { // 10 bytes per 50 ms: 40 per window
				if _, err := c.tc.Write(make([]byte, 10)); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		c.expectClosedRaw()
		testwait.Recv(t, done, testwait.Long, "the trickle's end")
		eventually(t, "closed_slow_frame_body", func() bool { return ts.Metrics().ClosedSlowFrameBody == 1 })
	})
	t.Run("slow but above the rate", func(t *testing.T) {
		c := dial(t, ts)
		if _, err := c.tc.Write(frame[:10]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // within the first window
		if _, err := c.tc.Write(frame[10:]); err != nil {
			t.Fatal(err)
		}
		if g := greeting(t, c.recv()); g != "Hello, world!" {
			t.Errorf("greeting %q", g)
		}
	})
	if m := ts.Metrics(); m.ClosedSlowFrameBody != 1 || m.FrameBufferBytes != 0 {
		t.Errorf("closed_slow_frame_body %d frame_buffer_bytes %d, want 1 and 0", m.ClosedSlowFrameBody, m.FrameBufferBytes)
	}
}

// unknownOpOfResponseSize returns an op name whose UnknownServiceOrOp answer (service "Foo") is a
// frame body of exactly size bytes.
func unknownOpOfResponseSize(t *testing.T, size int) string {
	t.Helper()
	respLen := func(op string) int {
		return len(linkkeys.AppendResponse(nil, &linkkeys.Response{Status: linkkeys.StatusUnknownServiceOrOp,
			Error: linkkeys.UnknownOpMessage("Foo", op), HasError: true}))
	}
	n := size - respLen("")
	op := strings.Repeat("o", n)
	for range 4 { // the text header grows with the length; settle it
		op = strings.Repeat("o", len(op)+size-respLen(op))
	}
	if respLen(op) != size {
		t.Fatalf("no op gives a %d-byte answer (got %d)", size, respLen(op))
	}
	return op
}

// TestResponsesNeverExceedTheFrameLimit: an answer of exactly 1 MiB is sent; one byte more closes
// the connection without it, after the answers before it (as upstream's writer fails on "Response
// frame too large"); so does the answer to an exactly-1 MiB unknown op, which would be 1 MiB + 29.
func TestResponsesNeverExceedTheFrameLimit(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	t.Run("answer of exactly 1 MiB", func(t *testing.T) {
		c := dial(t, ts)
		c.send("Foo", unknownOpOfResponseSize(t, linkkeys.MaxFrameSize), []byte{0xa0})
		body, err := linkkeys.ReadFrame(c.br, 0, nil)
		if err != nil || len(body) != linkkeys.MaxFrameSize {
			t.Fatalf("read %d bytes, %v; want a %d-byte answer", len(body), err, linkkeys.MaxFrameSize)
		}
	})
	t.Run("answer of 1 MiB + 1", func(t *testing.T) {
		c := dial(t, ts)
		c.send("Hello", "hello", helloPayload(t, nil)) // answered first
		c.send("Foo", unknownOpOfResponseSize(t, linkkeys.MaxFrameSize+1), []byte{0xa0})
		if g := greeting(t, c.recv()); g != "Hello, world!" {
			t.Errorf("greeting %q", g)
		}
		c.expectClosedRaw()
	})
	t.Run("request of exactly 1 MiB", func(t *testing.T) {
		c := dial(t, ts)
		op := strings.Repeat("o", 100)
		grow := linkkeys.MaxFrameSize - len(linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Foo", Op: op, Payload: []byte{0xa0}}))
		op = strings.Repeat("o", len(op)+grow)
		for range 4 {
			op = strings.Repeat("o", len(op)+linkkeys.MaxFrameSize-len(linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Foo", Op: op, Payload: []byte{0xa0}})))
		}
		req := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Foo", Op: op, Payload: []byte{0xa0}})
		if len(req) != linkkeys.MaxFrameSize {
			t.Fatalf("request is %d bytes", len(req))
		}
		if err := linkkeys.WriteFrame(c.tc, req); err != nil {
			t.Fatal(err)
		}
		c.expectClosedRaw()
	})
	eventually(t, "closed_oversized_response == 2", func() bool { return ts.Metrics().ClosedOversizedResponse == 2 })
	closeIdentity(t, ts)
}

// TestCloseReasonsAreCounted: each way an established connection ends is counted in its own
// closed_* counter, exactly once, and the counters account for every completed handshake.
func TestCloseReasonsAreCounted(t *testing.T) {
	stall := func(t *testing.T, c *client) { // a prefix announcing 100 bytes, then nothing
		if _, err := c.tc.Write([]byte{0, 0, 0, 100}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		cfg    func(*Config)
		act    func(t *testing.T, ts *TestServer, c *client)
		field  func(linkkeys.MetricsLine) uint64
		prefix string
	}{
		{"peer", nil, func(t *testing.T, _ *TestServer, c *client) { c.tc.Close() },
			func(m linkkeys.MetricsLine) uint64 { return m.ClosedByPeer }, "closed_by_peer"},
		{"oversized frame", nil, func(t *testing.T, _ *TestServer, c *client) {
			if _, err := c.tc.Write([]byte{0, 0x20, 0, 0}); err != nil {
				t.Fatal(err)
			}
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedOversizedFrame }, "closed_oversized_frame"},
		{"stream ends inside a frame", nil, func(t *testing.T, _ *TestServer, c *client) {
			if _, err := c.tc.Write([]byte{0, 0, 0, 100, 1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			_ = c.tc.CloseWrite()
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedMalformedRequest }, "closed_malformed_request"},
		{"garbage TLS record", nil, func(t *testing.T, _ *TestServer, c *client) {
			if _, err := c.tc.NetConn().Write([]byte{0x17, 3, 3, 0, 32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}); err != nil {
				t.Fatal(err)
			}
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedMalformedRequest }, "closed_malformed_request"},
		{"idle timeout", func(c *Config) { c.IdleTimeout = 200 * time.Millisecond }, func(t *testing.T, _ *TestServer, c *client) { c.expectClosedRaw() },
			func(m linkkeys.MetricsLine) uint64 { return m.ClosedIdleTimeout }, "closed_idle_timeout"},
		{"I/O timeout", func(c *Config) { c.IOTimeout = 200 * time.Millisecond }, func(t *testing.T, _ *TestServer, c *client) {
			stall(t, c)
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedIOTimeout }, "closed_io_timeout"},
		{"slow frame body", func(c *Config) { c.FrameBodyGrace = 200 * time.Millisecond }, func(t *testing.T, _ *TestServer, c *client) {
			stall(t, c)
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedSlowFrameBody }, "closed_slow_frame_body"},
		{"frame budget", func(c *Config) { c.MaxInflightFrameBytes, c.FrameBodyGrace = linkkeys.MaxFrameSize, 30*time.Second }, func(t *testing.T, ts *TestServer, c *client) {
			other := dial(t, ts)
			if _, err := other.tc.Write([]byte{0, 0x10, 0, 0, 1}); err != nil { // holds the whole budget
				t.Fatal(err)
			}
			eventually(t, "budget held", func() bool { return ts.Metrics().FrameBufferBytes == linkkeys.MaxFrameSize })
			stall(t, c)
			c.expectClosedRaw()
			other.tc.Close() // ends inside its frame: one closed_malformed_request more
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedFrameBudget }, "closed_frame_budget"},
		{"oversized response", nil, func(t *testing.T, _ *TestServer, c *client) {
			c.send("Foo", unknownOpOfResponseSize(t, linkkeys.MaxFrameSize+1), []byte{0xa0})
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedOversizedResponse }, "closed_oversized_response"},
		{"shutdown", nil, func(t *testing.T, ts *TestServer, c *client) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := ts.Server.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			c.expectClosedRaw()
		}, func(m linkkeys.MetricsLine) uint64 { return m.ClosedShutdown }, "closed_shutdown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := permissive()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			ts := startServer(t, TestServerOptions{Config: cfg})
			c := dial(t, ts)
			if g := greeting(t, c.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
				t.Fatalf("greeting %q", g)
			}
			tc.act(t, ts, c)
			eventually(t, tc.prefix+" counted", func() bool { return tc.field(ts.Metrics().MetricsLine) >= 1 })
			closeIdentity(t, ts)
			m := ts.Metrics()
			if got := tc.field(m.MetricsLine); got != 1 {
				t.Errorf("%s = %d, want 1", tc.prefix, got)
			}
			// Every other close counter stays 0 (but for the budget case's holder).
			others := m.Closed() - tc.field(m.MetricsLine)
			if tc.name == "frame budget" {
				others -= m.ClosedMalformedRequest
			}
			if others != 0 {
				t.Errorf("other closed_* counters moved: %s", formatLine(m))
			}
			line := formatLine(m)
			if !strings.Contains(line, `"`+tc.prefix+`":1`) {
				t.Errorf("METRICS line lacks %s:1: %s", tc.prefix, line)
			}
		})
	}
}
