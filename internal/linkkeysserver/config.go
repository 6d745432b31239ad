package linkkeysserver

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/envvar"
	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Defaults of the TCP_* variables (docs/protocol-linkkeys.md, Environment
// variables) and of the other Config fields. A zero Config field means its default.
const (
	DefaultDomain               = "localhost"
	DefaultPort                 = 4987
	DefaultMaxConnections       = 200000
	DefaultHandshakeTimeout     = 5 * time.Second
	DefaultHandshakeConcurrency = 512
	DefaultIdleTimeout          = 1800 * time.Second
	DefaultIOTimeout            = 60 * time.Second
	DefaultMaxInflightFrames    = 8
	DefaultWriteQueueBound      = 8
	DefaultListenBacklog        = 1024
	DefaultSnapshotTTL          = 60 * time.Second
	// DefaultMaxInflightFrameBytes bounds the frame bodies being read,
	// server-wide: 64 frames of the 1 MiB maximum. With Go's collector
	// letting the heap grow to about twice the live data, frame memory stays
	// well under 256 MiB however many connections announce large frames.
	DefaultMaxInflightFrameBytes = 64 << 20
	// DefaultMinFrameBodyRate and DefaultFrameBodyGrace: an incomplete frame
	// body must bring at least 4 KiB/s, judged over 5-second windows from
	// its length prefix.
	DefaultMinFrameBodyRate = 4096
	DefaultFrameBodyGrace   = 5 * time.Second
	// DefaultParkAfter is how long an established connection may sit with
	// nothing to read before its goroutine exits and the connection is
	// parked in the server's epoll set (see the package documentation).
	DefaultParkAfter = time.Second
)

// Config is the server's tunable configuration. The zero value of every field
// means the documented default, so Config{} is the upstream default profile.
type Config struct {
	// Domain is the "domain" field of get-domain-keys ($DOMAIN_NAME);
	// "" means "localhost". The certificate's name is the caller's business
	// (Server.TLSConfig).
	Domain string

	// Port is TCP_PORT (1..65535) when set; 0 means unset. The server itself
	// listens wherever its listener is bound; the server command uses Port
	// only when no --listen address is given.
	Port uint16

	// MaxConnections (TCP_MAX_CONNECTIONS, default 200000) caps the sockets
	// open at once, from accept to close, handshaking or established. It is
	// checked first, right after accept.
	MaxConnections uint64

	// HandshakeTimeout (TCP_HANDSHAKE_TIMEOUT_SECONDS, default 5 s) bounds
	// the wait for a handshake slot plus the TLS handshake.
	HandshakeTimeout time.Duration

	// HandshakeConcurrency (TCP_HANDSHAKE_CONCURRENCY, default 512) is the
	// number of TLS handshakes that may run at once.
	HandshakeConcurrency int

	// IdleTimeout (TCP_IDLE_TIMEOUT_SECONDS, default 1800 s) bounds the wait
	// for the whole 4-byte prefix of the next frame.
	IdleTimeout time.Duration

	// IOTimeout (TCP_IO_TIMEOUT_SECONDS, default 60 s) bounds each frame-body
	// read and each response write.
	IOTimeout time.Duration

	// MaxInflightFrames (TCP_MAX_INFLIGHT_FRAMES, default 8) bounds the
	// frames of one connection that have been read but whose responses are
	// not yet written to the socket.
	MaxInflightFrames int

	// WriteQueueBound (TCP_WRITE_QUEUE_BOUND, default 8) bounds the encoded
	// responses one connection holds before they must be written.
	WriteQueueBound int

	// MaxInflightFrameBytes (TCP_MAX_INFLIGHT_FRAME_BYTES, default 64 MiB,
	// at least 1 MiB) bounds frame_buffer_bytes: the bytes of frame bodies
	// announced by a length prefix and still being read, over all
	// connections. A frame whose body has not fully arrived with its prefix
	// reserves its length first; when that would pass the bound, the
	// connection is closed without a response (closed_frame_budget): the
	// newest frame is shed, the frames already being read are not. A body
	// that arrives whole with its prefix (every ordinary request) is
	// dispatched from the read buffer and reserves nothing, so honest
	// clients keep being served while the budget is full.
	MaxInflightFrameBytes int64

	// MinFrameBodyRate (TCP_MIN_FRAME_BODY_BYTES_PER_SECOND, default 4096)
	// and FrameBodyGrace (TCP_FRAME_BODY_GRACE_SECONDS, default 5 s): an
	// incomplete frame body must bring at least MinFrameBodyRate x
	// FrameBodyGrace bytes (or the rest of the body) in each FrameBodyGrace
	// window from its prefix, or the connection is closed
	// (closed_slow_frame_body). So a frame stalled one byte short of its end
	// holds its share of the budget for at most two windows, not for the
	// whole TCP_IO_TIMEOUT_SECONDS.
	MinFrameBodyRate uint64
	FrameBodyGrace   time.Duration

	// ListenBacklog (TCP_LISTEN_BACKLOG, default 1024) is passed to
	// listen(2) by Listen; the kernel clamps it to net.core.somaxconn.
	ListenBacklog int

	// Handshake is the per-connection admission limiter (TCP_HANDSHAKE_*).
	// Zero fields take admit.HandshakeDefaults values.
	Handshake admit.LimiterConfig

	// PublicRead is the per-request limiter of the DomainKeys ops
	// (PUBLIC_READ_*). Zero fields take admit.PublicReadDefaults values.
	PublicRead admit.LimiterConfig

	// SnapshotTTL (DOMAIN_KEY_SNAPSHOT_TTL_SECONDS, default 60 s) is how long
	// an encoded get-domain-keys or get-revocations response is served from
	// the snapshot cache before the store is read again.
	SnapshotTTL time.Duration

	// SourcePrefixes (TCP_SOURCE_PREFIXES, none by default) are named
	// source-address ranges the server keeps a copy of its accounting for:
	// the connections whose peer address falls in a range are counted under
	// its name too (linkkeys.SourceCounters, on the METRICS line as
	// source_<name>_<counter>, on /metrics with a prefix label). At most
	// MaxSourcePrefixes, names unique, ranges disjoint (CheckSourcePrefixes).
	// They change no decision of the server.
	SourcePrefixes []SourcePrefix

	// ParkAfter (default DefaultParkAfter) is how long an established
	// connection may have nothing to read before it is parked: its goroutine
	// and buffers are released and the socket waits in the server's epoll
	// set. A negative value never parks (one goroutine per connection).
	ParkAfter time.Duration
}

// WithDefaults returns cfg with every zero field replaced by its default.
func (cfg Config) WithDefaults() Config {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HandshakeConcurrency == 0 {
		cfg.HandshakeConcurrency = DefaultHandshakeConcurrency
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = DefaultIOTimeout
	}
	if cfg.MaxInflightFrames == 0 {
		cfg.MaxInflightFrames = DefaultMaxInflightFrames
	}
	if cfg.WriteQueueBound == 0 {
		cfg.WriteQueueBound = DefaultWriteQueueBound
	}
	if cfg.ListenBacklog == 0 {
		cfg.ListenBacklog = DefaultListenBacklog
	}
	if cfg.MaxInflightFrameBytes == 0 {
		cfg.MaxInflightFrameBytes = DefaultMaxInflightFrameBytes
	}
	if cfg.MinFrameBodyRate == 0 {
		cfg.MinFrameBodyRate = DefaultMinFrameBodyRate
	}
	if cfg.FrameBodyGrace == 0 {
		cfg.FrameBodyGrace = DefaultFrameBodyGrace
	}
	if cfg.SnapshotTTL == 0 {
		cfg.SnapshotTTL = DefaultSnapshotTTL
	}
	if cfg.ParkAfter == 0 {
		cfg.ParkAfter = DefaultParkAfter
	}
	cfg.Handshake = cfg.Handshake.WithDefaults(admit.HandshakeDefaults())
	cfg.PublicRead = cfg.PublicRead.WithDefaults(admit.PublicReadDefaults())
	return cfg
}

// Validate reports every field no server can run with, joined. Zero values
// are valid (they mean the defaults).
func (cfg Config) Validate() error {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("linkkeysserver: Config.%s is %v: must be positive (0 means the default)", name, d))
		}
	}
	neg("HandshakeTimeout", cfg.HandshakeTimeout)
	neg("IdleTimeout", cfg.IdleTimeout)
	neg("IOTimeout", cfg.IOTimeout)
	neg("SnapshotTTL", cfg.SnapshotTTL)
	neg("FrameBodyGrace", cfg.FrameBodyGrace)
	if b := cfg.MaxInflightFrameBytes; b != 0 && b < linkkeys.MaxFrameSize {
		errs = append(errs, fmt.Errorf("linkkeysserver: Config.MaxInflightFrameBytes is %d: must be at least %d (one frame of the maximum size; 0 means the default)", b, linkkeys.MaxFrameSize))
	}
	count := func(name string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("linkkeysserver: Config.%s is %d: must be at least 1 (0 means the default)", name, v))
		}
	}
	count("HandshakeConcurrency", cfg.HandshakeConcurrency)
	count("MaxInflightFrames", cfg.MaxInflightFrames)
	count("WriteQueueBound", cfg.WriteQueueBound)
	count("ListenBacklog", cfg.ListenBacklog)
	if err := cfg.Handshake.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("linkkeysserver: Config.Handshake: %w", err))
	}
	if err := cfg.PublicRead.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("linkkeysserver: Config.PublicRead: %w", err))
	}
	if problems := CheckSourcePrefixes(cfg.SourcePrefixes); len(problems) > 0 {
		errs = append(errs, errSourcePrefixes(problems))
	}
	return errors.Join(errs...)
}

// EnvVars lists every variable ConfigFromEnv reads, in the order of the
// tables in docs/protocol-linkkeys.md.
var EnvVars = []string{
	"TCP_PORT", "TCP_MAX_CONNECTIONS", "TCP_HANDSHAKE_TIMEOUT_SECONDS", "TCP_HANDSHAKE_CONCURRENCY",
	"TCP_IDLE_TIMEOUT_SECONDS", "TCP_IO_TIMEOUT_SECONDS", "TCP_MAX_INFLIGHT_FRAMES", "TCP_WRITE_QUEUE_BOUND",
	"TCP_LISTEN_BACKLOG", "TCP_MAX_INFLIGHT_FRAME_BYTES", "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND",
	"TCP_FRAME_BODY_GRACE_SECONDS",
	"TCP_HANDSHAKE_RATE_PER_MINUTE", "TCP_HANDSHAKE_BURST", "TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND",
	"TCP_HANDSHAKE_GLOBAL_BURST", "TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND", "TCP_HANDSHAKE_OVERFLOW_BURST",
	"TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD", "TCP_HANDSHAKE_WINDOW_SECONDS", "TCP_HANDSHAKE_IPV6_PREFIX",
	"PUBLIC_READ_RATE_PER_MINUTE", "PUBLIC_READ_BURST", "PUBLIC_READ_GLOBAL_RATE_PER_SECOND",
	"PUBLIC_READ_GLOBAL_BURST", "PUBLIC_READ_OVERFLOW_RATE_PER_SECOND", "PUBLIC_READ_OVERFLOW_BURST",
	"PUBLIC_READ_DISTINCT_SOURCE_THRESHOLD", "PUBLIC_READ_WINDOW_SECONDS", "PUBLIC_READ_IPV6_PREFIX",
	"PUBLIC_READ_TRUSTED_PROXIES",
	"DOMAIN_KEY_SNAPSHOT_TTL_SECONDS",
	SourcePrefixesVar,
}

// UnsupportedEnvVars are upstream variables this server has nothing to apply
// to; ConfigFromEnv refuses to start when one is set, rather than accept it
// silently. The TCP_MTLS_* ones configure the DNS pin cache that verifies
// client certificates (this server asks for none, like upstream's load-test
// server); the PUBKEY_CACHE_* ones size the application-key response cache
// (this server serves no ApplicationKeys ops).
var UnsupportedEnvVars = []string{
	"TCP_MTLS_DNS_SYNC_FALLBACK_CONCURRENCY", "TCP_MTLS_DNS_PIN_POSITIVE_TTL_SECONDS",
	"TCP_MTLS_DNS_PIN_NEGATIVE_TTL_SECONDS", "TCP_MTLS_DNS_PIN_CACHE_MAX_ENTRIES",
	"TCP_MTLS_DNS_PIN_MAX_CONCURRENT_REFRESHES",
	"PUBKEY_CACHE_MAX_ENTRIES", "PUBKEY_CACHE_MAX_BYTES", "PUBKEY_CACHE_TTL_SECONDS",
	"PUBKEY_CACHE_NEGATIVE_TTL_SECONDS",
}

func unsupportedEnv(getenv func(string) string) []error {
	var errs []error
	for _, name := range UnsupportedEnvVars {
		v := getenv(name)
		if strings.TrimSpace(v) == "" {
			continue
		}
		why := "it asks for no client certificate, so it has no mTLS DNS pin cache"
		if strings.HasPrefix(name, "PUBKEY_CACHE_") {
			why = "it serves no ApplicationKeys operation, so it has no application-key cache"
		}
		errs = append(errs, &envvar.Error{Name: name, Value: v,
			Accepted: "not supported by the reference server (" + why + "); unset it"})
	}
	return errs
}

// ConfigFromEnv reads the server configuration from the environment through
// getenv (os.Getenv in production): every upstream TCP_* variable except the
// mTLS DNS-pin ones, this server's TCP_MAX_INFLIGHT_FRAME_BYTES,
// TCP_MIN_FRAME_BODY_BYTES_PER_SECOND, TCP_FRAME_BODY_GRACE_SECONDS and
// TCP_SOURCE_PREFIXES (ParseSourcePrefixes), every PUBLIC_READ_* variable and
// DOMAIN_KEY_SNAPSHOT_TTL_SECONDS (EnvVars; the
// upstream ones: docs/protocol-linkkeys.md, Environment variables; this
// server's: internal/linkkeysserver/README.md). A set UnsupportedEnvVars
// variable is an error.
//
// Rules: integers and seconds are whole numbers greater than 0 (TCP_PORT
// 1..65535, the IPv6 prefixes 1..128, counts that size memory at most
// 2^31-1); rates are finite numbers greater than 0; a blank value counts as
// unset. Unlike upstream, which panics lazily on a bad PUBLIC_READ_* value
// and silently falls back on a bad DOMAIN_KEY_SNAPSHOT_TTL_SECONDS, every bad
// value is an error here, and all of them are reported at once (errors.Join),
// each naming the variable, the value and what is accepted. Domain is not read
// (the server command takes --domain).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	port, err := envUintMax(getenv, "TCP_PORT", 0, math.MaxUint16)
	note(err)
	cfg.Port = uint16(port)
	cfg.MaxConnections, err = envvar.Uint(getenv, "TCP_MAX_CONNECTIONS", DefaultMaxConnections)
	note(err)
	cfg.HandshakeTimeout, err = envSecs(getenv, "TCP_HANDSHAKE_TIMEOUT_SECONDS", DefaultHandshakeTimeout)
	note(err)
	cfg.HandshakeConcurrency, err = envInt(getenv, "TCP_HANDSHAKE_CONCURRENCY", DefaultHandshakeConcurrency)
	note(err)
	cfg.IdleTimeout, err = envSecs(getenv, "TCP_IDLE_TIMEOUT_SECONDS", DefaultIdleTimeout)
	note(err)
	cfg.IOTimeout, err = envSecs(getenv, "TCP_IO_TIMEOUT_SECONDS", DefaultIOTimeout)
	note(err)
	cfg.MaxInflightFrames, err = envInt(getenv, "TCP_MAX_INFLIGHT_FRAMES", DefaultMaxInflightFrames)
	note(err)
	cfg.WriteQueueBound, err = envInt(getenv, "TCP_WRITE_QUEUE_BOUND", DefaultWriteQueueBound)
	note(err)
	// The upstream clamps the backlog to i32::MAX rather than refusing it.
	backlog, err := envvar.Uint(getenv, "TCP_LISTEN_BACKLOG", DefaultListenBacklog)
	note(err)
	cfg.ListenBacklog = int(min(backlog, math.MaxInt32))
	cfg.MaxInflightFrameBytes, err = envFrameBudget(getenv)
	note(err)
	cfg.MinFrameBodyRate, err = envUintMax(getenv, "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND", DefaultMinFrameBodyRate, linkkeys.MaxFrameSize)
	note(err)
	cfg.FrameBodyGrace, err = envSecs(getenv, "TCP_FRAME_BODY_GRACE_SECONDS", DefaultFrameBodyGrace)
	note(err)
	cfg.Handshake, err = admit.HandshakeConfigFromEnv(getenv)
	note(err)
	cfg.PublicRead, err = admit.PublicReadConfigFromEnv(getenv)
	note(err)
	cfg.SnapshotTTL, err = envSecs(getenv, "DOMAIN_KEY_SNAPSHOT_TTL_SECONDS", DefaultSnapshotTTL)
	note(err)
	var srcErrs []error
	cfg.SourcePrefixes, srcErrs = envSourcePrefixes(getenv)
	errs = append(errs, srcErrs...)
	errs = append(errs, unsupportedEnv(getenv)...)
	cfg = cfg.WithDefaults()
	if len(errs) > 0 {
		return cfg, fmt.Errorf("linkkeysserver: bad environment; fix or unset these variables:\n%w", errors.Join(errs...))
	}
	return cfg, nil
}

func envUintMax(getenv func(string) string, name string, def, max uint64) (uint64, error) {
	v, err := envvar.Uint(getenv, name, def)
	if err != nil || v > max {
		return def, &envvar.Error{Name: name, Value: getenv(name), Accepted: fmt.Sprintf("must be a whole number from 1 to %d", max)}
	}
	return v, nil
}

// maxFrameBudget caps TCP_MAX_INFLIGHT_FRAME_BYTES at 1 TiB, far past any
// memory a server has, so sums of it never overflow.
const maxFrameBudget = 1 << 40

func envFrameBudget(getenv func(string) string) (int64, error) {
	const name = "TCP_MAX_INFLIGHT_FRAME_BYTES"
	v, err := envvar.Uint(getenv, name, DefaultMaxInflightFrameBytes)
	if err != nil || v < linkkeys.MaxFrameSize || v > maxFrameBudget {
		return DefaultMaxInflightFrameBytes, &envvar.Error{Name: name, Value: getenv(name),
			Accepted: fmt.Sprintf("must be a whole number of bytes from %d (one frame of the maximum size) to %d", linkkeys.MaxFrameSize, uint64(maxFrameBudget))}
	}
	return int64(v), nil
}

func envInt(getenv func(string) string, name string, def int) (int, error) {
	v, err := envUintMax(getenv, name, uint64(def), math.MaxInt32)
	return int(v), err
}

func envSecs(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	const maxSecs = uint64(math.MaxInt64 / int64(time.Second))
	v, err := envUintMax(getenv, name, uint64(def/time.Second), maxSecs)
	if err != nil {
		e := err.(*envvar.Error)
		e.Accepted = fmt.Sprintf("must be a whole number of seconds from 1 to %d", maxSecs)
		return def, e
	}
	return time.Duration(v) * time.Second, nil
}

// ConfigLine returns the server command's `config:` line for cfg
// (docs/protocol-linkkeys.md, The seed's commands, server), without a
// newline. Durations are rendered like Rust's Debug ("5s", "1800s",
// "200ms") and capacities like Rust's f64 Display ("20"). With source
// prefixes configured, this server appends
// " source_prefixes=<TCP_SOURCE_PREFIXES as FormatSourcePrefixes spells it>";
// without, the line is the seed's.
func ConfigLine(cfg Config) string {
	cfg = cfg.WithDefaults()
	var b strings.Builder
	b.WriteString("config: max_connections=")
	b.WriteString(strconv.FormatUint(cfg.MaxConnections, 10))
	b.WriteString(" handshake_timeout=")
	b.WriteString(RustDuration(cfg.HandshakeTimeout))
	b.WriteString(" handshake_concurrency=")
	b.WriteString(strconv.Itoa(cfg.HandshakeConcurrency))
	b.WriteString(" idle_timeout=")
	b.WriteString(RustDuration(cfg.IdleTimeout))
	b.WriteString(" io_timeout=")
	b.WriteString(RustDuration(cfg.IOTimeout))
	b.WriteString(" max_inflight_frames=")
	b.WriteString(strconv.Itoa(cfg.MaxInflightFrames))
	b.WriteString(" write_queue_bound=")
	b.WriteString(strconv.Itoa(cfg.WriteQueueBound))
	b.WriteString(" handshake_per_source_capacity=")
	b.WriteString(strconv.FormatFloat(cfg.Handshake.Burst, 'f', -1, 64))
	b.WriteString(" handshake_global_capacity=")
	b.WriteString(strconv.FormatFloat(cfg.Handshake.GlobalBurst, 'f', -1, 64))
	b.WriteString(" handshake_distinct_source_threshold=")
	b.WriteString(strconv.FormatUint(cfg.Handshake.DistinctSourceThreshold, 10))
	if len(cfg.SourcePrefixes) > 0 {
		b.WriteString(" source_prefixes=")
		b.WriteString(FormatSourcePrefixes(cfg.SourcePrefixes))
	}
	return b.String()
}

// RustDuration renders d the way Rust's Debug formats a std Duration: whole
// and fractional seconds with an "s" suffix from one second up ("5s",
// "1.5s"), else milliseconds, microseconds or nanoseconds ("200ms", "1.5µs",
// "7ns"), trailing fractional zeros dropped.
func RustDuration(d time.Duration) string {
	if d < 0 {
		return "-" + RustDuration(-d)
	}
	var unit string
	var div int64
	switch {
	case d >= time.Second:
		unit, div = "s", int64(time.Second)
	case d >= time.Millisecond:
		unit, div = "ms", int64(time.Millisecond)
	case d >= time.Microsecond:
		unit, div = "µs", int64(time.Microsecond)
	default:
		return strconv.FormatInt(int64(d), 10) + "ns"
	}
	whole, frac := int64(d)/div, int64(d)%div
	s := strconv.FormatInt(whole, 10)
	if frac != 0 {
		digits := len(strconv.FormatInt(div, 10)) - 1
		f := strconv.FormatInt(frac, 10)
		f = strings.Repeat("0", digits-len(f)) + f
		s += "." + strings.TrimRight(f, "0")
	}
	return s + unit
}
