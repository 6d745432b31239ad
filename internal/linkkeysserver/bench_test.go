package linkkeysserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// benchSourcePrefixes runs the request benchmarks with 16 source prefixes configured, the last
// holding the clients' 127.0.0.1 (docs/benchmarks.md, Source prefixes).
var benchSourcePrefixes = flag.Bool("bench-source-prefixes", false, "configure 16 source prefixes in the request benchmarks")

// sixteenPrefixes are 16 disjoint ranges, the last one 127.0.0.0/24: a peer on 127.0.0.1 is
// matched after 15 misses, the most a connection costs.
func sixteenPrefixes() []SourcePrefix {
	var parts []string
	for i := range 15 {
		parts = append(parts, fmt.Sprintf("s%d=127.%d.0.0/16", i, i+1))
	}
	ps, problems := ParseSourcePrefixes(strings.Join(append(parts, "local=127.0.0.0/24"), ","))
	if len(problems) > 0 {
		panic(problems)
	}
	return ps
}

// scaleLimits is the seed's scale profile for both limiters.
func scaleLimits() admit.LimiterConfig {
	return admit.LimiterConfig{RatePerMinute: 6e6, Burst: 1e6, GlobalRatePerSecond: 1e5, GlobalBurst: 2e5,
		OverflowRatePerSecond: 1e5, OverflowBurst: 2e5}
}

// okPrefix starts every status-0 response: {v: 1, status: 0, ...}.
var okPrefix = []byte("\xa3\x61v\x01\x66status\x00")

// benchRequests runs b.N request/response round trips of frame over conns
// persistent connections, one request in flight per connection (like
// request-bench). Client and server share this process and its CPUs, so
// ns/op is the combined cost; req/s is reported.
func benchRequests(b *testing.B, conns int, frame []byte, cfg Config, keys KeySource) {
	if *benchSourcePrefixes {
		cfg.SourcePrefixes = sixteenPrefixes()
	}
	ts, err := NewTestServer(TestServerOptions{Config: cfg, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	benchClients(b, ts, conns, frame)
}

// benchClients runs the request loop against ts.Addr.
func benchClients(b *testing.B, ts *TestServer, conns int, frame []byte) {
	type cl struct {
		tc *tls.Conn
		br *bufio.Reader
	}
	cls := make([]cl, conns)
	for i := range cls {
		nc, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			b.Fatal(err)
		}
		tc := tls.Client(nc, ts.ClientTLSConfig())
		if err := tc.HandshakeContext(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer tc.Close()
		cls[i] = cl{tc, bufio.NewReaderSize(tc, 4096)}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range cls {
		wg.Add(1)
		go func(c cl) {
			defer wg.Done()
			buf := make([]byte, 0, 512)
			for next.Add(1) <= int64(b.N) {
				if _, err := c.tc.Write(frame); err != nil {
					failed.Add(1)
					return
				}
				body, err := linkkeys.ReadFrame(c.br, 0, buf[:cap(buf)])
				if err != nil || !bytes.HasPrefix(body, okPrefix) {
					failed.Add(1)
					return
				}
			}
		}(cls[i])
	}
	wg.Wait()
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d connections failed", failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

func BenchmarkGetDomainKeys64Conns(b *testing.B) {
	cfg := Config{PublicRead: scaleLimits(), Handshake: scaleLimits()}
	frame := linkkeys.AppendFrame(nil, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}}))
	benchRequests(b, 64, frame, cfg, nil)
}

func BenchmarkHello64Conns(b *testing.B) {
	cfg := Config{PublicRead: scaleLimits(), Handshake: scaleLimits()}
	frame := linkkeys.AppendFrame(nil, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Hello", Op: "hello", Payload: helloNull}))
	benchRequests(b, 64, frame, cfg, nil)
}

// BenchmarkDispatchGetDomainKeys is the server's per-request work without
// the network: pre-scan, envelope decode, public-read gate, cache hit,
// response append.
func BenchmarkDispatchGetDomainKeys(b *testing.B) {
	ts, err := NewTestServer(TestServerOptions{Config: Config{PublicRead: scaleLimits()}})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	body := linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "DomainKeys", Op: "get-domain-keys", Payload: []byte{0xa0}})
	c := &conn{srv: ts.Server}
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out, _ = ts.Server.dispatch(out[:0], body, c)
	}
}

// BenchmarkMinimalTLSServer64Conns is the reference point for the two
// benchmarks above: the same clients against a bare goroutine-per-connection
// TLS server that answers every frame with a fixed response (no admission,
// no dispatch). The gap between it and BenchmarkGetDomainKeys64Conns is what
// this server's own work costs.
func BenchmarkMinimalTLSServer64Conns(b *testing.B) {
	ts, err := NewTestServer(TestServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	resp := ts.Server.fixed.health
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(nc, ts.Server.tlsCfg)
				br := bufio.NewReader(tc)
				buf := make([]byte, 4096)
				for {
					if _, err := linkkeys.ReadFrame(br, 0, buf); err != nil {
						return
					}
					if _, err := tc.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	ts2 := *ts
	ts2.Addr = ln.Addr().String()
	frame := linkkeys.AppendFrame(nil, linkkeys.AppendRequest(nil, &linkkeys.Request{Service: "Ops", Op: "healthcheck", Payload: []byte{0xa0}}))
	benchClients(b, &ts2, 64, frame)
}

// shedConn is an accepted socket as admitConn sees it: a peer address and a Close.
type shedConn struct {
	net.Conn
	remote *net.TCPAddr
}

func (c shedConn) RemoteAddr() net.Addr { return c.remote }
func (c shedConn) Close() error         { return nil }

// BenchmarkAdmitShed is the accept loop's work for one connection the per-source limiter sheds
// (connection cap, limiter check, counters, close; no socket, no TLS), with no source prefix, with
// one that matches, and with 16 where the peer matches the last or none: the per-connection cost
// of the per-prefix counters (docs/benchmarks.md, Source prefixes).
func BenchmarkAdmitShed(b *testing.B) {
	one, _ := ParseSourcePrefixes("local=127.0.0.0/24")
	outside := sixteenPrefixes()[:15]
	for _, bc := range []struct {
		name     string
		prefixes []SourcePrefix
	}{{"prefixes=0", nil}, {"prefixes=1", one}, {"prefixes=16/last", sixteenPrefixes()}, {"prefixes=15/none", outside}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := permissive()
			cfg.Handshake.Burst, cfg.Handshake.RatePerMinute = 1, 1e-9
			cfg.SourcePrefixes = bc.prefixes
			s := &Server{Config: cfg, TLSConfig: &tls.Config{}}
			if err := s.init(); err != nil {
				b.Fatal(err)
			}
			peer := netip.MustParseAddr("127.0.0.1")
			s.hs.Check(admit.KeyForAddr(peer, 128)) // the one token: every connection below is shed
			nc := shedConn{remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(peer, 40000))}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.admitConn(nc)
			}
			b.StopTimer()
			if m := s.Metrics(); m.ShedHandshakePerSource != uint64(b.N) || len(bc.prefixes) == 1 && m.Sources[0].ShedHandshakePerSource != uint64(b.N) {
				b.Fatalf("shed %d of %d", m.ShedHandshakePerSource, b.N)
			}
		})
	}
}

// BenchmarkSourceMatch is the lookup the accept loop adds per connection with source prefixes
// configured: a scan of the ranges for the peer address.
func BenchmarkSourceMatch(b *testing.B) {
	set := newSourceSet(sixteenPrefixes())
	for _, bc := range []struct {
		name string
		peer netip.Addr
		want uint8
	}{{"16/first", netip.MustParseAddr("127.1.0.9"), 1}, {"16/last", netip.MustParseAddr("127.0.0.1"), 16},
		{"16/none", netip.MustParseAddr("10.0.0.1"), 0}, {"16/ipv6", netip.MustParseAddr("::1"), 0}} {
		b.Run(bc.name, func(b *testing.B) {
			var got uint8
			for range b.N {
				got = set.match(bc.peer)
			}
			if got != bc.want {
				b.Fatalf("match %d, want %d", got, bc.want)
			}
		})
	}
}
