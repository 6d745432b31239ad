package keycastserver

import (
	"context"
	"crypto/cipher"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycaststore"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = http.ErrServerClosed

// Server is the Keycast reference server. Create it with New, serve with Serve, stop with
// Shutdown. A Server is used for one lifetime; it is safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store keycaststore.Store

	serverSigner *keycast.Signer
	serverPub    keycast.PublicKey
	master       keycast.MasterKey
	aead         cipher.AEAD

	cache   *handlerCache
	gate    *admit.Gate
	loads   singleflight.Group // coalesces concurrent handler-cache misses per token
	m       *metrics
	tenants *tenantCache

	policies     map[string]*policyEntry // by slug
	policiesByID map[int64]*policyEntry
	policyList   []byte // GET /api/policies body

	bunkerRelayQuery string // "relay=…&relay=…" for bunker_url
	allowedOrigins   map[string]bool

	handler   http.Handler
	mu        sync.Mutex
	httpSrv   *http.Server
	listeners []net.Listener
	handoffs  []*handoffListener
	closed    atomic.Bool
	stop      chan struct{}
	wg        sync.WaitGroup

	fastMu    sync.Mutex
	fastConns map[*fastConn]struct{}
	fastWG    sync.WaitGroup

	open                       atomic.Int64 // client connections accepted and not yet closed
	conns                      *connTable   // the same connections, stalest first (conntable.go)
	shedSlots                  chan struct{}
	shedWG                     sync.WaitGroup
	fdLog, limitLog, acceptLog rateLog
	sourceLog, evictLog        rateLog
}

type policyEntry struct {
	id    int64
	info  keycast.PolicyInfo
	rules []keycast.Permission
}

// New prepares a server: it creates the data directory, loads or creates the server key and
// the master key, opens the database (applying migrations) and loads the policies. logger may
// be nil (logs are discarded).
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("keycastserver: creating data directory %s: %w (set --data-dir to a writable place)", cfg.DataDir, err)
	}
	s := &Server{cfg: cfg, log: logger, stop: make(chan struct{}), fastConns: make(map[*fastConn]struct{}),
		shedSlots: make(chan struct{}, shedLingerSlots), conns: newConnTable(cfg.MaxConnectionsPerSource)}
	if lim, ok := openFileLimit(); ok && uint64(cfg.MaxConnections) > lim {
		logger.Warn("KEYCAST_MAX_CONNECTIONS is above the open-file limit; descriptors run out before the cap sheds",
			"max_connections", cfg.MaxConnections, "open_file_limit", lim)
	}

	sk, created, err := loadServerKey(cfg)
	if err != nil {
		return nil, err
	}
	s.serverSigner = keycast.NewSigner(sk)
	s.serverPub = s.serverSigner.Public()
	if created {
		logger.Info("generated server key", "path", filepath.Join(cfg.DataDir, ServerKeyFileName), "pubkey", s.serverPub.Hex())
	}
	mk, mkCreated, err := keycast.LoadOrCreateMasterKey(cfg.MasterKeyPath)
	if err != nil {
		return nil, fmt.Errorf("keycastserver: MASTER_KEY_PATH: %w", err)
	}
	if mkCreated {
		logger.Info("created master key", "path", cfg.MasterKeyPath)
	}
	s.master = mk
	s.aead = mk.AEAD()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := keycaststore.Open(ctx, cfg.DatabaseURL, keycaststore.Options{})
	if err != nil {
		return nil, fmt.Errorf("keycastserver: DATABASE_URL: %w", err)
	}
	s.store = st
	if err := s.loadPolicies(ctx); err != nil {
		st.Close()
		return nil, err
	}

	s.cache = newHandlerCache(cfg.HandlerCacheSize, cfg.HandlerIdle, 4*cfg.HandlerTimeout)
	s.gate = admit.NewGate(cfg.CPUSlots, cfg.CPUQueue)
	s.m = newMetrics(s.cache.len, s.gate.InUse, s.gate.Waiting, s.gate.Slots, func() int { return int(s.open.Load()) })
	s.tenants = newTenantCache(st, cfg.MaxTenants)

	var q []string
	for _, r := range cfg.BunkerRelays {
		q = append(q, "relay="+queryEscape(r))
	}
	s.bunkerRelayQuery = strings.Join(q, "&")
	s.allowedOrigins = make(map[string]bool)
	for _, o := range cfg.AllowedOrigins {
		s.allowedOrigins[strings.TrimSuffix(o, "/")] = true
	}
	s.handler = s.routes()

	s.wg.Add(1)
	go s.janitor()
	logger.Info("keycast server ready",
		"database", st.Dialect().String(), "server_pubkey", s.serverPub.Hex(),
		"cpu_slots", cfg.CPUSlots, "cpu_queue", cfg.CPUQueue, "queue_timeout", cfg.QueueTimeout,
		"handler_cache_size", cfg.HandlerCacheSize, "rpc_rate_per_second", cfg.RPCRatePerSecond,
		"max_connections", cfg.MaxConnections, "max_connections_per_source", cfg.MaxConnectionsPerSource, "header_timeout", cfg.HeaderTimeout, "body_timeout", cfg.BodyTimeout)
	return s, nil
}

// loadServerKey returns SERVER_NSEC, or the key persisted in the data directory, generating it
// on first start.
func loadServerKey(cfg Config) (keycast.SecretKey, bool, error) {
	if cfg.ServerNsec != "" {
		sk, err := keycast.ParseSecretKey(cfg.ServerNsec)
		if err != nil {
			return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: SERVER_NSEC: %w", err)
		}
		return sk, false, nil
	}
	path := filepath.Join(cfg.DataDir, ServerKeyFileName)
	b, err := os.ReadFile(path)
	if err == nil {
		sk, err := keycast.ParseSecretKey(string(b))
		if err != nil {
			return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: server key file %s: %w (delete it to generate a new key; existing tokens stop working)", path, err)
		}
		return sk, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: reading server key %s: %w", path, err)
	}
	sk, err := keycast.GenerateSecretKey()
	if err != nil {
		return keycast.SecretKey{}, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return loadServerKey(cfg)
		}
		return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: creating server key %s: %w", path, err)
	}
	if _, err := f.WriteString(sk.Hex() + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: writing server key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return keycast.SecretKey{}, false, fmt.Errorf("keycastserver: writing server key %s: %w", path, err)
	}
	return sk, true, nil
}

func (s *Server) loadPolicies(ctx context.Context) error {
	ps, err := s.store.Policies(ctx)
	if err != nil {
		return fmt.Errorf("keycastserver: loading policies: %w", err)
	}
	s.policies = make(map[string]*policyEntry, len(ps))
	s.policiesByID = make(map[int64]*policyEntry, len(ps))
	var list struct {
		Policies []keycast.PolicyInfo `json:"policies"`
	}
	list.Policies = []keycast.PolicyInfo{}
	for _, p := range ps {
		e := &policyEntry{id: p.ID, rules: parseRules(p.Permissions)}
		e.info = keycast.PolicyInfo{Slug: p.Slug, DisplayName: p.DisplayName, Description: p.Description, Permissions: []keycast.PermissionDisplay{}}
		for _, r := range e.rules {
			e.info.Permissions = append(e.info.Permissions, r.Display())
		}
		s.policies[p.Slug] = e
		s.policiesByID[p.ID] = e
		list.Policies = append(list.Policies, e.info)
	}
	s.policyList = mustJSON(list)
	return nil
}

// parseRules turns permissions rows into rules, dropping unknown identifiers and bad configs as
// Keycast does on the RPC path.
func parseRules(rows []keycaststore.Permission) []keycast.Permission {
	var out []keycast.Permission
	for _, r := range rows {
		if p, ok := keycast.ParsePermission(r.Identifier, []byte(r.Config)); ok {
			out = append(out, p)
		}
	}
	return out
}

// janitor drops idle handlers and expired authorization codes in the background.
func (s *Server) janitor() {
	defer s.wg.Done()
	every := min(s.cfg.HandlerIdle/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	codes := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := s.cfg.Now()
		for s.cache.sweep(now.UnixNano(), 10_000) == 10_000 {
		}
		if codes++; codes%10 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := s.store.DeleteExpiredCodes(ctx, now); err != nil {
				s.log.Warn("deleting expired authorization codes failed", "err", err)
			}
			cancel()
		}
	}
}

// Handler returns the server's HTTP handler (for httptest or another http.Server).
func (s *Server) Handler() http.Handler { return s.handler }

// ServerPubkey is the key that signs access tokens.
func (s *Server) ServerPubkey() keycast.PublicKey { return s.serverPub }

// Store is the server's database; callers must not close it.
func (s *Server) Store() keycaststore.Store { return s.store }

// MasterKey is the key sealing user secret keys at rest (the load tool's DB-mode setup seals
// with the same key file).
func (s *Server) MasterKey() keycast.MasterKey { return s.master }

// Config returns the configuration with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Serve answers HTTP/1.1 on ln until Shutdown; it then returns ErrServerClosed (ServeTLS, tls.go,
// does the same over TLS). The hot request
// shape is answered by the fast path (fastpath.go), everything else by net/http; connections are
// accepted, counted and shed past MaxConnections by acceptLoop (accept.go).
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, nil) }

// serve is Serve, and ServeTLS when tlsConf is set (tls.go).
func (s *Server) serve(ln net.Listener, tlsConf *tls.Config) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.httpSrv == nil {
		s.httpSrv = &http.Server{
			Handler:           trackBodies(s.handler),
			ConnContext:       connContext,
			ConnState:         trackConnState,
			ReadHeaderTimeout: s.cfg.HeaderTimeout,
			// The whole request, head and body, from its first byte; the handler's own work is
			// bounded by its timeouts.
			ReadTimeout:    s.cfg.HeaderTimeout + s.cfg.BodyTimeout,
			IdleTimeout:    fastIdleTimeout,
			MaxHeaderBytes: 64 << 10,
			ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		}
	}
	srv := s.httpSrv
	s.listeners = append(s.listeners, ln)
	hand := newHandoffListener(ln.Addr())
	s.handoffs = append(s.handoffs, hand)
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(hand) }()
	serve := func(c net.Conn) { s.serveFast(c, hand) }
	if s.cfg.NoFastPath {
		serve = func(c net.Conn) {
			if !hand.hand(newFramingGuard(c)) {
				c.Close()
			}
		}
	}
	stopHandshakes := func() {}
	if tlsConf != nil {
		serve, stopHandshakes = s.withTLS(tlsConf, serve)
	}
	err := s.acceptLoop(ln, serve)
	stopHandshakes()
	hand.Close()
	if herr := <-errc; err == nil && !errors.Is(herr, http.ErrServerClosed) {
		err = herr
	}
	return err
}

// Shutdown stops accepting connections, closes idle ones, waits for in-flight requests until
// ctx ends (then closes the rest), and closes the database. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	srv := s.httpSrv
	lns := s.listeners
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	// Fast-path connections: idle ones close now; busy ones close after their answer.
	s.fastMu.Lock()
	for fc := range s.fastConns {
		if !fc.active.Load() {
			fc.c.Close()
		}
	}
	s.fastMu.Unlock()
	done := make(chan struct{})
	go func() { s.fastWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.fastMu.Lock()
		for fc := range s.fastConns {
			fc.c.Close()
		}
		s.fastMu.Unlock()
		<-done
		if err == nil {
			err = ctx.Err()
		}
	}
	close(s.stop)
	s.wg.Wait()
	s.shedWG.Wait()
	if cerr := s.store.Close(); err == nil {
		err = cerr
	}
	return err
}
