package linkkeysload

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// fakeServer is a minimal LinkKeys TLS server for this package's unit tests: it answers
// get-domain-keys and hello in order (pipelining included), can refuse every n-th connection the
// way a rate limiter does (close before any TLS byte), and counts like the real server. The
// integration tests run the same clients against the real reference server.
type fakeServer struct {
	t      testing.TB
	ln     net.Listener
	target Target
	cfg    *tls.Config
	refuse func(n int64) bool // close the n-th accepted connection (0-based) without TLS
	status linkkeys.Status    // status of every answer (0 = OK)
	// dropAfterHandshake, when set, closes the n-th established connection (0-based) right after
	// its handshake and signals dropped.
	dropAfterHandshake func(n int64) bool
	dropped            chan struct{}
	accepted           atomic.Int64
	shed               atomic.Int64
	done               atomic.Int64 // completed handshakes
	failed             atomic.Int64
	frames             atomic.Int64
	wg                 sync.WaitGroup
	mu                 sync.Mutex
	conns              map[net.Conn]struct{}
	peers              []netip.Addr // every accepted connection's source, in order (under mu)
}

func newFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := linkkeys.SelfSignedCert("loadtest.local", key, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, ln: ln, cfg: linkkeys.ServerTLSConfig(cert), conns: map[net.Conn]struct{}{}}
	s.target = Target{
		Addr:        ln.Addr().(*net.TCPAddr).AddrPort(),
		Domain:      "loadtest.local",
		Fingerprint: linkkeys.Fingerprint(key.Public().(ed25519.PublicKey)),
	}
	s.target.Addr = netip.AddrPortFrom(s.target.Addr.Addr().Unmap(), s.target.Addr.Port())
	return s
}

func (s *fakeServer) start() *fakeServer {
	s.wg.Add(1)
	go s.serve()
	s.t.Cleanup(s.close)
	return s
}

func (s *fakeServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		n := s.accepted.Add(1) - 1
		s.mu.Lock()
		s.peers = append(s.peers, c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
		s.mu.Unlock()
		if s.refuse != nil && s.refuse(n) {
			s.shed.Add(1)
			_ = c.Close()
			continue
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			s.handle(c)
		}()
	}
}

func (s *fakeServer) handle(raw net.Conn) {
	tc := tls.Server(raw, s.cfg)
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		s.failed.Add(1)
		return
	}
	n := s.done.Add(1) - 1
	if s.dropAfterHandshake != nil && s.dropAfterHandshake(n) {
		_ = raw.Close()
		s.dropped <- struct{}{}
		return
	}
	_ = raw.SetDeadline(time.Time{})
	br := bufio.NewReader(tc)
	bw := bufio.NewWriter(tc)
	var buf []byte
	for {
		body, err := linkkeys.ReadFrame(br, 0, buf)
		if err != nil {
			return
		}
		buf = body[:0]
		s.frames.Add(1)
		var resp []byte
		req, err := linkkeys.DecodeRequest(body)
		switch {
		case err != nil:
			resp = linkkeys.ErrorResponse(linkkeys.StatusMalformedEnvelope, err.Error())
		case s.status != linkkeys.StatusOK:
			resp = linkkeys.ErrorResponse(s.status, linkkeys.RateLimitedMessage(1))
		case req.Service == "DomainKeys" && req.Op == "get-domain-keys":
			p, _ := linkkeys.EncodePayload(linkkeys.GetDomainKeysResponse{Domain: "loadtest.local"})
			resp = linkkeys.OKResponse(p)
		case req.Service == "Hello":
			p, _ := linkkeys.EncodePayload(linkkeys.HelloResponse{Greeting: "Hello, world!"})
			resp = linkkeys.OKResponse(p)
		default:
			resp = linkkeys.ErrorResponse(linkkeys.StatusUnknownServiceOrOp, linkkeys.UnknownOpMessage(req.Service, req.Op))
		}
		if err := linkkeys.WriteFrame(bw, resp); err != nil {
			return
		}
		// Flush when no further request is already buffered: pipelined answers go out together.
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// metricsLine renders the fake server's counters as a METRICS line (with established_total).
func (s *fakeServer) metricsLine(label string) string {
	snap := linkkeys.MetricsLine{Label: label, AcceptedConnections: uint64(s.accepted.Load()), ShedHandshakeGlobal: uint64(s.shed.Load()),
		HandshakeRejections: uint64(s.failed.Load()), FramesProcessed: uint64(s.frames.Load())}
	return formatTestMetrics(snap, uint64(s.done.Load()))
}

func formatTestMetrics(s linkkeys.MetricsLine, establishedTotal uint64) string {
	return "METRICS {\"label\":\"" + s.Label + "\",\"elapsed_secs\":1.0" +
		",\"accepted_connections\":" + u(s.AcceptedConnections) + ",\"open_connections\":0,\"established_connections\":0" +
		",\"handshakes_in_progress\":" + u(s.HandshakesInProgress) + ",\"handshake_timeouts\":0" +
		",\"handshake_rejections\":" + u(s.HandshakeRejections) + ",\"shed_connection_limit\":0,\"shed_handshake_per_source\":0" +
		",\"shed_handshake_overflow\":0,\"shed_handshake_global\":" + u(s.ShedHandshakeGlobal) +
		",\"frames_processed\":" + u(s.FramesProcessed) + ",\"frame_buffer_bytes\":0,\"process_rss_bytes\":null" +
		",\"established_total\":" + u(establishedTotal) + "}"
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }
