package linkkeysserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("linkkeysserver: Server closed")

// Server is the LinkKeys reference TCP/TLS server. Set the exported fields,
// then call Serve with one or more listeners. The exported fields must not
// change after the first Serve.
type Server struct {
	// Config holds the tunables; its zero value is the upstream default
	// profile.
	Config Config
	// TLSConfig is the server's TLS configuration, typically
	// linkkeys.ServerTLSConfig of a self-signed Ed25519 certificate. It is
	// required. The server uses a copy with dynamic record sizing off, so a
	// batch of responses goes out in as few records and writes as possible.
	TLSConfig *tls.Config
	// Keys answers get-domain-keys and get-revocations; nil serves empty
	// lists. When it implements ChangeNotifier (Store does), its writes
	// invalidate the snapshot cache at once.
	Keys KeySource
	// Logger receives operational logs (nil discards them).
	Logger *slog.Logger
	// Clock drives the limiters and the snapshot cache (nil means
	// admit.SystemClock()); tests substitute an admit.ManualClock.
	Clock admit.Clock
	// Occupancy, when set, watches the open connections (a sequential
	// multi-process fill: RunChild sets it).
	Occupancy *Occupancy

	initOnce sync.Once
	initErr  error
	cfg      Config
	tlsCfg   *tls.Config
	logger   *slog.Logger
	epoch    time.Time
	kernel0  machine.Kernel // the host's counters when the server started
	hs       *admit.Limiter
	pr       *admit.Limiter
	auth     *admit.Limiter
	gate     *admit.Gate
	cache    *Cache[snapshotKey]
	poller   *poller
	m        counters
	srcs     *sourceSet // nil when no source prefix is configured
	table    connTable
	gens     atomic.Uint32
	closing  atomic.Bool
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	closed   bool
	fixed    fixedResponses
	loadKeys Loader
	loadRevs Loader
	hsJobs   chan hsJob    // admitted connections handed to an idle handshaker
	hsIdle   atomic.Int32  // handshakers waiting on hsJobs
	quit     chan struct{} // closed by the first Shutdown or Close: idle handshakers exit
}

// hsJob is an admitted connection waiting for its TLS handshake.
type hsJob struct {
	nc   net.Conn
	peer netip.Addr
	src  uint8
}

// handshakerIdle is how long a handshaker waits for the next admitted
// connection before it exits.
const handshakerIdle = time.Second

// maxIdleHandshakers bounds the handshakers waiting for the next admitted
// connection; the others exit at once. A steady stream of handshakes finds
// one of them; after a burst (a ddos of 500 concurrent handshakes) the rest
// do not each keep an 8–16 KiB stack for handshakerIdle: at the top of the
// default-profile ddos 449 of 581 handshake goroutines were idle
// (docs/benchmarks.md, LinkKeys server memory).
const maxIdleHandshakers = 64

func (s *Server) init() error {
	s.initOnce.Do(func() {
		if s.TLSConfig == nil {
			s.initErr = errors.New("linkkeysserver: Server.TLSConfig is nil; build one with linkkeys.ServerTLSConfig")
			return
		}
		if err := s.Config.Validate(); err != nil {
			s.initErr = err
			return
		}
		s.cfg = s.Config.WithDefaults()
		s.logger = s.Logger
		if s.logger == nil {
			s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		s.epoch = time.Now()
		s.kernel0 = machine.ReadTCPCounters()
		clock := s.Clock
		if clock == nil {
			clock = admit.SystemClock()
		}
		s.tlsCfg = s.TLSConfig.Clone()
		s.tlsCfg.DynamicRecordSizingDisabled = true
		s.hs = admit.NewLimiter(s.cfg.Handshake, clock)
		s.pr = admit.NewLimiter(s.cfg.PublicRead, clock)
		s.auth = admit.NewLimiter(authAttemptLimits(), clock)
		s.gate = admit.NewGate(s.cfg.HandshakeConcurrency, -1)
		s.cache = NewCache[snapshotKey](CacheConfig{
			TTL:    s.cfg.SnapshotTTL,
			Clock:  clock,
			Logger: s.logger,
		})
		s.srcs = newSourceSet(s.cfg.SourcePrefixes)
		s.lns = make(map[net.Listener]struct{})
		s.fixed = buildFixedResponses()
		s.loadKeys = s.loadDomainKeysSnapshot
		s.loadRevs = s.loadRevocationsSnapshot
		s.hsJobs = make(chan hsJob)
		s.quit = make(chan struct{})
		if n, ok := s.Keys.(ChangeNotifier); ok {
			n.OnChange(s.cache.InvalidateAll)
		}
		if s.cfg.ParkAfter > 0 {
			p, err := newPoller(s)
			if err != nil {
				s.logger.Warn("linkkeysserver: idle connections will not be parked", "err", err)
			} else {
				s.poller = p
			}
		}
	})
	return s.initErr
}

// mono returns nanoseconds since the server started, from the monotonic
// clock.
func (s *Server) mono() int64 { return int64(time.Since(s.epoch)) }

// wall converts a mono reading to a time for deadlines.
func (s *Server) wall(mono int64) time.Time { return s.epoch.Add(time.Duration(mono)) }

// Serve accepts connections on ln until Shutdown or Close and returns
// ErrServerClosed then, or the listener's error. Each accepted connection
// goes through admission: the connection cap first, then the
// handshake limiter keyed by the peer's source address; a refused connection
// is closed without any TLS byte. Admitted connections are handshaken under
// the handshake concurrency gate and timeout, then served.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.init(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAccept(err) {
				if s.Occupancy != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
					// Out of descriptors before the fill's mark: turn full here, so new
					// connections go to the next process while this one waits for a close.
					s.Occupancy.exhausted(s.m.open.Load())
				}
				// EMFILE and friends: back off like net/http and keep going.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger.Warn("linkkeysserver: accept failed; retrying", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("linkkeysserver: accept: %w", err)
		}
		backoff = 0
		s.admitConn(nc)
	}
}

// admitConn runs admission for one accepted socket on the accept goroutine:
// it is cheap and sheds without spawning anything. With source prefixes
// configured, the peer's prefix (if any) is looked up once here and counted
// alongside every global counter of the connection.
func (s *Server) admitConn(nc net.Conn) {
	s.m.accepted.Add(1)
	s.addOpen(1)
	var peer netip.Addr
	var src uint8
	if s.srcs != nil {
		peer = peerAddr(nc)
		if src = s.srcs.match(peer); src != 0 {
			s.srcs.at(src).accepted.Add(1)
		}
	}
	// Connection cap first. open counts every socket from accept to close,
	// so the cap is checked against it directly. Upstream increments
	// open_connections here and never decrements it when shedding (a gauge
	// that drifts up by one per shed connection); this server decrements.
	if uint64(s.m.open.Load()) > s.cfg.MaxConnections {
		s.m.shedConnLimit.Add(1)
		if src != 0 {
			s.srcs.at(src).shed[shedConnLimit].Add(1)
		}
		s.rawClose(nc)
		return
	}
	if !peer.IsValid() {
		peer = peerAddr(nc)
	}
	d := s.hs.Check(admit.KeyForAddr(peer, s.cfg.Handshake.IPv6Prefix))
	if !d.Allowed() {
		why := shedGlobal
		switch d.Reason {
		case admit.PerSource:
			s.m.shedPerSource.Add(1)
			why = shedPerSource
		case admit.Overflow:
			s.m.shedOverflow.Add(1)
			why = shedOverflow
		default:
			s.m.shedGlobal.Add(1)
		}
		if src != 0 {
			s.srcs.at(src).shed[why].Add(1)
		}
		s.logger.Debug("linkkeysserver: handshake limited", "peer", peer, "reason", d.Reason.String())
		s.rawClose(nc)
		return
	}
	if src != 0 {
		s.srcs.at(src).admitted.Add(1)
	}
	s.m.handshaking.Add(1)
	j := hsJob{nc: nc, peer: peer, src: src}
	select {
	case s.hsJobs <- j:
	default:
		go s.handshaker(j)
	}
}

// handshaker runs the handshake of an admitted connection and serves it
// until it parks or closes, then takes the next admitted connection, for as
// long as one comes within handshakerIdle. Reusing the goroutine keeps the
// stack crypto/tls has grown it to: a fresh goroutine per connection starts
// small, grows by copying its stack during the handshake and frees the grown
// stack when it exits: perf put 3 % of the server's CPU per full handshake in
// that stack growth (docs/benchmarks.md).
func (s *Server) handshaker(j hsJob) {
	var idle *time.Timer
	for {
		s.handshake(j.nc, j.peer, j.src)
		j = hsJob{}
		if s.hsIdle.Add(1) > maxIdleHandshakers {
			s.hsIdle.Add(-1)
			if idle != nil {
				idle.Stop()
			}
			return
		}
		if idle == nil {
			idle = time.NewTimer(handshakerIdle)
		} else {
			idle.Reset(handshakerIdle)
		}
		select {
		case j = <-s.hsJobs:
			s.hsIdle.Add(-1)
		case <-idle.C:
			s.hsIdle.Add(-1)
			return
		case <-s.quit:
			s.hsIdle.Add(-1)
			idle.Stop()
			return
		}
	}
}

// rawClose closes a socket that never saw TLS and counts it closed.
func (s *Server) rawClose(nc net.Conn) {
	_ = nc.Close()
	s.addOpen(-1)
}

// addOpen changes the open-connection count and tells the Occupancy watch.
func (s *Server) addOpen(d int64) {
	n := s.m.open.Add(d)
	if s.Occupancy != nil {
		s.Occupancy.note(n)
	}
}

func peerAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.IPv4Unspecified()
}

// handshake runs the TLS handshake of an admitted connection and then serves
// it. The handshake timeout covers the wait for a concurrency slot and the
// handshake itself. The connection is in the server's table from the start,
// so Shutdown and Close can cut a handshake short (it then counts as a
// handshake timeout).
func (s *Server) handshake(nc net.Conn, peer netip.Addr, src uint8) {
	start := time.Now()
	deadline := start.Add(s.cfg.HandshakeTimeout)
	c := s.newConn(nc, tls.Server(nc, s.tlsCfg), peer, deadline)
	c.src = src
	fail := func(timeout bool, err error) {
		c.state.Store(stateClosed)
		if c.fd >= 0 {
			s.table.clear(int(c.fd), c)
		}
		s.m.handshaking.Add(-1)
		if timeout {
			s.m.hsTimeouts.Add(1)
			if src != 0 {
				s.srcs.at(src).hsTimeouts.Add(1)
			}
		} else {
			s.m.hsRejections.Add(1)
			if src != 0 {
				s.srcs.at(src).hsRejections.Add(1)
			}
		}
		if err != nil {
			s.logger.Debug("linkkeysserver: TLS handshake failed", "peer", peer, "err", err)
		}
		s.rawClose(nc)
	}
	if s.closing.Load() {
		fail(true, nil)
		return
	}
	release, err := s.acquireHandshakeSlot(deadline)
	if err != nil {
		fail(true, nil)
		return
	}
	_ = nc.SetDeadline(deadline)
	if s.closing.Load() { // Shutdown's interrupt may have come before our SetDeadline
		release()
		fail(true, nil)
		return
	}
	err = c.tc.Handshake()
	release()
	if err != nil {
		fail(isTimeout(err) || !time.Now().Before(deadline), err)
		return
	}
	// Count established before leaving handshaking, so a snapshot never
	// shows the connection in neither.
	s.m.established.Add(1)
	s.m.establishedTotal.Add(1)
	if src != 0 {
		s.srcs.at(src).established.Add(1)
	}
	s.m.handshaking.Add(-1)
	if !c.state.CompareAndSwap(stateHandshaking, stateActive) {
		c.close(closeShutdown) // Shutdown or Close got there first
		return
	}
	c.serve()
}

func (s *Server) acquireHandshakeSlot(deadline time.Time) (func(), error) {
	// Fast path: with an already-cancelled context Acquire takes a free slot
	// or fails at once, without a timer.
	if release, err := s.gate.Acquire(cancelledCtx); err == nil {
		return release, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return s.gate.Acquire(ctx)
}

var cancelledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func isTemporaryAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED)
}

// Metrics returns a snapshot of the server's counters and gauges, with the
// limiter and cache statistics. Label, ElapsedSecs and
// ProcessRSSBytes are filled in: ElapsedSecs from the first Serve, RSS and its
// split by kind from /proc/self/status, the host's TCP counters (host_tcp_*)
// as differences since the server was set up, from /proc/net.
func (s *Server) Metrics() Snapshot {
	snap := Snapshot{MetricsLine: s.m.line()}
	snap.Label = "running"
	hostTCP := false
	if s.init() == nil {
		hostTCP = setHostTCP(&snap.MetricsLine, s.kernel0, machine.ReadTCPCounters())
		snap.Sources = s.srcs.line()
		snap.ElapsedSecs = time.Since(s.epoch).Seconds()
		snap.HandshakeLimiter = s.hs.Stats()
		snap.PublicReadLimiter = s.pr.Stats()
		snap.SnapshotCache = s.cache.Stats()
	}
	if rss, ok := machine.RSSSplit(); ok {
		snap.ProcessRSSBytes = &rss.Total
		snap.ProcessRSSAnonBytes, snap.ProcessRSSFileBytes, snap.ProcessRSSShmemBytes = rss.Anon, rss.File, rss.Shmem
	} else {
		// Off Linux: process_rss_bytes null, the split left off the line.
		snap.Absent = append(snap.Absent, linkkeys.RSSSplitFields[:]...)
	}
	if !hostTCP {
		// Off Linux or /proc/net unreadable: the host counters left off the line.
		snap.Absent = append(snap.Absent, linkkeys.HostTCPFields[:]...)
	}
	return snap
}

// setHostTCP fills m's host_tcp_* fields with the counters' growth from
// before to now (a counter that went back counts 0) and reports whether both
// readings held them.
func setHostTCP(m *linkkeys.MetricsLine, before, now machine.Kernel) bool {
	if !before.TCPCountersRead() || !now.TCPCountersRead() {
		return false
	}
	d := machine.Delta(before, now, 0)
	m.HostTCPListenOverflows = uint64(d.ListenOverflows)
	m.HostTCPListenDrops = uint64(d.ListenDrops)
	m.HostTCPRetransSegs = uint64(d.RetransSegs)
	m.HostTCPDSACKRecv = uint64(d.DSACKRecv)
	m.HostTCPSyncookiesSent = uint64(d.SyncookiesSent)
	return true
}

// InvalidateSnapshots drops the cached get-domain-keys and get-revocations
// responses. Writes through a ChangeNotifier key source do this by
// themselves; call it after writes the server cannot see (another process
// or handle), or they show within DOMAIN_KEY_SNAPSHOT_TTL_SECONDS.
func (s *Server) InvalidateSnapshots() {
	if s.init() == nil {
		s.cache.InvalidateAll()
	}
}

// Shutdown stops accepting, closes parked connections at once, lets active
// connections finish the frame they are on (their waits for a next frame are
// interrupted) and waits until every connection is closed or ctx ends; then
// it returns ctx's error and leaves the rest to Close. Handshakes in progress
// finish (bounded by the handshake timeout) and are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.init(); err != nil {
		return err
	}
	s.beginClose()
	now := time.Now()
	s.table.each(func(c *conn) {
		if c.state.CompareAndSwap(stateParked, stateClosed) {
			c.closeParked(closeShutdown)
			return
		}
		if c.state.Load() == stateHandshaking {
			_ = c.nc.SetDeadline(now) // cut the handshake short
			return
		}
		_ = c.nc.SetReadDeadline(now) // interrupt a wait for the next frame
	})
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	wait := time.Millisecond
	for s.m.open.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			// Back off like net/http's Shutdown: there is no signal for
			// "last connection closed" that would not cost every close.
			if wait < 50*time.Millisecond {
				wait *= 2
				t.Reset(wait)
			}
		}
	}
	if s.poller != nil {
		s.poller.kick()
		<-s.poller.done
	}
	return nil
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	if err := s.init(); err != nil {
		return err
	}
	s.beginClose()
	s.table.each(func(c *conn) {
		if c.state.CompareAndSwap(stateParked, stateClosed) {
			c.closeParked(closeShutdown)
			return
		}
		_ = c.nc.Close() // the serving goroutine notices and cleans up
	})
	if s.poller != nil {
		s.poller.kick() // it exits once the last connection is gone
	}
	return nil
}

func (s *Server) beginClose() {
	s.closing.Store(true)
	s.mu.Lock()
	if !s.closed {
		close(s.quit)
	}
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	s.mu.Unlock()
}
