package keycastserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/envvar"
	"github.com/loadproof/loadproof/internal/keycast"
)

// Defaults of Config's zero values.
const (
	DefaultAddr             = "127.0.0.1:3000"
	DefaultDataDir          = "./keycast-data"
	DefaultHandlerCacheSize = 1_000_000
	DefaultHandlerIdle      = time.Hour
	DefaultQueueTimeout     = 250 * time.Millisecond
	DefaultQueuePerSlot     = 64
	DefaultHandlerTimeout   = 8 * time.Second
	DefaultBodyLimit        = 64 << 10
	DefaultHeaderTimeout    = 10 * time.Second
	DefaultBodyTimeout      = 30 * time.Second
	DefaultMaxTenants       = 100
	// DefaultBcryptCost is the cost of Keycast's bcrypt DEFAULT_COST (the Rust crate's 12).
	DefaultBcryptCost = 12
	// SQLiteFileName is the database file inside the data directory.
	SQLiteFileName = "keycast.sqlite3"
	// ServerKeyFileName holds the generated server key (hex) when SERVER_NSEC is unset.
	ServerKeyFileName = "server.nsec"
	// MasterKeyFileName is the default master key file inside the data directory.
	MasterKeyFileName = "master.key"
)

// Config configures a Server. Every zero value means the documented default, so Config{} is a
// working local server storing everything under ./keycast-data.
type Config struct {
	// Addr is where the CLI listens (Serve takes a listener, so the Server itself ignores it).
	// Zero: DefaultAddr, or 127.0.0.1:$PORT when ConfigFromEnv saw PORT.
	Addr string
	// DataDir holds the SQLite database, the generated server key and the master key file.
	// Zero: DefaultDataDir. It is created (0700) when absent.
	DataDir string
	// DatabaseURL (env DATABASE_URL): postgres:// or postgresql:// for PostgreSQL, else an
	// SQLite path. Zero: <DataDir>/keycast.sqlite3.
	DatabaseURL string
	// ServerNsec (env SERVER_NSEC): the key that signs access tokens, 64 hex or nsec1…. Zero:
	// read from <DataDir>/server.nsec, which is generated (0600) on first start, so tokens
	// survive restarts.
	ServerNsec string
	// MasterKeyPath (env MASTER_KEY_PATH): the base64 AES-256-GCM key sealing user secret keys.
	// Zero: <DataDir>/master.key. Created with mode 0600 when absent.
	MasterKeyPath string
	// AllowedOrigins (env ALLOWED_ORIGINS, comma-separated) may call register and login with
	// credentials from a browser; any http://localhost:* origin is always allowed.
	AllowedOrigins []string
	// HandlerCacheSize (env HANDLER_CACHE_SIZE): most RPC handlers cached. Zero: 1,000,000.
	HandlerCacheSize int
	// HandlerIdle: a cached handler unused this long is dropped. Zero: 1 h.
	HandlerIdle time.Duration
	// TokenLifetime (env TOKEN_EXPIRY_SECONDS): lifetime of access and session tokens.
	// Zero: 24 h.
	TokenLifetime time.Duration
	// BunkerRelays (env BUNKER_RELAYS, comma-separated) are the relays in bunker_url.
	// Zero: keycast.DefaultBunkerRelays.
	BunkerRelays []string
	// CPUSlots (env KEYCAST_CPU_SLOTS): how much CPU-heavy work (signing, encryption, bcrypt,
	// token verification on a cache miss) runs at once. Zero: GOMAXPROCS.
	CPUSlots int
	// CPUQueue (env KEYCAST_CPU_QUEUE): how many requests may wait for a CPU slot; more are
	// shed at once with 503 admission_rejected. Zero: 64 per slot; negative: no waiting at all
	// (env value 0).
	CPUQueue int
	// QueueTimeout (env KEYCAST_QUEUE_TIMEOUT_MS): the longest wait for a CPU slot before the
	// request is shed with 503 admission_rejected. Zero: 250 ms.
	QueueTimeout time.Duration
	// RPCRatePerSecond (env KEYCAST_RPC_RATE_PER_SECOND) limits /api/nostr calls per
	// authorization; over it the answer is 429 rate_limited. Zero: off (as upstream).
	RPCRatePerSecond float64
	// RPCBurst (env KEYCAST_RPC_BURST) is the per-authorization bucket size. Zero:
	// max(1, RPCRatePerSecond).
	RPCBurst float64
	// HandlerTimeout bounds one /api/nostr request; past it the answer is 504. Zero: 8 s.
	HandlerTimeout time.Duration
	// HeaderTimeout (env KEYCAST_HEADER_TIMEOUT_MS): a request head must arrive whole within this
	// time of its first byte, on the fast path and on net/http alike; a slower one closes the
	// connection. Zero: 10 s.
	HeaderTimeout time.Duration
	// BodyTimeout (env KEYCAST_BODY_TIMEOUT_MS): a request body must arrive within this time
	// after its head; a slower one ends the request (400) and the connection. On net/http it is
	// applied with the head's as one limit (ReadTimeout = HeaderTimeout + BodyTimeout from the
	// request's first byte). Zero: 30 s.
	BodyTimeout time.Duration
	// MaxConnections (env KEYCAST_MAX_CONNECTIONS) caps open client connections, so stalled
	// clients cannot take every file descriptor. At the cap a new connection makes room by
	// closing the connection that has made no progress the longest (stalled in its request head
	// or body, or idle between requests), so stalled clients cannot keep normal ones out either;
	// when every connection is being served the new one is answered at once with the shedding
	// contract (503 admission_rejected) and closed. Zero: the smaller of
	// DefaultMaxConnections and half the open-file limit (RLIMIT_NOFILE), leaving the other half
	// for the database, shedding and the process's own files.
	MaxConnections int
	// MaxConnectionsPerSource (env KEYCAST_MAX_CONNECTIONS_PER_SOURCE) caps the open connections
	// from one source address (an IPv6 source by its /64); past it a new connection from that
	// source is shed as past MaxConnections. Zero: no per-source limit. It is off by default
	// because behind a load balancer or proxy every client has the balancer's address, and a
	// per-source limit would then cap the whole service; set it only when clients connect
	// directly.
	MaxConnectionsPerSource int
	// BodyLimit (env HTTP_BODY_LIMIT) caps request bodies in bytes; larger ones get 413.
	// Zero: 64 KiB.
	BodyLimit int64
	// BcryptCost (env KEYCAST_BCRYPT_COST, 4..31) for new password hashes. Zero: 12, the cost
	// of Keycast's bcrypt DEFAULT_COST. Tests use 4.
	BcryptCost int
	// MaxTenants (env KEYCAST_MAX_TENANTS) caps the tenants the server creates from Host
	// headers: once the tenants table holds this many rows ("default" included), a request
	// naming an unknown Host is refused with 400 instead of adding one. Zero: 100; negative:
	// create none (env value 0), only tenants already in the database are served.
	MaxTenants int
	// NoFastPath (env KEYCAST_FAST_PATH=off) serves every request through net/http instead of
	// answering POST /api/nostr with the HTTP/1.1 fast path (see fastpath.go).
	NoFastPath bool
	// Now is the clock; nil means time.Now. Tests move it to expire tokens and codes.
	Now func() time.Time
}

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = filepath.Join(c.DataDir, SQLiteFileName)
	}
	if c.MasterKeyPath == "" {
		c.MasterKeyPath = filepath.Join(c.DataDir, MasterKeyFileName)
	}
	if c.HandlerCacheSize <= 0 {
		c.HandlerCacheSize = DefaultHandlerCacheSize
	}
	if c.HandlerIdle <= 0 {
		c.HandlerIdle = DefaultHandlerIdle
	}
	if c.TokenLifetime <= 0 {
		c.TokenLifetime = keycast.DefaultTokenLifetime
	}
	if len(c.BunkerRelays) == 0 {
		c.BunkerRelays = splitList(keycast.DefaultBunkerRelays)
	}
	if c.CPUSlots <= 0 {
		c.CPUSlots = runtime.GOMAXPROCS(0)
	}
	switch {
	case c.CPUQueue == 0:
		c.CPUQueue = DefaultQueuePerSlot * c.CPUSlots
	case c.CPUQueue < 0:
		c.CPUQueue = 0
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.RPCRatePerSecond > 0 && c.RPCBurst <= 0 {
		c.RPCBurst = max(1, c.RPCRatePerSecond)
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = defaultMaxConnections()
	}
	if c.MaxConnectionsPerSource < 0 {
		c.MaxConnectionsPerSource = 0
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	switch {
	case c.MaxTenants == 0:
		c.MaxTenants = DefaultMaxTenants
	case c.MaxTenants < 0:
		c.MaxTenants = 0
	}
	if c.BcryptCost == 0 {
		c.BcryptCost = DefaultBcryptCost
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ConfigFromEnv reads the server's environment variables (see the package documentation) into
// a Config. Unset or blank variables keep their zero value (the default). Every problem is
// reported, joined, each naming the variable, its value and what is accepted.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	var errs []error
	bad := func(name, value, accepted string) {
		errs = append(errs, &envvar.Error{Name: name, Value: value, Accepted: accepted})
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }

	if v := get("PORT"); v != "" {
		if p, err := strconv.ParseUint(v, 10, 16); err != nil || p == 0 {
			bad("PORT", getenv("PORT"), "must be a port number from 1 to 65535")
		} else {
			c.Addr = net.JoinHostPort("127.0.0.1", strconv.FormatUint(p, 10))
		}
	}
	c.DatabaseURL = get("DATABASE_URL")
	if keycastDialectIsPostgres(c.DatabaseURL) {
		if u, err := url.Parse(c.DatabaseURL); err != nil || u.Host == "" {
			bad("DATABASE_URL", redact(c.DatabaseURL), "must be a postgres://user@host:port/db URL or an SQLite file path")
		}
	}
	if v := get("SERVER_NSEC"); v != "" {
		if _, err := keycast.ParseSecretKey(v); err != nil {
			bad("SERVER_NSEC", "(hidden)", "must be 64 hex characters or an nsec1… bech32 secret key")
		}
		c.ServerNsec = v
	}
	c.MasterKeyPath = get("MASTER_KEY_PATH")
	if v := get("ALLOWED_ORIGINS"); v != "" {
		c.AllowedOrigins = splitList(v)
		for _, o := range c.AllowedOrigins {
			if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
				bad("ALLOWED_ORIGINS", getenv("ALLOWED_ORIGINS"), "must be a comma-separated list of origins like https://app.example.com")
				break
			}
		}
	}
	if v := get("BUNKER_RELAYS"); v != "" {
		c.BunkerRelays = splitList(v)
		for _, r := range c.BunkerRelays {
			if !strings.HasPrefix(r, "wss://") && !strings.HasPrefix(r, "ws://") {
				bad("BUNKER_RELAYS", getenv("BUNKER_RELAYS"), "must be a comma-separated list of ws:// or wss:// relay URLs")
				break
			}
		}
	}
	uintVar := func(name string, max uint64, dst *int) {
		v, err := envvar.Uint(getenv, name, 0)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if max > 0 && v > max {
			bad(name, getenv(name), fmt.Sprintf("must be a whole number from 1 to %d", max))
			return
		}
		*dst = int(v)
	}
	// rangeVar reads a whole number from lo to hi; ok is false when unset or refused.
	rangeVar := func(name string, lo, hi int64, note string) (int, bool) {
		v := get(name)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 64)
		if err != nil || n < lo || n > hi {
			bad(name, getenv(name), fmt.Sprintf("must be a whole number from %d to %d (%s)", lo, hi, note))
			return 0, false
		}
		return int(n), true
	}
	uintVar("HANDLER_CACHE_SIZE", 1<<31, &c.HandlerCacheSize)
	uintVar("KEYCAST_CPU_SLOTS", 1<<16, &c.CPUSlots)
	if v := get("KEYCAST_CPU_QUEUE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		switch {
		case err != nil || n > 1<<24:
			bad("KEYCAST_CPU_QUEUE", getenv("KEYCAST_CPU_QUEUE"), "must be a whole number from 0 (never wait) to 16777216")
		case n == 0:
			c.CPUQueue = -1
		default:
			c.CPUQueue = int(n)
		}
	}
	var ms int
	uintVar("KEYCAST_QUEUE_TIMEOUT_MS", 600_000, &ms)
	c.QueueTimeout = time.Duration(ms) * time.Millisecond
	var secs int
	uintVar("TOKEN_EXPIRY_SECONDS", 10*365*86400, &secs)
	c.TokenLifetime = time.Duration(secs) * time.Second
	var limit int
	uintVar("HTTP_BODY_LIMIT", 1<<30, &limit)
	c.BodyLimit = int64(limit)
	if v := get("KEYCAST_BCRYPT_COST"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 || n > 31 {
			bad("KEYCAST_BCRYPT_COST", getenv("KEYCAST_BCRYPT_COST"), "must be a whole number from 4 to 31")
		} else {
			c.BcryptCost = n
		}
	}
	if n, ok := rangeVar("KEYCAST_HEADER_TIMEOUT_MS", 100, 600_000, "default 10000"); ok {
		c.HeaderTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok := rangeVar("KEYCAST_BODY_TIMEOUT_MS", 100, 600_000, "default 30000"); ok {
		c.BodyTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok := rangeVar("KEYCAST_MAX_CONNECTIONS", 1, 1_000_000, "default: 10000, or half the open-file limit when that is less"); ok {
		c.MaxConnections = n
	}
	if n, ok := rangeVar("KEYCAST_MAX_CONNECTIONS_PER_SOURCE", 0, 1_000_000,
		"0 = no per-source limit, the default: behind a load balancer every client has the balancer's address"); ok {
		c.MaxConnectionsPerSource = n
	}
	if n, ok := rangeVar("KEYCAST_MAX_TENANTS", 0, 1_000_000, "0 = create none, only serve tenants already in the database; default 100"); ok {
		c.MaxTenants = n
		if n == 0 {
			c.MaxTenants = -1
		}
	}
	switch v := strings.ToLower(get("KEYCAST_FAST_PATH")); v {
	case "", "1", "on", "true", "yes":
	case "0", "off", "false", "no":
		c.NoFastPath = true
	default:
		bad("KEYCAST_FAST_PATH", getenv("KEYCAST_FAST_PATH"), "must be on or off")
	}
	if r, err := envvar.Rate(getenv, "KEYCAST_RPC_RATE_PER_SECOND", 0); err != nil {
		errs = append(errs, err)
	} else {
		c.RPCRatePerSecond = r
	}
	if b, err := envvar.Rate(getenv, "KEYCAST_RPC_BURST", 0); err != nil {
		errs = append(errs, err)
	} else {
		c.RPCBurst = b
		if b > 0 && c.RPCRatePerSecond == 0 {
			bad("KEYCAST_RPC_BURST", getenv("KEYCAST_RPC_BURST"), "needs KEYCAST_RPC_RATE_PER_SECOND set too (rate limiting is off without it)")
		}
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("keycastserver: bad configuration:\n%w", errors.Join(errs...))
	}
	return c, nil
}

func keycastDialectIsPostgres(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// redact hides a password in a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
