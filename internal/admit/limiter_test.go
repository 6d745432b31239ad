package admit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/testwait"
)

// generous widens every layer but the one under test, as upstream's tests do.
func generous() LimiterConfig {
	cfg := PublicReadDefaults()
	cfg.GlobalBurst = 1_000_000
	cfg.GlobalRatePerSecond = 1_000_000
	cfg.DistinctSourceThreshold = 1_000_000
	return cfg
}

func v4(a, b, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b, c, d}) }

// v4n is the IPv4 address whose 32 bits are n.
func v4n(n uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b)
}

func newTestLimiter(t testing.TB, cfg LimiterConfig) (*Limiter, *ManualClock) {
	t.Helper()
	clk := &ManualClock{}
	return NewLimiter(cfg, clk), clk
}

func mustReason(t *testing.T, got Decision, want Reason) {
	t.Helper()
	if got.Reason != want {
		t.Fatalf("decision = %+v (%v), want %v", got, got.Reason, want)
	}
	if want == Allow && got.RetryAfterSecs != 0 {
		t.Fatalf("allowed decision carries retry %d", got.RetryAfterSecs)
	}
	if want != Allow && got.RetryAfterSecs < 1 {
		t.Fatalf("limited decision has retry %d, want >= 1", got.RetryAfterSecs)
	}
}

func TestDefaultBucketAllows100ThenBlocks(t *testing.T) {
	l, _ := newTestLimiter(t, generous())
	src := KeyForAddr(v4(10, 0, 0, 1), 64)
	for i := range 100 {
		if d := l.Check(src); !d.Allowed() {
			t.Fatalf("request %d: %+v, want allow", i+1, d)
		}
	}
	d := l.Check(src)
	mustReason(t, d, PerSource)
	// 100/min refill from an empty bucket: one token in 0.6 s, so 1 second.
	if d.RetryAfterSecs != 1 {
		t.Fatalf("retry = %d, want 1", d.RetryAfterSecs)
	}
	if s := l.Stats(); s.Accepted != 100 || s.RejectedPerSource != 1 || s.RejectedGlobal != 0 || s.RejectedOverflow != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestRefillRestoresCapacity(t *testing.T) {
	cfg := generous()
	cfg.Burst = 2
	cfg.RatePerMinute = 60_000 // 1000 per second
	l, clk := newTestLimiter(t, cfg)
	src := KeyForAddr(v4(10, 0, 0, 2), 64)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), PerSource)
	clk.Advance(20 * time.Millisecond)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), PerSource) // capped at the burst, not 20 tokens
}

func TestConfigurationOverrideChangesBehaviour(t *testing.T) {
	cfg := generous()
	cfg.Burst = 5
	cfg.RatePerMinute = 0.006 // 0.0001 per second
	l, _ := newTestLimiter(t, cfg)
	src := KeyForAddr(v4(10, 0, 0, 3), 64)
	for range 5 {
		mustReason(t, l.Check(src), Allow)
	}
	d := l.Check(src)
	mustReason(t, d, PerSource)
	if d.RetryAfterSecs != 10000 {
		t.Fatalf("retry = %d, want 10000 (one token at 0.0001/s)", d.RetryAfterSecs)
	}
}

func TestIPv6AddressesInTheSamePrefixShareABucket(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:1234:5678::1")
	b := netip.MustParseAddr("2001:db8:1234:5678:ffff:ffff:ffff:ffff")
	c := netip.MustParseAddr("2001:db8:1234:5679::1")
	tests := []struct {
		x, y   netip.Addr
		prefix int
		same   bool
	}{
		{a, b, 64, true},
		{a, c, 64, false},
		{a, c, 48, true},
		{a, b, 128, false},
		{a, a, 128, true},
	}
	for _, tt := range tests {
		if got := KeyForAddr(tt.x, tt.prefix) == KeyForAddr(tt.y, tt.prefix); got != tt.same {
			t.Errorf("%v and %v at /%d: same key = %v, want %v", tt.x, tt.y, tt.prefix, got, tt.same)
		}
	}

	// And through the limiter: a and b drain one bucket, c has its own.
	cfg := generous()
	cfg.Burst = 2
	cfg.RatePerMinute = 0.006
	l, _ := newTestLimiter(t, cfg)
	mustReason(t, l.CheckAddr(a), Allow)
	mustReason(t, l.CheckAddr(b), Allow)
	mustReason(t, l.CheckAddr(a), PerSource)
	mustReason(t, l.CheckAddr(c), Allow)
}

func TestMoreThan10000DistinctSourcesStayBounded(t *testing.T) {
	cfg := PublicReadDefaults()
	cfg.GlobalBurst = 10_000_000
	cfg.GlobalRatePerSecond = 10_000_000
	l, _ := newTestLimiter(t, cfg)
	if got := l.Stats().TrackedSources; got != 0 {
		t.Fatalf("tracked before any check = %d", got)
	}
	for i := range uint32(15_000) {
		l.CheckAddr(v4n(i))
		if got := l.Stats().TrackedSources; got > 10_000 {
			t.Fatalf("tracked = %d at source %d, bound 10000", got, i)
		}
	}
	s := l.Stats()
	if s.TrackedSources != 10_000 {
		t.Errorf("tracked = %d, want 10000", s.TrackedSources)
	}
	if s.ProtectionModeEntries != 1 {
		t.Errorf("protection entries = %d, want 1", s.ProtectionModeEntries)
	}
	// 5000 overflow sources against an overflow burst of 100 and no time passing.
	if s.RejectedOverflow != 4900 {
		t.Errorf("rejected overflow = %d, want 4900", s.RejectedOverflow)
	}
	if s.BucketEntries > s.MaxBucketEntries {
		t.Errorf("bucket entries %d exceed bound %d", s.BucketEntries, s.MaxBucketEntries)
	}
}

func TestProtectionModePreservesKnownSourcesAndAllocatesNoStateForNewOnes(t *testing.T) {
	cfg := generous()
	cfg.DistinctSourceThreshold = 3
	cfg.OverflowBurst = 1
	cfg.OverflowRatePerSecond = 0.0001
	l, _ := newTestLimiter(t, cfg)
	var known []SourceKey
	for i := range byte(3) {
		k := KeyForAddr(v4(10, 1, 0, i), 64)
		known = append(known, k)
		mustReason(t, l.Check(k), Allow)
	}
	before := l.Stats()
	if before.TrackedSources != 3 || before.BucketEntries != 3 {
		t.Fatalf("after 3 sources: %+v", before)
	}
	newcomer := KeyForAddr(v4(10, 1, 1, 1), 64)
	mustReason(t, l.Check(newcomer), Allow) // the overflow bucket's one token
	mustReason(t, l.Check(newcomer), Overflow)
	after := l.Stats()
	if after.TrackedSources != 3 || after.BucketEntries != 3 {
		t.Fatalf("newcomer allocated state: %+v", after)
	}
	mustReason(t, l.Check(known[0]), Allow)
	if after.ProtectionModeEntries != 1 {
		t.Fatalf("protection entries = %d, want 1 per window", after.ProtectionModeEntries)
	}
}

func TestSourceRotationCannotBypassTheGlobalLimit(t *testing.T) {
	cfg := PublicReadDefaults()
	cfg.Burst = 1_000_000
	cfg.RatePerMinute = 60_000_000
	cfg.DistinctSourceThreshold = 1_000_000
	cfg.GlobalBurst = 5
	cfg.GlobalRatePerSecond = 0.0001
	l, _ := newTestLimiter(t, cfg)
	allowed := 0
	for i := range uint32(50) {
		if l.CheckAddr(v4n(i)).Allowed() {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("allowed = %d, want 5", allowed)
	}
	if s := l.Stats(); s.RejectedGlobal != 45 {
		t.Fatalf("rejected global = %d, want 45", s.RejectedGlobal)
	}
}

func TestAttackerClaimedIdentifiersCannotDrainAVictimSourceBucket(t *testing.T) {
	cfg := generous()
	cfg.Burst = 3
	l, _ := newTestLimiter(t, cfg)
	victim := KeyForAddr(v4(203, 0, 113, 9), 64)
	attacker := KeyForAddr(v4(198, 51, 100, 7), 64)
	if victim == attacker {
		t.Fatal("victim and attacker share a key")
	}
	for range 10 {
		l.Check(attacker)
	}
	for range 3 {
		mustReason(t, l.Check(victim), Allow)
	}
	mustReason(t, l.Check(victim), PerSource)
}

func TestNormalizeSourceIgnoresEverythingButTheTransportPeer(t *testing.T) {
	peer := v4(192, 0, 2, 1)
	cfg := PublicReadDefaults() // no trusted proxies
	for _, xff := range []string{"", "203.0.113.5", "10.0.0.1, 203.0.113.5", "garbage"} {
		got := KeyForAddr(cfg.SourceFor(peer, xff), cfg.IPv6Prefix)
		if want := KeyForAddr(peer, 64); got != want {
			t.Errorf("X-Forwarded-For %q changed the key of an untrusted peer", xff)
		}
	}
}

func TestTrustedProxyForwardedHeaderIsHonoredOnlyWhenConfigured(t *testing.T) {
	proxy := netip.MustParseAddr("10.9.9.9")
	trusted := PublicReadDefaults()
	trusted.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.9.9.9/32"), netip.MustParsePrefix("fd00::/8")}
	untrusted := PublicReadDefaults()
	client := netip.MustParseAddr("203.0.113.5")
	tests := []struct {
		name string
		cfg  LimiterConfig
		peer netip.Addr
		xff  string
		want netip.Addr
	}{
		{"rightmost entry from trusted proxy", trusted, proxy, "198.51.100.20, 203.0.113.5", client},
		{"single entry", trusted, proxy, "203.0.113.5", client},
		{"spaces trimmed", trusted, proxy, "  203.0.113.5  ", client},
		{"v4-mapped proxy peer", trusted, netip.MustParseAddr("::ffff:10.9.9.9"), "203.0.113.5", client},
		{"v6 proxy", trusted, netip.MustParseAddr("fd12::1"), "2001:db8::7", netip.MustParseAddr("2001:db8::7")},
		{"untrusted proxy ignored", untrusted, proxy, "198.51.100.20, 203.0.113.5", proxy},
		{"peer outside trusted list", trusted, v4(10, 9, 9, 8), "203.0.113.5", v4(10, 9, 9, 8)},
		{"unparseable rightmost falls back to peer", trusted, proxy, "203.0.113.5, junk", proxy},
		{"trailing comma falls back to peer", trusted, proxy, "203.0.113.5,", proxy},
		{"zone rejected", trusted, proxy, "fe80::1%eth0", proxy},
		{"no header", trusted, proxy, "", proxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.SourceFor(tt.peer, tt.xff); got != tt.want {
				t.Fatalf("SourceFor(%v, %q) = %v, want %v", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}

func TestWindowRotationFreesMemory(t *testing.T) {
	cfg := generous()
	cfg.DistinctSourceThreshold = 5
	cfg.Window = time.Second
	l, clk := newTestLimiter(t, cfg)
	for i := range byte(5) {
		l.CheckAddr(v4(10, 2, 0, i))
	}
	if got := l.Stats().TrackedSources; got != 5 {
		t.Fatalf("tracked = %d, want 5", got)
	}
	clk.Advance(999 * time.Millisecond)
	l.CheckAddr(v4(10, 2, 0, 0)) // known: no rotation yet
	if got := l.Stats().TrackedSources; got != 5 {
		t.Fatalf("tracked before the window ends = %d, want 5", got)
	}
	clk.Advance(time.Millisecond) // exactly one window: rotates (>=)
	l.CheckAddr(v4(10, 2, 1, 1))
	if got := l.Stats().TrackedSources; got != 1 {
		t.Fatalf("tracked after rotation = %d, want 1", got)
	}
}

func TestDifferentSourcesSpreadAcrossShardsAndMakeConcurrentProgress(t *testing.T) {
	l := NewLimiter(generous(), SystemClock())
	seen := map[int]bool{}
	for i := range uint32(64) {
		seen[l.ShardOf(KeyForAddr(v4n(i), 64))] = true
	}
	if len(seen) < 2 {
		t.Fatalf("64 sources landed in %d shard(s)", len(seen))
	}
	var wg sync.WaitGroup
	allowed := make([]int, 8)
	for w := range 8 {
		wg.Go(func() {
			src := KeyForAddr(v4n(uint32(1000+w)), 64)
			for range 20 {
				if l.Check(src).Allowed() {
					allowed[w]++
				}
			}
		})
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the 8 checkers' ends")
	for w, n := range allowed {
		if n != 20 {
			t.Errorf("worker %d: %d of 20 allowed from its own 100-token bucket", w, n)
		}
	}
}

func TestConfigDefaultsMatchDocumentedValues(t *testing.T) {
	tests := []struct {
		name string
		got  LimiterConfig
		want [9]float64 // rate/min, burst, global rate, global burst, overflow rate, overflow burst, threshold, window s, prefix
	}{
		{"public read", PublicReadDefaults(), [9]float64{100, 100, 2000, 4000, 50, 100, 10000, 60, 64}},
		{"handshake", HandshakeDefaults(), [9]float64{60, 20, 500, 1000, 20, 40, 10000, 60, 64}},
	}
	for _, tt := range tests {
		c := tt.got
		got := [9]float64{c.RatePerMinute, c.Burst, c.GlobalRatePerSecond, c.GlobalBurst, c.OverflowRatePerSecond,
			c.OverflowBurst, float64(c.DistinctSourceThreshold), c.Window.Seconds(), float64(c.IPv6Prefix)}
		if got != tt.want {
			t.Errorf("%s defaults = %v, want %v", tt.name, got, tt.want)
		}
		if len(c.TrustedProxies) != 0 || c.Shards != 16 {
			t.Errorf("%s: proxies %v, shards %d", tt.name, c.TrustedProxies, c.Shards)
		}
	}
}

// TestHandshakeLimiterConfigReadsDefaults ports tcp/limits.rs'
// handshake_limiter_config_reads_defaults: capacity 20, 1 token per second.
func TestHandshakeLimiterConfigReadsDefaults(t *testing.T) {
	cfg, err := HandshakeConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newTestLimiter(t, cfg)
	src := KeyForAddr(v4(127, 0, 0, 1), 64)
	for i := range 20 {
		if !l.Check(src).Allowed() {
			t.Fatalf("handshake %d refused within the burst of 20", i+1)
		}
	}
	mustReason(t, l.Check(src), PerSource)
	clk.Advance(time.Second)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), PerSource)
	if len(l.Config().TrustedProxies) != 0 {
		t.Fatal("handshake limiter has trusted proxies")
	}
}

func TestSourceKeyFromStringMatchesKeyForAddr(t *testing.T) {
	for _, s := range []string{"203.0.113.9", "127.0.0.1", "2001:db8::1", "::1", "::ffff:192.0.2.1"} {
		if KeyForString(s, 64) != KeyForAddr(netip.MustParseAddr(s), 64) {
			t.Errorf("KeyForString(%q) differs from KeyForAddr", s)
		}
	}
	a, b := KeyForString("unknown-tcp-peer", 64), KeyForString("unknown-tcp-peer", 64)
	if a != b {
		t.Error("raw key is not stable")
	}
	if a == KeyForString("203.0.113.9", 64) {
		t.Error("raw key collides with an address key")
	}
	if a != SourceKey(sha256.Sum256([]byte("raw:unknown-tcp-peer"))) {
		t.Error("raw key is not sha256(\"raw:\"+s)")
	}
}

func TestThePerSourceBucketMapStaysBoundedUnderEndlessFreshSources(t *testing.T) {
	cfg := PublicReadDefaults()
	cfg.GlobalBurst = 1_000_000
	cfg.GlobalRatePerSecond = 1_000_000
	cfg.DistinctSourceThreshold = 256
	cfg.Shards = 4
	cfg.Window = time.Second
	l, clk := newTestLimiter(t, cfg)
	bound := l.Stats().MaxBucketEntries
	if bound != 256 {
		t.Fatalf("bound = %d, want 4 shards * max(16, 64) = 256", bound)
	}
	maxSeen := 0
	for i := range uint32(50_000) {
		// A fresh source every 10 ms: 100 per 1 s window, under the
		// threshold, so protection mode never trips and only the
		// bucket map's own bound holds it.
		clk.Advance(10 * time.Millisecond)
		l.CheckAddr(v4n(10<<24 | i))
		if n := l.Stats().BucketEntries; n > bound {
			t.Fatalf("bucket entries %d > bound %d at source %d", n, bound, i)
		} else {
			maxSeen = max(maxSeen, n)
		}
	}
	if s := l.Stats(); s.ProtectionModeEntries != 0 {
		t.Fatalf("protection mode tripped (%d); the test must stay below the threshold", s.ProtectionModeEntries)
	}
	if maxSeen < bound/2 {
		t.Fatalf("map peaked at %d entries: pruning ran far below the bound %d, test proves nothing", maxSeen, bound)
	}
}

func TestASourceBeingLimitedKeepsItsLimitWhileOthersChurn(t *testing.T) {
	cfg := PublicReadDefaults()
	cfg.Burst = 5
	cfg.RatePerMinute = 0.00006 // 0.000001 per second
	cfg.GlobalBurst = 1_000_000
	cfg.GlobalRatePerSecond = 1_000_000
	cfg.DistinctSourceThreshold = 64
	cfg.Shards = 2
	l, clk := newTestLimiter(t, cfg)
	victim := KeyForAddr(v4(203, 0, 113, 7), 64)
	for range 5 {
		mustReason(t, l.Check(victim), Allow)
	}
	mustReason(t, l.Check(victim), PerSource)
	for i := range uint32(5000) {
		clk.Advance(time.Millisecond)
		l.CheckAddr(v4n(198<<24 | 51<<16 | i))
	}
	mustReason(t, l.Check(victim), PerSource)
}

// TestPruneDropsRefilledBucketsBeforeLimitedOnes drives one shard to its bound
// with a mix of limited and refilled buckets and checks that only refilled
// ones go, and that LRU is the fallback when none has refilled.
func TestPruneDropsRefilledBucketsBeforeLimitedOnes(t *testing.T) {
	cfg := generous()
	cfg.Shards = 1
	cfg.DistinctSourceThreshold = 16 // bound: max(16, 16) = 16
	cfg.Window = time.Second         // so source 17 is admitted in the next window
	cfg.Burst = 2
	cfg.RatePerMinute = 60 // 1 per second
	l, clk := newTestLimiter(t, cfg)
	keys := make([]SourceKey, 17)
	for i := range keys {
		keys[i] = KeyForAddr(v4n(uint32(i+1)), 64)
	}
	// Sources 0..7 drain their buckets (limited); 8..15 take one token.
	for i := range 16 {
		l.Check(keys[i])
		if i < 8 {
			l.Check(keys[i])
		}
		clk.Advance(time.Millisecond)
	}
	clk.Advance(1100 * time.Millisecond) // 8..15 are full again; 0..7 hold ~1.1
	l.Check(keys[16])
	if n := l.Stats().BucketEntries; n != 9 {
		t.Fatalf("entries after prune = %d, want 8 drained + 1 new", n)
	}
	// The drained sources kept their state: one token left each, then limited.
	for i := range 8 {
		mustReason(t, l.Check(keys[i]), Allow)
		mustReason(t, l.Check(keys[i]), PerSource)
	}
}

func TestPruneFallsBackToLeastRecentlyUsed(t *testing.T) {
	cfg := generous()
	cfg.Shards = 1
	cfg.DistinctSourceThreshold = 16
	cfg.Window = time.Second
	cfg.Burst = 2
	cfg.RatePerMinute = 0.006
	l, clk := newTestLimiter(t, cfg)
	keys := make([]SourceKey, 17)
	for i := range keys {
		keys[i] = KeyForAddr(v4n(uint32(i+1)), 64)
	}
	for i := range 16 {
		l.Check(keys[i])
		l.Check(keys[i]) // drained: never prunable as refilled
		clk.Advance(time.Second)
	}
	l.Check(keys[0]) // now the most recently used; keys[1] is the LRU
	clk.Advance(time.Second)
	l.Check(keys[16])
	if n := l.Stats().BucketEntries; n != 16 {
		t.Fatalf("entries = %d, want 16", n)
	}
	mustReason(t, l.Check(keys[0]), PerSource) // kept
	// keys[1] was evicted: it comes back with a full bucket (the
	// documented forgiveness of the LRU pass).
	mustReason(t, l.Check(keys[1]), Allow)
}

func TestGlobalBucketUntouchedWhenAnEarlierLayerFails(t *testing.T) {
	cfg := generous()
	cfg.Burst = 1
	cfg.RatePerMinute = 0.006
	cfg.GlobalBurst = 3
	cfg.GlobalRatePerSecond = 0.0001
	cfg.DistinctSourceThreshold = 2
	cfg.OverflowBurst = 1
	cfg.OverflowRatePerSecond = 0.0001
	l, _ := newTestLimiter(t, cfg)
	a, b, c := KeyForAddr(v4(1, 1, 1, 1), 64), KeyForAddr(v4(2, 2, 2, 2), 64), KeyForAddr(v4(3, 3, 3, 3), 64)
	mustReason(t, l.Check(a), Allow) // global 3 -> 2
	mustReason(t, l.Check(b), Allow) // global 2 -> 1; window now full
	for range 5 {
		mustReason(t, l.Check(a), PerSource)
	}
	mustReason(t, l.Check(c), Allow) // overflow 1 -> 0, global 1 -> 0
	for range 5 {
		mustReason(t, l.Check(c), Overflow)
		mustReason(t, l.Check(b), PerSource)
	}
	want := LimiterStats{Accepted: 3, RejectedPerSource: 10, RejectedOverflow: 5, ProtectionModeEntries: 1,
		TrackedSources: 2, BucketEntries: 2, MaxBucketEntries: 16 * 16}
	if s := l.Stats(); s != want {
		t.Fatalf("stats = %+v, want %+v", s, want)
	}
}

func TestGlobalBucketIsCheckedLastAndCountedAsGlobal(t *testing.T) {
	cfg := generous()
	cfg.GlobalBurst = 2
	cfg.GlobalRatePerSecond = 0.5
	l, clk := newTestLimiter(t, cfg)
	mustReason(t, l.CheckAddr(v4(1, 0, 0, 1)), Allow)
	mustReason(t, l.CheckAddr(v4(1, 0, 0, 2)), Allow)
	d := l.CheckAddr(v4(1, 0, 0, 3))
	mustReason(t, d, Global)
	if d.RetryAfterSecs != 2 {
		t.Fatalf("retry = %d, want ceil(1/0.5) = 2", d.RetryAfterSecs)
	}
	clk.Advance(2 * time.Second)
	mustReason(t, l.CheckAddr(v4(1, 0, 0, 3)), Allow)
}

func TestNoRefundWhenTheGlobalBucketFails(t *testing.T) {
	cfg := generous()
	cfg.Burst = 2
	cfg.RatePerMinute = 0.006 // 0.0001 per second
	cfg.GlobalBurst = 1
	cfg.GlobalRatePerSecond = 1
	l, clk := newTestLimiter(t, cfg)
	a, b := KeyForAddr(v4(1, 1, 1, 1), 64), KeyForAddr(v4(2, 2, 2, 2), 64)
	mustReason(t, l.Check(b), Allow)  // takes the only global token
	mustReason(t, l.Check(a), Global) // a's first per-source token is spent anyway
	clk.Advance(time.Second)          // one global token back
	mustReason(t, l.Check(a), Allow)  // a's second and last token
	clk.Advance(time.Second)
	mustReason(t, l.Check(a), PerSource) // with a refund it would still have one
}

func TestPerSourceMapIsNotClearedOnWindowRotation(t *testing.T) {
	cfg := generous()
	cfg.Burst = 2
	cfg.RatePerMinute = 0.006
	cfg.Window = time.Second
	l, clk := newTestLimiter(t, cfg)
	src := KeyForAddr(v4(10, 0, 0, 9), 64)
	mustReason(t, l.Check(src), Allow)
	mustReason(t, l.Check(src), Allow)
	clk.Advance(5 * time.Second)
	mustReason(t, l.Check(src), PerSource) // new window, same empty bucket
	if s := l.Stats(); s.TrackedSources != 1 || s.BucketEntries != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestProtectionModeIsCountedOncePerWindow(t *testing.T) {
	cfg := generous()
	cfg.DistinctSourceThreshold = 2
	cfg.Window = time.Minute
	l, clk := newTestLimiter(t, cfg)
	for w := range 3 {
		for i := range uint32(10) {
			l.CheckAddr(v4n(uint32(w)<<8 | i))
		}
		if got, want := l.Stats().ProtectionModeEntries, uint64(w+1); got != want {
			t.Fatalf("window %d: protection entries = %d, want %d", w, got, want)
		}
		clk.Advance(time.Minute)
	}
}

func TestShardsRoundUpToAPowerOfTwo(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{0, 16}, {1, 1}, {3, 4}, {16, 16}, {17, 32}, {-5, 16}} {
		cfg := PublicReadDefaults()
		cfg.Shards = tt.in
		if got := NewLimiter(cfg, &ManualClock{}).Config().Shards; got != tt.want {
			t.Errorf("Shards %d -> %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestNewLimiterRejectsInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewLimiter accepted a negative rate")
		}
	}()
	cfg := PublicReadDefaults()
	cfg.GlobalRatePerSecond = -1
	NewLimiter(cfg, nil)
}

func TestReasonString(t *testing.T) {
	for r, want := range map[Reason]string{Allow: "allow", PerSource: "per_source", Overflow: "overflow", Global: "global", 9: "reason(9)"} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", r, got, want)
		}
	}
}

func ExampleLimiter() {
	cfg := HandshakeDefaults()
	clk := &ManualClock{}
	l := NewLimiter(cfg, clk)
	peer := netip.MustParseAddr("192.0.2.1")
	for range 20 {
		l.CheckAddr(peer)
	}
	d := l.CheckAddr(peer)
	fmt.Println(d.Reason, d.RetryAfterSecs)
	// Output: per_source 1
}

// TestMillionDistinctSourcesStayBounded runs the 1,000,000-source flood
// through a default limiter, spread over two windows, and checks that every
// structure stays within its bound.
func TestMillionDistinctSourcesStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 sources; skipped with -short")
	}
	cfg := PublicReadDefaults()
	l, clk := newTestLimiter(t, cfg)
	for i := range uint32(1_000_000) {
		if i%10_000 == 0 {
			clk.Advance(time.Second) // 100 s in all: two window rotations
		}
		l.CheckAddr(v4n(i + 1<<24))
	}
	s := l.Stats()
	if s.TrackedSources > 10_000 || s.BucketEntries > s.MaxBucketEntries || s.MaxBucketEntries != 16*625 {
		t.Fatalf("unbounded: %+v", s)
	}
	if s.ProtectionModeEntries != 2 {
		t.Fatalf("protection entries = %d, want 2 (one per window that filled)", s.ProtectionModeEntries)
	}
	if total := s.Accepted + s.RejectedPerSource + s.RejectedOverflow + s.RejectedGlobal; total != 1_000_000 {
		t.Fatalf("decisions sum to %d", total)
	}
	t.Logf("after 1,000,000 sources: %+v; heap held by a fresh run: %d bytes", s, heapAfterSources(t, PublicReadDefaults(), 1_000_000, time.Minute/2))
}

// TestConcurrentChecksNeverOverAdmit hammers one limiter from many
// goroutines with the clock stopped: exactly the global burst is admitted.
func TestConcurrentChecksNeverOverAdmit(t *testing.T) {
	cfg := generous()
	cfg.GlobalBurst = 500
	cfg.GlobalRatePerSecond = 1
	cfg.DistinctSourceThreshold = 32
	cfg.OverflowBurst = 1e6 // so only the global bucket limits
	l, _ := newTestLimiter(t, cfg)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				l.CheckAddr(v4n(uint32(w*1000 + i%64)))
			}
		})
	}
	testwait.WaitGroup(t, &wg, testwait.Long, "the 16 checkers' ends")
	s := l.Stats()
	if s.Accepted != 500 {
		t.Fatalf("accepted = %d, want exactly the global burst 500", s.Accepted)
	}
	if total := s.Accepted + s.RejectedPerSource + s.RejectedOverflow + s.RejectedGlobal; total != 16*200 {
		t.Fatalf("decisions sum to %d, want %d", total, 16*200)
	}
	if s.TrackedSources != 32 || s.ProtectionModeEntries != 1 {
		t.Fatalf("window: %+v", s)
	}
}
