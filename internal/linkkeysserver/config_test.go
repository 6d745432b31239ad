package linkkeysserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/envvar"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s mismatch\n got %q\nwant %q", name, got, want)
	}
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{}.WithDefaults()
	want.Handshake.TrustedProxies = nil
	cfg.Handshake.TrustedProxies = nil
	cfg.PublicRead.TrustedProxies = nil
	want.PublicRead.TrustedProxies = nil
	if ConfigLine(cfg) != ConfigLine(want) || cfg.IdleTimeout != 1800*time.Second || cfg.ListenBacklog != 1024 ||
		cfg.SnapshotTTL != time.Minute || cfg.Port != 0 || cfg.PublicRead.Burst != 100 || cfg.PublicRead.GlobalBurst != 4000 ||
		cfg.Handshake.RatePerMinute != 60 || cfg.Handshake.Burst != 20 || cfg.Handshake.IPv6Prefix != 64 {
		t.Errorf("defaults differ: %+v", cfg)
	}
}

// limits.rs handshake_limiter_config_reads_defaults: per-source capacity 20,
// refill 1 per second, no trusted proxies.
func TestHandshakeLimiterConfigReadsDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Handshake
	if h.Burst != 20 || h.RatePerMinute/60 != 1 || len(h.TrustedProxies) != 0 || h.GlobalBurst != 1000 ||
		h.GlobalRatePerSecond != 500 || h.OverflowBurst != 40 || h.OverflowRatePerSecond != 20 ||
		h.DistinctSourceThreshold != 10000 || h.Window != time.Minute || h.IPv6Prefix != 64 || h.Shards != 16 {
		t.Errorf("handshake limiter defaults %+v", h)
	}
}

// TestConfigLineDefaults is the seed's default rendering, byte for byte
// (docs/protocol-linkkeys.md, The seed's commands, server).
func TestConfigLineDefaults(t *testing.T) {
	const want = "config: max_connections=200000 handshake_timeout=5s handshake_concurrency=512 idle_timeout=1800s io_timeout=60s max_inflight_frames=8 write_queue_bound=8 handshake_per_source_capacity=20 handshake_global_capacity=1000 handshake_distinct_source_threshold=10000"
	if got := ConfigLine(Config{}); got != want {
		t.Errorf("config line\n got %q\nwant %q", got, want)
	}
	golden(t, "config_line_default.golden", ConfigLine(Config{})+"\n")
}

func TestConfigFromEnvReadsEveryVariable(t *testing.T) {
	env := map[string]string{
		"TCP_PORT": "4988", "TCP_MAX_CONNECTIONS": "220000", "TCP_HANDSHAKE_TIMEOUT_SECONDS": "7",
		"TCP_HANDSHAKE_CONCURRENCY": "1024", "TCP_IDLE_TIMEOUT_SECONDS": "90", "TCP_IO_TIMEOUT_SECONDS": "11",
		"TCP_MAX_INFLIGHT_FRAMES": "3", "TCP_WRITE_QUEUE_BOUND": "5", "TCP_LISTEN_BACKLOG": "99999999999",
		"TCP_MAX_INFLIGHT_FRAME_BYTES": "1048576", "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND": "1048576",
		"TCP_FRAME_BODY_GRACE_SECONDS":  "2",
		"TCP_HANDSHAKE_RATE_PER_MINUTE": "6000000", "TCP_HANDSHAKE_BURST": "1000000",
		"TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "100000.5", "TCP_HANDSHAKE_GLOBAL_BURST": "200000",
		"TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND": "2.5", "TCP_HANDSHAKE_OVERFLOW_BURST": "9",
		"TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD": "77", "TCP_HANDSHAKE_WINDOW_SECONDS": "30", "TCP_HANDSHAKE_IPV6_PREFIX": "48",
		"PUBLIC_READ_RATE_PER_MINUTE": "600", "PUBLIC_READ_BURST": "50", "PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "10",
		"PUBLIC_READ_GLOBAL_BURST": "20", "PUBLIC_READ_OVERFLOW_RATE_PER_SECOND": "1", "PUBLIC_READ_OVERFLOW_BURST": "2",
		"PUBLIC_READ_DISTINCT_SOURCE_THRESHOLD": "3", "PUBLIC_READ_WINDOW_SECONDS": "4", "PUBLIC_READ_IPV6_PREFIX": "56",
		"PUBLIC_READ_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16", "DOMAIN_KEY_SNAPSHOT_TTL_SECONDS": "5",
		"TCP_SOURCE_PREFIXES": "held=127.1.0.0/16, hs=127.2.0.1-127.2.0.9",
	}
	for _, v := range EnvVars {
		if _, ok := env[v]; !ok {
			t.Fatalf("test does not set %s", v)
		}
	}
	cfg, err := ConfigFromEnv(envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Port", cfg.Port, uint16(4988)},
		{"MaxConnections", cfg.MaxConnections, uint64(220000)},
		{"HandshakeTimeout", cfg.HandshakeTimeout, 7 * time.Second},
		{"HandshakeConcurrency", cfg.HandshakeConcurrency, 1024},
		{"IdleTimeout", cfg.IdleTimeout, 90 * time.Second},
		{"IOTimeout", cfg.IOTimeout, 11 * time.Second},
		{"MaxInflightFrames", cfg.MaxInflightFrames, 3},
		{"WriteQueueBound", cfg.WriteQueueBound, 5},
		{"ListenBacklog (clamped)", cfg.ListenBacklog, 1<<31 - 1},
		{"MaxInflightFrameBytes", cfg.MaxInflightFrameBytes, int64(1 << 20)},
		{"MinFrameBodyRate", cfg.MinFrameBodyRate, uint64(1 << 20)},
		{"FrameBodyGrace", cfg.FrameBodyGrace, 2 * time.Second},
		{"Handshake.RatePerMinute", cfg.Handshake.RatePerMinute, 6e6},
		{"Handshake.Burst", cfg.Handshake.Burst, 1e6},
		{"Handshake.GlobalRatePerSecond", cfg.Handshake.GlobalRatePerSecond, 100000.5},
		{"Handshake.GlobalBurst", cfg.Handshake.GlobalBurst, 2e5},
		{"Handshake.OverflowRatePerSecond", cfg.Handshake.OverflowRatePerSecond, 2.5},
		{"Handshake.OverflowBurst", cfg.Handshake.OverflowBurst, 9.0},
		{"Handshake.DistinctSourceThreshold", cfg.Handshake.DistinctSourceThreshold, uint64(77)},
		{"Handshake.Window", cfg.Handshake.Window, 30 * time.Second},
		{"Handshake.IPv6Prefix", cfg.Handshake.IPv6Prefix, 48},
		{"PublicRead.RatePerMinute", cfg.PublicRead.RatePerMinute, 600.0},
		{"PublicRead.Burst", cfg.PublicRead.Burst, 50.0},
		{"PublicRead.GlobalRatePerSecond", cfg.PublicRead.GlobalRatePerSecond, 10.0},
		{"PublicRead.GlobalBurst", cfg.PublicRead.GlobalBurst, 20.0},
		{"PublicRead.OverflowRatePerSecond", cfg.PublicRead.OverflowRatePerSecond, 1.0},
		{"PublicRead.OverflowBurst", cfg.PublicRead.OverflowBurst, 2.0},
		{"PublicRead.DistinctSourceThreshold", cfg.PublicRead.DistinctSourceThreshold, uint64(3)},
		{"PublicRead.Window", cfg.PublicRead.Window, 4 * time.Second},
		{"PublicRead.IPv6Prefix", cfg.PublicRead.IPv6Prefix, 56},
		{"PublicRead.TrustedProxies", len(cfg.PublicRead.TrustedProxies), 2},
		{"SnapshotTTL", cfg.SnapshotTTL, 5 * time.Second},
		{"SourcePrefixes", FormatSourcePrefixes(cfg.SourcePrefixes), "held=127.1.0.0/16,hs=127.2.0.1-127.2.0.9"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// The golden line is the seed's fields; the prefixes follow them (TestConfigLineSourcePrefixes).
	line := ConfigLine(cfg)
	cfg.SourcePrefixes = nil
	golden(t, "config_line_env.golden", ConfigLine(cfg)+"\n")
	if want := ConfigLine(cfg) + " source_prefixes=held=127.1.0.0/16,hs=127.2.0.1-127.2.0.9"; line != want {
		t.Errorf("config line %s\nwant %s", line, want)
	}
}

// TestConfigFromEnvDefaultsOfNewVariables: the frame budget, body rate and
// grace this server adds, unset.
func TestConfigFromEnvDefaultsOfNewVariables(t *testing.T) {
	cfg, err := ConfigFromEnv(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxInflightFrameBytes != 64<<20 || cfg.MinFrameBodyRate != 4096 || cfg.FrameBodyGrace != 5*time.Second {
		t.Errorf("budget %d rate %d grace %v", cfg.MaxInflightFrameBytes, cfg.MinFrameBodyRate, cfg.FrameBodyGrace)
	}
	for _, v := range []string{"0", "1048575", "1099511627777", "1e6", "-1", "64MiB"} {
		_, err := ConfigFromEnv(envMap(map[string]string{"TCP_MAX_INFLIGHT_FRAME_BYTES": v}))
		if err == nil || !strings.Contains(err.Error(), `TCP_MAX_INFLIGHT_FRAME_BYTES="`+v+`": must be a whole number of bytes from 1048576`) {
			t.Errorf("TCP_MAX_INFLIGHT_FRAME_BYTES=%s: %v", v, err)
		}
	}
	for _, v := range []string{"1048576", "1099511627776"} {
		if _, err := ConfigFromEnv(envMap(map[string]string{"TCP_MAX_INFLIGHT_FRAME_BYTES": v})); err != nil {
			t.Errorf("TCP_MAX_INFLIGHT_FRAME_BYTES=%s: %v", v, err)
		}
	}
}

// TestConfigFromEnvRejectsUnsupported: upstream variables this server has
// nothing to apply to stop start-up, each named with its value and why.
func TestConfigFromEnvRejectsUnsupported(t *testing.T) {
	env := map[string]string{}
	for _, v := range UnsupportedEnvVars {
		env[v] = "300"
	}
	_, err := ConfigFromEnv(envMap(env))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, v := range UnsupportedEnvVars {
		if !strings.Contains(err.Error(), v+`="300": not supported by the reference server (`) {
			t.Errorf("error does not refuse %s:\n%v", v, err)
		}
	}
	if !strings.Contains(err.Error(), "mTLS DNS pin cache") || !strings.Contains(err.Error(), "application-key cache") {
		t.Errorf("error does not say why: %v", err)
	}
	if _, err := ConfigFromEnv(envMap(map[string]string{"TCP_MTLS_DNS_PIN_CACHE_MAX_ENTRIES": " "})); err != nil {
		t.Errorf("a blank value counts as unset: %v", err)
	}
}

func TestConfigFromEnvBlankMeansUnset(t *testing.T) {
	cfg, err := ConfigFromEnv(envMap(map[string]string{"TCP_MAX_CONNECTIONS": "  ", "PUBLIC_READ_BURST": ""}))
	if err != nil || cfg.MaxConnections != DefaultMaxConnections || cfg.PublicRead.Burst != 100 {
		t.Errorf("blank values: %v %+v", err, cfg)
	}
}

// TestConfigFromEnvReportsAllBadValuesAtOnce sets one bad value per variable
// and expects every variable named, with its value and what is accepted.
func TestConfigFromEnvReportsAllBadValuesAtOnce(t *testing.T) {
	bad := map[string]string{
		"TCP_PORT": "65536", "TCP_MAX_CONNECTIONS": "0", "TCP_HANDSHAKE_TIMEOUT_SECONDS": "-1",
		"TCP_HANDSHAKE_CONCURRENCY": "4294967296", "TCP_IDLE_TIMEOUT_SECONDS": "1.5", "TCP_IO_TIMEOUT_SECONDS": "abc",
		"TCP_MAX_INFLIGHT_FRAMES": "0", "TCP_WRITE_QUEUE_BOUND": "x", "TCP_LISTEN_BACKLOG": "-5",
		"TCP_MAX_INFLIGHT_FRAME_BYTES": "1048575", "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND": "1048577",
		"TCP_FRAME_BODY_GRACE_SECONDS":  "0",
		"TCP_HANDSHAKE_RATE_PER_MINUTE": "0", "TCP_HANDSHAKE_BURST": "0", "TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND": "nan",
		"TCP_HANDSHAKE_GLOBAL_BURST": "1e3", "TCP_HANDSHAKE_OVERFLOW_RATE_PER_SECOND": "inf",
		"TCP_HANDSHAKE_OVERFLOW_BURST": "-1", "TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD": "18446744073709551616",
		"TCP_HANDSHAKE_WINDOW_SECONDS": "0", "TCP_HANDSHAKE_IPV6_PREFIX": "129",
		"PUBLIC_READ_RATE_PER_MINUTE": "-3", "PUBLIC_READ_BURST": "0", "PUBLIC_READ_GLOBAL_RATE_PER_SECOND": "0",
		"PUBLIC_READ_GLOBAL_BURST": "z", "PUBLIC_READ_OVERFLOW_RATE_PER_SECOND": "-0.5", "PUBLIC_READ_OVERFLOW_BURST": "0",
		"PUBLIC_READ_DISTINCT_SOURCE_THRESHOLD": "0", "PUBLIC_READ_WINDOW_SECONDS": "never", "PUBLIC_READ_IPV6_PREFIX": "0",
		"PUBLIC_READ_TRUSTED_PROXIES": "10.0.0.1,not-an-ip", "DOMAIN_KEY_SNAPSHOT_TTL_SECONDS": "0",
		"TCP_SOURCE_PREFIXES": "held=127.1.0.0/16,held=127.2.0.0/16",
	}
	for _, v := range EnvVars {
		if _, ok := bad[v]; !ok {
			t.Fatalf("test does not break %s", v)
		}
	}
	_, err := ConfigFromEnv(envMap(bad))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, v := range EnvVars {
		want := v + "=" + quote(bad[v])
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %s", want)
		}
	}
	for _, accepted := range []string{"must be a whole number from 1 to 65535", "must be a whole number greater than 0",
		"must be a finite number greater than 0", "must be a whole number from 1 to 128", "must be a whole number of seconds",
		"is not an IP address or CIDR", "must be a whole number of bytes from 1048576 (one frame of the maximum size) to 1099511627776",
		"must be a whole number from 1 to 1048576", `name "held" is given twice`} {
		if !strings.Contains(msg, accepted) {
			t.Errorf("error does not say %q:\n%s", accepted, msg)
		}
	}
	var ee *envvar.Error
	if !errors.As(err, &ee) {
		t.Error("errors.As(*envvar.Error) fails")
	}
}

func quote(s string) string { return `"` + s + `"` }

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	err := Config{IOTimeout: -1, MaxInflightFrames: -2, PublicRead: admit.LimiterConfig{Burst: -1},
		MaxInflightFrameBytes: 1<<20 - 1, FrameBodyGrace: -1}.Validate()
	for _, want := range []string{"IOTimeout", "MaxInflightFrames", "PublicRead", "MaxInflightFrameBytes is 1048575", "FrameBodyGrace"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate does not report %s: %v", want, err)
		}
	}
}

func TestRustDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{5 * time.Second, "5s"}, {1800 * time.Second, "1800s"}, {1500 * time.Millisecond, "1.5s"},
		{200 * time.Millisecond, "200ms"}, {1500 * time.Microsecond, "1.5ms"}, {7 * time.Nanosecond, "7ns"},
		{2500 * time.Nanosecond, "2.5µs"}, {0, "0ns"}, {time.Second + time.Nanosecond, "1.000000001s"},
	} {
		if got := RustDuration(tc.d); got != tc.want {
			t.Errorf("RustDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestConfigShareSumsToTheTotal(t *testing.T) {
	base := Config{MaxConnections: 1001, HandshakeConcurrency: 5, MaxInflightFrameBytes: 5<<20 + 3}.WithDefaults()
	for _, n := range []int{1, 2, 3, 7} {
		var conns uint64
		var conc int
		var gBurst float64
		var budget int64
		for i := range n {
			c := base.Share(n, i)
			budget += c.MaxInflightFrameBytes
			if c.MaxInflightFrameBytes < 1<<20 {
				t.Errorf("n=%d: child %d's frame budget %d is below one maximum frame", n, i, c.MaxInflightFrameBytes)
			}
			conns += c.MaxConnections
			conc += c.HandshakeConcurrency
			gBurst += c.Handshake.GlobalBurst
			if c.IdleTimeout != base.IdleTimeout || c.MaxInflightFrames != base.MaxInflightFrames {
				t.Errorf("n=%d: per-connection settings changed", n)
			}
		}
		if conns != 1001 || gBurst != base.Handshake.GlobalBurst {
			t.Errorf("n=%d: max connections sum %d, global burst sum %v; want 1001 and %v", n, conns, gBurst, base.Handshake.GlobalBurst)
		}
		if n <= 5 && budget != base.MaxInflightFrameBytes {
			t.Errorf("n=%d: frame budgets sum to %d, want %d", n, budget, base.MaxInflightFrameBytes)
		}
		if n <= 5 && conc != 5 {
			t.Errorf("n=%d: handshake concurrency sums to %d, want 5", n, conc)
		}
		if n > 5 && conc != n {
			t.Errorf("n=%d: handshake concurrency sums to %d, want one each (%d)", n, conc, n)
		}
	}
}

func FuzzConfigFromEnv(f *testing.F) {
	f.Add("TCP_MAX_CONNECTIONS", "10", "PUBLIC_READ_TRUSTED_PROXIES", "::1,10.0.0.0/8")
	f.Add("TCP_HANDSHAKE_IPV6_PREFIX", "0", "TCP_IO_TIMEOUT_SECONDS", "9223372037")
	f.Add("TCP_PORT", "+80", "PUBLIC_READ_GLOBAL_RATE_PER_SECOND", "1e-300")
	f.Add("TCP_MAX_INFLIGHT_FRAME_BYTES", "1048576", "TCP_MIN_FRAME_BODY_BYTES_PER_SECOND", "1048577")
	f.Add("TCP_MAX_INFLIGHT_FRAME_BYTES", "1099511627777", "TCP_FRAME_BODY_GRACE_SECONDS", "0")
	f.Add("TCP_MTLS_DNS_PIN_CACHE_MAX_ENTRIES", "10000", "PUBKEY_CACHE_MAX_BYTES", " ")
	f.Add("TCP_SOURCE_PREFIXES", "held=127.1.0.0/16,hs=127.2.0.1-127.2.0.9,one=127.3.0.1", "TCP_PORT", "4987")
	f.Add("TCP_SOURCE_PREFIXES", "a=127.0.0.0/8,b=127.1.0.0/16", "TCP_SOURCE_PREFIXES", "x=")
	f.Add("TCP_SOURCE_PREFIXES", "v6=fd00::/64,m=::ffff:127.0.0.1,Bad=1.2.3.4", "TCP_HANDSHAKE_BURST", "1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		cfg, err := ConfigFromEnv(envMap(map[string]string{k1: v1, k2: v2}))
		if err != nil {
			if !strings.Contains(err.Error(), "=") {
				t.Errorf("error names no variable: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("accepted config does not validate: %v", err)
		}
		_ = ConfigLine(cfg)
	})
}
