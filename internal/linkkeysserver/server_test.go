package linkkeysserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/testwait"
)

func helloPayload(t testing.TB, name *string) []byte {
	t.Helper()
	b, err := linkkeys.EncodePayload(linkkeys.HelloRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func greeting(t testing.TB, r linkkeys.Response) string {
	t.Helper()
	if r.Status != linkkeys.StatusOK {
		t.Fatalf("status %v (%q), want Ok", r.Status, r.Error)
	}
	var h linkkeys.HelloResponse
	if err := linkkeys.DecodePayload(r.Payload, &h); err != nil {
		t.Fatal(err)
	}
	return h.Greeting
}

func strp(s string) *string { return &s }

// hello_test.rs: the greetings.
func TestHelloGreetings(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"null name", helloPayload(t, nil), "Hello, world!"},
		{"absent name", []byte{0xa0}, "Hello, world!"},
		{"LinkKeys", helloPayload(t, strp("LinkKeys")), "Hello, LinkKeys!"},
		{"empty name", helloPayload(t, strp("")), "Hello, !"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := greeting(t, c.call("Hello", "hello", tc.payload)); got != tc.want {
				t.Errorf("greeting %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHelloResponseMatchesReferenceVector(t *testing.T) {
	// The OK response to Hello/hello {"name": null} (docs/protocol-linkkeys.md, Byte vectors).
	want, _ := hex.DecodeString("a36176016673746174757300677061796c6f6164d8185818a1686772656574696e676d48656c6c6f2c20776f726c6421")
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	c.send("Hello", "hello", helloPayload(t, nil))
	body, err := linkkeys.ReadFrame(c.br, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("response\n got %x\nwant %x", body, want)
	}
}

func TestErrorResponses(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	deep := bytes.Repeat([]byte{0x81}, 100)
	deep = append(deep, 0x01)
	deepMaps := bytes.Repeat([]byte{0xa1, 0x61, 'k'}, 100)
	deepMaps = append(deepMaps, 0x01)
	for _, tc := range []struct {
		name       string
		frame      []byte
		wantStatus linkkeys.Status
		wantErr    string // prefix
	}{
		{"unknown op", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Foo", Op: "bar", Payload: []byte{0xa0}}),
			linkkeys.StatusUnknownServiceOrOp, "Unknown service/operation: Foo/bar"},
		{"unknown op of a known service", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "nope", Payload: []byte{0xa0}}),
			linkkeys.StatusUnknownServiceOrOp, "Unknown service/operation: DomainKeys/nope"},
		{"empty frame", nil, linkkeys.StatusMalformedEnvelope, "Invalid request envelope: "},
		{"not an envelope", []byte{0x01}, linkkeys.StatusMalformedEnvelope, "Invalid request envelope: "},
		{"bad version", []byte("\xa4\x61v\x02\x62op\x65hello\x67payload\xd8\x18\x41\xa0\x67service\x65Hello"),
			linkkeys.StatusMalformedEnvelope, "Invalid request envelope: "},
		{"deep frame", deep, linkkeys.StatusMalformedEnvelope, "Malformed request: excessive nesting depth"},
		{"deep payload", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: deepMaps}),
			linkkeys.StatusMalformedEnvelope, "Malformed request: excessive nesting depth"},
		{"bad hello payload", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: []byte{0x01}}),
			linkkeys.StatusMalformedEnvelope, "Invalid payload: "},
		{"bad handshake payload", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Handshake", Op: "handshake", Payload: nil}),
			linkkeys.StatusMalformedEnvelope, "Invalid payload: "},
		{"bad revocations since", linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "get-revocations",
			Payload: mustPayload(linkkeys.GetRevocationsRequest{Since: strp("yesterday")})}),
			linkkeys.StatusMalformedEnvelope, `Invalid payload: since "yesterday"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts)
			if err := linkkeys.WriteFrame(c.tc, tc.frame); err != nil {
				t.Fatal(err)
			}
			r := c.recv()
			if r.Status != tc.wantStatus || !strings.HasPrefix(r.Error, tc.wantErr) || len(r.Payload) != 0 {
				t.Errorf("got status %v error %q payload %x, want status %v error starting %q and an empty payload",
					r.Status, r.Error, r.Payload, tc.wantStatus, tc.wantErr)
			}
			// The connection stays usable after an error response.
			if g := greeting(t, c.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
				t.Errorf("after the error: greeting %q", g)
			}
		})
	}
}

func TestUnknownOpResponseMatchesReferenceVector(t *testing.T) {
	want, _ := hex.DecodeString("a4617601656572726f727822556e6b6e6f776e20736572766963652f6f7065726174696f6e3a20466f6f2f6261726673746174757302677061796c6f6164d81840")
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	c.send("Foo", "bar", []byte{0xa0})
	body, err := linkkeys.ReadFrame(c.br, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("response\n got %x\nwant %x", body, want)
	}
}

func TestOpsAndHandshake(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	for _, op := range []string{"healthcheck", "readiness"} {
		r := c.call("Ops", op, nil)
		var res linkkeys.CheckResult
		if r.Status != 0 || linkkeys.DecodePayload(r.Payload, &res) != nil || !res.Result {
			t.Errorf("Ops/%s: status %v payload %x, want Ok {result: true}", op, r.Status, r.Payload)
		}
	}
	for _, tc := range []struct {
		name      string
		req       linkkeys.HandshakeRequest
		sign, enc []string
	}{
		{"shared", linkkeys.HandshakeRequest{Version: "v1alpha", Algorithms: linkkeys.HandshakeAlgorithms{
			Signing: []string{"rsa", "ed25519"}, Encryption: []string{"x25519"}}}, []string{"ed25519"}, []string{"x25519"}},
		{"no encryption named", linkkeys.HandshakeRequest{Version: "v1alpha", Algorithms: linkkeys.HandshakeAlgorithms{
			Signing: []string{"ed25519"}}}, []string{"ed25519"}, []string{"x25519"}},
		{"nothing shared", linkkeys.HandshakeRequest{Version: "v1alpha", Algorithms: linkkeys.HandshakeAlgorithms{
			Signing: []string{"rsa"}, Encryption: []string{"kyber"}}}, []string{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.call("Handshake", "handshake", mustPayload(tc.req))
			var hr linkkeys.HandshakeResponse
			if r.Status != 0 {
				t.Fatalf("status %v %q", r.Status, r.Error)
			}
			if err := linkkeys.DecodePayload(r.Payload, &hr); err != nil {
				t.Fatal(err)
			}
			if hr.Version != "v1alpha" || fmt.Sprint(hr.Algorithms.Signing) != fmt.Sprint(tc.sign) ||
				fmt.Sprint(hr.Algorithms.Encryption) != fmt.Sprint(tc.enc) {
				t.Errorf("got %+v, want v1alpha signing %v encryption %v", hr, tc.sign, tc.enc)
			}
		})
	}
}

// tcp_local_rp_test.rs: get-domain-keys answers an unauthenticated peer even
// with an empty payload; on an empty key source it is the 84-byte vector of
// docs/protocol-linkkeys.md, Byte vectors.
func TestGetDomainKeysWithEmptyPayload(t *testing.T) {
	wantPayload, _ := hex.DecodeString("a3646b6579738066646f6d61696e6e6c6f6164746573742e6c6f63616c781c726563656e745f7265766f636174696f6e735f617661696c61626c65f4")
	wantEnvelope := append([]byte("\xa3\x61v\x01\x66status\x00\x67payload\xd8\x18\x58\x3c"), wantPayload...)
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	for _, payload := range [][]byte{nil, {0xa0}} {
		c.send("DomainKeys", "get-domain-keys", payload)
		body, err := linkkeys.ReadFrame(c.br, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, wantEnvelope) {
			t.Errorf("payload %x: response\n got %x\nwant %x", payload, body, wantEnvelope)
		}
	}
	if st := ts.Metrics().SnapshotCache; st.Misses != 1 || st.Hits != 1 {
		t.Errorf("cache stats %+v, want 1 miss then 1 hit", st)
	}
}

// tcp_async_connection_test.rs: slow_handshake_is_timed_out_and_dropped.
func TestSlowHandshakeIsTimedOutAndDropped(t *testing.T) {
	cfg := permissive()
	cfg.HandshakeTimeout = 200 * time.Millisecond
	ts := startServer(t, TestServerOptions{Config: cfg})
	nc := rawDial(t, ts.Addr)
	if b := readUntilClosed(t, nc); len(b) != 0 {
		t.Errorf("server sent %d bytes to a silent client, want none", len(b))
	}
	eventually(t, "handshake_timeouts >= 1", func() bool { return ts.Metrics().HandshakeTimeouts >= 1 })
}

// slow_frame_is_rejected_by_the_io_timeout.
func TestSlowFrameIsRejectedByTheIOTimeout(t *testing.T) {
	cfg := permissive()
	cfg.IOTimeout = 200 * time.Millisecond
	ts := startServer(t, TestServerOptions{Config: cfg})
	c := dial(t, ts)
	if _, err := c.tc.Write([]byte{0, 0, 0, 100}); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	eventually(t, "frame_buffer_bytes back to 0", func() bool { return ts.Metrics().FrameBufferBytes == 0 })
}

// oversized_frame_is_rejected, and exactly 1 MiB is accepted.
func TestFrameSizeLimit(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	t.Run("2 MiB is dropped", func(t *testing.T) {
		c := dial(t, ts)
		if _, err := c.tc.Write([]byte{0, 0x20, 0, 0}); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
	})
	t.Run("1 MiB + 1 is dropped", func(t *testing.T) {
		c := dial(t, ts)
		if _, err := c.tc.Write([]byte{0, 0x10, 0, 1}); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
	})
	t.Run("exactly 1 MiB is read", func(t *testing.T) {
		c := dial(t, ts)
		body := make([]byte, linkkeys.MaxFrameSize) // zeros: a valid CBOR sequence, not an envelope
		if err := linkkeys.WriteFrame(c.tc, body); err != nil {
			t.Fatal(err)
		}
		if r := c.recv(); r.Status != linkkeys.StatusMalformedEnvelope {
			t.Errorf("status %v, want MalformedEnvelope", r.Status)
		}
	})
	eventually(t, "frame_buffer_bytes back to 0", func() bool { return ts.Metrics().FrameBufferBytes == 0 })
}

// idle_connection_does_not_hold_a_megabyte_scale_buffer and
// persistent_connection_serves_several_requests_in_sequence.
func TestPersistentConnectionAndIdleBuffer(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	for i := range 5 {
		name := strconv.Itoa(i)
		if g := greeting(t, c.call("Hello", "hello", helloPayload(t, &name))); g != "Hello, "+name+"!" {
			t.Fatalf("call %d: greeting %q", i, g)
		}
	}
	m := ts.Metrics()
	if m.FramesProcessed < 5 {
		t.Errorf("frames_processed %d, want >= 5", m.FramesProcessed)
	}
	if m.FrameBufferBytes != 0 {
		t.Errorf("frame_buffer_bytes %d on an idle connection, want 0", m.FrameBufferBytes)
	}
}

// bounded_in_flight_frames_and_response_queue_do_not_deadlock: bounds of 2,
// 20 pipelined requests, all answered in order.
func TestPipelinedRequestsWithSmallBounds(t *testing.T) {
	cfg := permissive()
	cfg.MaxInflightFrames, cfg.WriteQueueBound = 2, 2
	ts := startServer(t, TestServerOptions{Config: cfg})
	c := dial(t, ts)
	var batch []byte
	for i := range 20 {
		name := strconv.Itoa(i)
		batch = linkkeys.AppendFrame(batch, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: helloPayload(t, &name)}))
	}
	if _, err := c.tc.Write(batch); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if g := greeting(t, c.recv()); g != "Hello, "+strconv.Itoa(i)+"!" {
			t.Fatalf("response %d: greeting %q (out of order?)", i, g)
		}
	}
}

// graceful_load_shedding_at_the_connection_limit, plus the open_connections
// drift fix: the gauge returns to the established count.
func TestSheddingAtTheConnectionLimit(t *testing.T) {
	cfg := permissive()
	cfg.MaxConnections = 1
	ts := startServer(t, TestServerOptions{Config: cfg})
	c := dial(t, ts)
	for range 3 {
		nc := rawDial(t, ts.Addr)
		if b := readUntilClosed(t, nc); len(b) != 0 {
			t.Errorf("shed connection got %d bytes, want none", len(b))
		}
	}
	eventually(t, "3 connections shed", func() bool { return ts.Metrics().ShedConnectionLimit == 3 })
	// Upstream's gauge would read 4 here forever (it drifts up by one per
	// shed connection).
	eventually(t, "open_connections back to 1", func() bool { return ts.Metrics().OpenConnections == 1 })
	if g := greeting(t, c.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
		t.Errorf("established connection after shedding: %q", g)
	}
}

// public_ratelimit_test.rs over the wire: the burst, then status 7 with a
// retry hint, then refill.
func TestPublicReadRateLimitOverTheWire(t *testing.T) {
	clock := &admit.ManualClock{}
	cfg := permissive()
	cfg.PublicRead = admit.LimiterConfig{RatePerMinute: 60, Burst: 3, GlobalRatePerSecond: 1e6, GlobalBurst: 1e6,
		OverflowRatePerSecond: 1e6, OverflowBurst: 1e6, DistinctSourceThreshold: 100}
	ts := startServer(t, TestServerOptions{Config: cfg, Clock: clock})
	c := dial(t, ts)
	for i := range 3 {
		if r := c.call("DomainKeys", "get-domain-keys", []byte{0xa0}); r.Status != 0 {
			t.Fatalf("request %d: status %v %q, want Ok", i, r.Status, r.Error)
		}
	}
	for _, op := range []string{"get-domain-keys", "get-revocations"} {
		r := c.call("DomainKeys", op, []byte{0xa0})
		if r.Status != linkkeys.StatusUnavailable || r.Error != "Rate limited. Try again in 1 seconds" {
			t.Errorf("%s over the burst: status %v %q, want Unavailable \"Rate limited. Try again in 1 seconds\"", op, r.Status, r.Error)
		}
	}
	// Hello is not a public read: not limited.
	if g := greeting(t, c.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
		t.Errorf("hello while limited: %q", g)
	}
	if m := ts.Metrics(); m.RateLimitedResponses != 2 || m.PublicReadLimiter.RejectedPerSource != 2 {
		t.Errorf("rate_limited_responses %d, limiter per-source rejections %d; want 2 and 2", m.RateLimitedResponses, m.PublicReadLimiter.RejectedPerSource)
	}
	clock.Advance(time.Second)
	if r := c.call("DomainKeys", "get-domain-keys", []byte{0xa0}); r.Status != 0 {
		t.Errorf("after refill: status %v %q, want Ok", r.Status, r.Error)
	}
	// Another source has its own bucket.
	c2 := dialFrom(t, ts, "127.0.0.2")
	if r := c2.call("DomainKeys", "get-domain-keys", []byte{0xa0}); r.Status != 0 {
		t.Errorf("second source: status %v %q, want Ok", r.Status, r.Error)
	}
}

func TestAuthAttemptLimiter(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive(), Clock: &admit.ManualClock{}})
	c := dial(t, ts)
	auth := "user.secret"
	body := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: []byte{0xa0}, Auth: &auth})
	for i := range 10 {
		if err := linkkeys.WriteFrame(c.tc, body); err != nil {
			t.Fatal(err)
		}
		if r := c.recv(); r.Status != 0 {
			t.Fatalf("attempt %d: status %v %q", i, r.Status, r.Error)
		}
	}
	if err := linkkeys.WriteFrame(c.tc, body); err != nil {
		t.Fatal(err)
	}
	if r := c.recv(); r.Status != linkkeys.StatusForbidden || r.Error != "Too many authentication attempts. Wait and try again" {
		t.Errorf("11th attempt: status %v %q, want Forbidden and the upstream message", r.Status, r.Error)
	}
	// Requests without auth are not limited.
	if g := greeting(t, c.call("Hello", "hello", []byte{0xa0})); g != "Hello, world!" {
		t.Errorf("greeting %q", g)
	}
}

// TestAdmissionAccountingIsExact drives every admission outcome and checks
// accepted = established + rejections + timeouts + every shed counter.
func TestAdmissionAccountingIsExact(t *testing.T) {
	cfg := permissive()
	cfg.MaxConnections = 5
	cfg.HandshakeTimeout = 300 * time.Millisecond
	// Each source gets a burst of 2 handshakes; 4 distinct sources per
	// window, then protection mode with an overflow burst of 1. The manual
	// clock never moves, so nothing refills or rotates.
	cfg.Handshake = admit.LimiterConfig{RatePerMinute: 1e-3, Burst: 2, GlobalRatePerSecond: 1e6, GlobalBurst: 1e6,
		OverflowRatePerSecond: 1e-3, OverflowBurst: 1, DistinctSourceThreshold: 4}
	ts := startServer(t, TestServerOptions{Config: cfg, Clock: &admit.ManualClock{}})
	openIs := func(n uint64) {
		t.Helper()
		eventually(t, fmt.Sprintf("open_connections == %d", n), func() bool { return ts.Metrics().OpenConnections == n })
	}

	_ = dialFrom(t, ts, "127.0.0.3") // established
	_ = dialFrom(t, ts, "127.0.0.3") // established: the source's whole burst
	readUntilClosed(t, dialRawFrom(t, ts.Addr, "127.0.0.3"))
	openIs(2) // per-source shed
	bad := dialRawFrom(t, ts.Addr, "127.0.0.4")
	if _, err := bad.Write(bytes.Repeat([]byte{0x16, 0x03, 0x01, 0x00, 0x01, 0xff}, 4)); err != nil {
		t.Fatal(err)
	}
	readUntilClosed(t, bad)
	openIs(2) // handshake rejection
	readUntilClosed(t, dialRawFrom(t, ts.Addr, "127.0.0.5"))
	openIs(2)                        // handshake timeout: a silent client
	_ = dialFrom(t, ts, "127.0.0.6") // the window's 4th source
	_ = dialFrom(t, ts, "127.0.0.7") // protection mode: takes the overflow token
	readUntilClosed(t, dialRawFrom(t, ts.Addr, "127.0.0.8"))
	openIs(4)                        // overflow shed
	_ = dialFrom(t, ts, "127.0.0.6") // a known source: 5 open, the cap
	readUntilClosed(t, dialRawFrom(t, ts.Addr, "127.0.0.9"))
	openIs(5) // connection-limit shed, checked before the limiter

	eventually(t, "quiet server", func() bool { return ts.Metrics().HandshakesInProgress == 0 })
	m := ts.Metrics()
	if m.Pending() != 0 {
		t.Errorf("accounting: accepted %d != established_total %d + rejections %d + timeouts %d + shed %d/%d/%d/%d (pending %d)",
			m.AcceptedConnections, m.EstablishedTotal, m.HandshakeRejections, m.HandshakeTimeouts, m.ShedConnectionLimit,
			m.ShedHandshakePerSource, m.ShedHandshakeOverflow, m.ShedHandshakeGlobal, m.Pending())
	}
	want := linkkeys.MetricsLine{AcceptedConnections: 10, EstablishedTotal: 5, HandshakeRejections: 1, HandshakeTimeouts: 1,
		ShedConnectionLimit: 1, ShedHandshakePerSource: 1, ShedHandshakeOverflow: 1}
	got := linkkeys.MetricsLine{AcceptedConnections: m.AcceptedConnections, EstablishedTotal: m.EstablishedTotal,
		HandshakeRejections: m.HandshakeRejections, HandshakeTimeouts: m.HandshakeTimeouts,
		ShedHandshakePerSource: m.ShedHandshakePerSource, ShedHandshakeOverflow: m.ShedHandshakeOverflow,
		ShedHandshakeGlobal: m.ShedHandshakeGlobal, ShedConnectionLimit: m.ShedConnectionLimit}
	if linkkeys.FormatMetricsLine(got) != linkkeys.FormatMetricsLine(want) {
		t.Errorf("counters\n got %s\nwant %s", linkkeys.FormatMetricsLine(got), linkkeys.FormatMetricsLine(want))
	}
	if m.HandshakeLimiter.ProtectionModeEntries != 1 {
		t.Errorf("protection_mode_entries %d, want 1", m.HandshakeLimiter.ProtectionModeEntries)
	}
}

func dialRawFrom(t testing.TB, addr, local string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

func TestConnectionLimitCountsHandshakingSockets(t *testing.T) {
	cfg := permissive()
	cfg.MaxConnections = 2
	ts := startServer(t, TestServerOptions{Config: cfg})
	// Two silent sockets hold both places while they wait for a handshake.
	s1, s2 := rawDial(t, ts.Addr), rawDial(t, ts.Addr)
	eventually(t, "2 handshakes waiting", func() bool { return ts.Metrics().HandshakesInProgress == 2 })
	third := rawDial(t, ts.Addr)
	readUntilClosed(t, third)
	eventually(t, "1 shed", func() bool { return ts.Metrics().ShedConnectionLimit == 1 })
	s1.Close()
	s2.Close()
	eventually(t, "all closed", func() bool { m := ts.Metrics(); return m.OpenConnections == 0 && m.HandshakesInProgress == 0 })
	if m := ts.Metrics(); m.Pending() != 0 || m.HandshakeRejections != 2 {
		t.Errorf("pending %d, rejections %d; want 0 and 2", m.Pending(), m.HandshakeRejections)
	}
}

func TestIdleConnectionsParkAndWake(t *testing.T) {
	if testing.Short() {
		t.Skip("parks connections")
	}
	cfg := permissive()
	cfg.ParkAfter = 20 * time.Millisecond
	ts := startServer(t, TestServerOptions{Config: cfg})
	if ts.poller == nil {
		t.Skip("no poller on this platform")
	}
	var cs []*client
	for range 3 {
		cs = append(cs, dial(t, ts))
	}
	eventually(t, "3 parked", func() bool { return ts.Metrics().ParkedConnections == 3 })
	for round := range 3 {
		for i, c := range cs {
			name := fmt.Sprintf("%d-%d", round, i)
			if g := greeting(t, c.call("Hello", "hello", helloPayload(t, &name))); g != "Hello, "+name+"!" {
				t.Fatalf("parked connection %d: greeting %q", i, g)
			}
		}
		eventually(t, "parked again", func() bool { return ts.Metrics().ParkedConnections == 3 })
	}
	// A parked connection whose peer closes is cleaned up.
	cs[0].tc.NetConn().Close()
	eventually(t, "2 established", func() bool { m := ts.Metrics(); return m.EstablishedConnections == 2 && m.ParkedConnections == 2 })
	if m := ts.Metrics(); m.FrameBufferBytes != 0 {
		t.Errorf("frame_buffer_bytes %d with parked connections, want 0", m.FrameBufferBytes)
	}
}

func TestIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		park time.Duration
	}{{"parked", 20 * time.Millisecond}, {"not parked", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := permissive()
			cfg.ParkAfter = tc.park
			cfg.IdleTimeout = 300 * time.Millisecond
			ts := startServer(t, TestServerOptions{Config: cfg})
			c := dial(t, ts)
			c.expectClosed()
			eventually(t, "closed on the server", func() bool {
				m := ts.Metrics()
				return m.OpenConnections == 0 && m.EstablishedConnections == 0 && m.ParkedConnections == 0
			})
		})
	}
}

func TestPartialPrefixIsUnderTheIdleTimeout(t *testing.T) {
	cfg := permissive()
	cfg.ParkAfter = 20 * time.Millisecond
	cfg.IdleTimeout = 300 * time.Millisecond
	ts := startServer(t, TestServerOptions{Config: cfg})
	c := dial(t, ts)
	if _, err := c.tc.Write([]byte{0, 0}); err != nil { // half a prefix
		t.Fatal(err)
	}
	c.expectClosed()
}

func TestShutdown(t *testing.T) {
	cfg := permissive()
	cfg.ParkAfter = 20 * time.Millisecond
	ts, err := NewTestServer(TestServerOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	parked := dial(t, ts)
	eventually(t, "parked", func() bool { return ts.Metrics().ParkedConnections == 1 })
	active := dial(t, ts)
	if g := greeting(t, active.call("Hello", "hello", helloPayload(t, nil))); g != "Hello, world!" {
		t.Fatalf("greeting %q", g)
	}
	_ = rawDial(t, ts.Addr) // handshaking until Shutdown's wait ends it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := testwait.Recv(t, ts.serveCh, testwait.Long, "Serve's return after Shutdown"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
	if m := ts.Metrics(); m.OpenConnections != 0 || m.EstablishedConnections != 0 || m.ParkedConnections != 0 || m.Pending() != 0 {
		t.Errorf("after Shutdown: %s", formatLine(m))
	}
	parked.expectClosed()
	active.expectClosed()
	if err := ts.Server.Serve(ts.ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

func TestGetDomainKeysFromStore(t *testing.T) {
	ctx := context.Background()
	store, err := OpenStore(ctx, t.TempDir()+"/db.sqlite3")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	key, err := store.PrepareServerKey(ctx, ServerKeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, TestServerOptions{Config: permissive(), Keys: store, Key: key})
	c := dial(t, ts)
	keys := func() linkkeys.GetDomainKeysResponse {
		r := c.call("DomainKeys", "get-domain-keys", []byte{0xa0})
		if r.Status != 0 {
			t.Fatalf("status %v %q", r.Status, r.Error)
		}
		var resp linkkeys.GetDomainKeysResponse
		if err := linkkeys.DecodePayload(r.Payload, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := keys()
	if len(resp.Keys) != 1 || resp.Keys[0].Fingerprint != ts.Fingerprint || resp.Keys[0].KeyUsage != "sign" ||
		resp.Keys[0].Algorithm != "ed25519" || resp.Domain != "loadtest.local" || resp.RecentRevocationsAvailable == nil || *resp.RecentRevocationsAvailable {
		t.Fatalf("get-domain-keys = %+v, want the server's own signing key, no recent revocations", resp)
	}
	// A write through another handle (another process) shows only after
	// invalidation (or the TTL); one through the server's own store at once.
	other, err := OpenStore(ctx, store.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rev := linkkeys.Revocation{TargetKeyID: resp.Keys[0].KeyID, TargetFingerprint: resp.Keys[0].Fingerprint,
		RevokedAt: time.Now().UTC().Format(time.RFC3339), Signatures: []linkkeys.ClaimSignature{{Domain: "loadtest.local", SignedByKeyID: "k2", Signature: []byte{1, 2}}}}
	if err := other.InsertRevocation(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if again := keys(); len(again.Keys) != 1 {
		t.Errorf("cached response changed before invalidation: %+v", again)
	}
	ts.InvalidateSnapshots()
	after := keys()
	if len(after.Keys) != 0 || after.RecentRevocationsAvailable == nil || !*after.RecentRevocationsAvailable {
		t.Errorf("after revocation and invalidation: %+v, want no keys and recent revocations", after)
	}
	pub := make([]byte, 32)
	pub[0] = 1
	if _, err := store.InsertDomainKey(ctx, DomainKey{PublicKey: pub, Algorithm: "x25519", KeyUsage: "encrypt", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if now := keys(); len(now.Keys) != 1 || now.Keys[0].KeyUsage != "encrypt" {
		t.Errorf("a write through the server's own store did not show at once: %+v", now)
	}
	r := c.call("DomainKeys", "get-revocations", []byte{0xa0})
	var revs linkkeys.GetRevocationsResponse
	if r.Status != 0 || linkkeys.DecodePayload(r.Payload, &revs) != nil || len(revs.Revocations) != 1 ||
		revs.Revocations[0].TargetKeyID != rev.TargetKeyID || len(revs.Revocations[0].Signatures) != 1 {
		t.Errorf("get-revocations: status %v %+v", r.Status, revs)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r = c.call("DomainKeys", "get-revocations", mustPayload(linkkeys.GetRevocationsRequest{Since: &future}))
	if r.Status != 0 || linkkeys.DecodePayload(r.Payload, &revs) != nil || len(revs.Revocations) != 0 {
		t.Errorf("get-revocations since the future: status %v %+v", r.Status, revs)
	}
}

func TestResponseFramesAreBatchedWhenPipelined(t *testing.T) {
	ts := startServer(t, TestServerOptions{Config: permissive()})
	c := dial(t, ts)
	var batch []byte
	for range 4 {
		batch = linkkeys.AppendFrame(batch, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Ops", Op: "healthcheck", Payload: []byte{0xa0}}))
	}
	if _, err := c.tc.Write(batch); err != nil {
		t.Fatal(err)
	}
	// All four answers in order; the bytes are the same frame four times.
	one := ts.fixed.health
	got := make([]byte, 4*len(one))
	if _, err := ioReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat(one, 4)) {
		t.Errorf("pipelined answers differ from four healthcheck frames")
	}
	if n := binary.BigEndian.Uint32(one); int(n) != len(one)-4 {
		t.Errorf("fixed frame prefix %d, body %d", n, len(one)-4)
	}
}

func ioReadFull(c *client, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.br.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
