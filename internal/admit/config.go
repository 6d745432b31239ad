package admit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// DefaultShards is the number of per-source shards used when
// LimiterConfig.Shards is 0, as upstream fixes it.
const DefaultShards = 16

// LimiterConfig configures a Limiter. The zero value of any field means the
// PublicReadDefaults value for that field, except TrustedProxies (empty) and
// Shards (DefaultShards).
type LimiterConfig struct {
	// RatePerMinute is the per-source refill; the bucket refills
	// RatePerMinute/60 tokens per second.
	RatePerMinute float64
	// Burst is the per-source bucket capacity.
	Burst float64
	// GlobalRatePerSecond is the global bucket's refill.
	GlobalRatePerSecond float64
	// GlobalBurst is the global bucket's capacity.
	GlobalBurst float64
	// OverflowRatePerSecond is the shared overflow bucket's refill, used
	// by new sources while the distinct-source window is full.
	OverflowRatePerSecond float64
	// OverflowBurst is the overflow bucket's capacity.
	OverflowBurst float64
	// DistinctSourceThreshold is the most distinct sources tracked per
	// window; it also sizes the per-source map.
	DistinctSourceThreshold uint64
	// Window is the length of the tumbling distinct-source window.
	Window time.Duration
	// IPv6Prefix is the prefix length IPv6 peers are masked to, 1..128.
	IPv6Prefix int
	// TrustedProxies are the peers whose X-Forwarded-For header is believed
	// (HTTP only; always empty over TCP, which has no forwarded header).
	TrustedProxies []netip.Prefix
	// Shards is the number of per-source map shards, a power of two; 0
	// means DefaultShards. Other values are rounded up to a power of two.
	Shards int
}

// HandshakeDefaults returns the TCP_HANDSHAKE_* defaults: 60 per minute per
// source with a burst of 20, a global 500/s with a burst of 1000, an overflow
// 20/s with a burst of 40, 10000 distinct sources per 60 s window, /64.
func HandshakeDefaults() LimiterConfig {
	return LimiterConfig{
		RatePerMinute:           60,
		Burst:                   20,
		GlobalRatePerSecond:     500,
		GlobalBurst:             1000,
		OverflowRatePerSecond:   20,
		OverflowBurst:           40,
		DistinctSourceThreshold: 10000,
		Window:                  60 * time.Second,
		IPv6Prefix:              64,
		Shards:                  DefaultShards,
	}
}

// PublicReadDefaults returns the PUBLIC_READ_* defaults: 100 per minute per
// source with a burst of 100, a global 2000/s with a burst of 4000, an
// overflow 50/s with a burst of 100, 10000 distinct sources per 60 s window,
// /64, no trusted proxies.
func PublicReadDefaults() LimiterConfig {
	return LimiterConfig{
		RatePerMinute:           100,
		Burst:                   100,
		GlobalRatePerSecond:     2000,
		GlobalBurst:             4000,
		OverflowRatePerSecond:   50,
		OverflowBurst:           100,
		DistinctSourceThreshold: 10000,
		Window:                  60 * time.Second,
		IPv6Prefix:              64,
		Shards:                  DefaultShards,
	}
}

// WithDefaults returns cfg with every zero field taken from def (HandshakeDefaults or
// PublicReadDefaults, say). Shards is left as given when def has none.
func (cfg LimiterConfig) WithDefaults(def LimiterConfig) LimiterConfig {
	cfg.RatePerMinute = cmp.Or(cfg.RatePerMinute, def.RatePerMinute)
	cfg.Burst = cmp.Or(cfg.Burst, def.Burst)
	cfg.GlobalRatePerSecond = cmp.Or(cfg.GlobalRatePerSecond, def.GlobalRatePerSecond)
	cfg.GlobalBurst = cmp.Or(cfg.GlobalBurst, def.GlobalBurst)
	cfg.OverflowRatePerSecond = cmp.Or(cfg.OverflowRatePerSecond, def.OverflowRatePerSecond)
	cfg.OverflowBurst = cmp.Or(cfg.OverflowBurst, def.OverflowBurst)
	cfg.DistinctSourceThreshold = cmp.Or(cfg.DistinctSourceThreshold, def.DistinctSourceThreshold)
	cfg.Window = cmp.Or(cfg.Window, def.Window)
	cfg.IPv6Prefix = cmp.Or(cfg.IPv6Prefix, def.IPv6Prefix)
	cfg.Shards = cmp.Or(cfg.Shards, def.Shards)
	return cfg
}

// withDefaults is what a Limiter runs with: zero fields from PublicReadDefaults, Shards rounded
// up to a power of two.
func (cfg LimiterConfig) withDefaults() LimiterConfig {
	cfg = cfg.WithDefaults(PublicReadDefaults())
	if cfg.Shards <= 0 {
		cfg.Shards = DefaultShards
	}
	s := 1
	for s < cfg.Shards && s < 1<<20 {
		s <<= 1
	}
	cfg.Shards = s
	cfg.TrustedProxies = slices.Clone(cfg.TrustedProxies)
	return cfg
}

// Validate reports every field that no limiter can use: rates that are not
// finite and above zero, negative or non-finite bursts, a negative window, an
// IPv6 prefix outside 0..128 (0 meaning the default) and invalid proxy
// prefixes. Zero values are valid: they mean the defaults.
func (cfg LimiterConfig) Validate() error {
	var errs []error
	rate := func(name string, v float64) {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("admit: LimiterConfig.%s is %v: must be a finite number greater than 0 (0 means the default)", name, v))
		}
	}
	rate("RatePerMinute", cfg.RatePerMinute)
	rate("Burst", cfg.Burst)
	rate("GlobalRatePerSecond", cfg.GlobalRatePerSecond)
	rate("GlobalBurst", cfg.GlobalBurst)
	rate("OverflowRatePerSecond", cfg.OverflowRatePerSecond)
	rate("OverflowBurst", cfg.OverflowBurst)
	if cfg.Window < 0 {
		errs = append(errs, fmt.Errorf("admit: LimiterConfig.Window is %v: must be positive (0 means the default)", cfg.Window))
	}
	if cfg.IPv6Prefix < 0 || cfg.IPv6Prefix > 128 {
		errs = append(errs, fmt.Errorf("admit: LimiterConfig.IPv6Prefix is %d: must be from 1 to 128 (0 means the default)", cfg.IPv6Prefix))
	}
	for i, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("admit: LimiterConfig.TrustedProxies[%d] is not a valid prefix", i))
		}
	}
	return errors.Join(errs...)
}

// SourceFor returns the address a request should be limited as. The
// X-Forwarded-For value is believed only when peer is inside one of
// TrustedProxies (IPv4-mapped peers are matched as IPv4); then its rightmost
// comma-separated entry, the address the trusted proxy itself saw, is used
// if it parses as an IP address. Anything left of it may have been written by
// the client and is ignored. In every other case the peer itself is returned.
func (cfg LimiterConfig) SourceFor(peer netip.Addr, forwardedFor string) netip.Addr {
	if len(cfg.TrustedProxies) == 0 || forwardedFor == "" {
		return peer
	}
	p := peer.Unmap().WithZone("")
	trusted := false
	for _, pfx := range cfg.TrustedProxies {
		if pfx.Contains(p) {
			trusted = true
			break
		}
	}
	if !trusted {
		return peer
	}
	last := forwardedFor
	if i := strings.LastIndexByte(forwardedFor, ','); i >= 0 {
		last = forwardedFor[i+1:]
	}
	ip, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil || ip.Zone() != "" {
		return peer
	}
	return ip
}

// Share returns the configuration process i of n should run so that n
// processes sharing one listener (SO_REUSEPORT) together enforce cfg.
//
// Buckets shared by all sources are split exactly: the global and overflow
// rates are divided by n, and their bursts are split as whole tokens, the
// remainder going to the lowest indices, so the n shares sum to the total
// exactly (any fractional part of a burst goes to process 0). With n greater
// than a burst some processes get a burst of 0 and admit nothing through that
// bucket; the total still holds.
//
// Per-source limits cannot be split exactly: the kernel spreads a source's
// connections over processes by 4-tuple hash, not by source. The rule is:
// the per-source rate is divided by n, the per-source burst is
// ceil(Burst/n), and the distinct-source threshold is ceil(threshold/n).
// Error bound: a source whose connections spread over all n processes gets
// at most n*ceil(Burst/n) < Burst+n burst tokens (over-admission below n) at
// exactly the configured rate; a source whose traffic lands on one process
// (one persistent connection) gets ceil(Burst/n) burst at rate/n, that is
// about 1/n of its budget. Across processes up to n*ceil(threshold/n) <
// threshold+n distinct sources hold state per window. The window, IPv6
// prefix, trusted proxies and shard count are not divided.
//
// n <= 1 returns cfg unchanged. Share panics if i is outside 0..n-1.
func (cfg LimiterConfig) Share(n, i int) LimiterConfig {
	if n <= 1 {
		return cfg
	}
	if i < 0 || i >= n {
		panic(fmt.Sprintf("admit: LimiterConfig.Share(%d, %d): index must be from 0 to %d", n, i, n-1))
	}
	cfg = cfg.withDefaults()
	fn := float64(n)
	cfg.GlobalRatePerSecond /= fn
	cfg.GlobalBurst = splitBurst(cfg.GlobalBurst, n, i)
	cfg.OverflowRatePerSecond /= fn
	cfg.OverflowBurst = splitBurst(cfg.OverflowBurst, n, i)
	cfg.RatePerMinute /= fn
	cfg.Burst = math.Ceil(cfg.Burst / fn)
	cfg.DistinctSourceThreshold = ceilDiv(cfg.DistinctSourceThreshold, uint64(n))
	return cfg
}

// splitBurst gives share i of total split over n as whole tokens summing to
// total exactly.
func splitBurst(total float64, n, i int) float64 {
	whole := math.Floor(total)
	frac := total - whole
	base := math.Floor(whole / float64(n))
	rem := whole - base*float64(n) // 0 <= rem < n
	share := base
	if float64(i) < rem {
		share++
	}
	if i == 0 {
		share += frac
	}
	return share
}

// ceilDiv is ceil(a/b) without overflow.
func ceilDiv(a, b uint64) uint64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
