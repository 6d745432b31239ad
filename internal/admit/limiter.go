package admit

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Reason says which layer decided a check.
type Reason uint8

const (
	// Allow means every layer passed.
	Allow Reason = iota
	// PerSource means the source's own bucket was empty.
	PerSource
	// Overflow means the source was new while the distinct-source window
	// was full (protection mode) and the shared overflow bucket was empty.
	Overflow
	// Global means the global bucket was empty.
	Global
)

// String returns "allow", "per_source", "overflow" or "global".
func (r Reason) String() string {
	switch r {
	case Allow:
		return "allow"
	case PerSource:
		return "per_source"
	case Overflow:
		return "overflow"
	case Global:
		return "global"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Decision is the outcome of one check. RetryAfterSecs is the whole-second
// wait hint (at least 1) when the check was limited, 0 when allowed.
type Decision struct {
	Reason         Reason
	RetryAfterSecs uint64
}

// Allowed reports whether the check passed.
func (d Decision) Allowed() bool { return d.Reason == Allow }

// LimiterStats is a snapshot of a Limiter's counters and gauges.
type LimiterStats struct {
	Accepted              uint64 // checks allowed
	RejectedPerSource     uint64 // checks limited with reason PerSource
	RejectedOverflow      uint64 // checks limited with reason Overflow
	RejectedGlobal        uint64 // checks limited with reason Global
	ProtectionModeEntries uint64 // windows that filled up, counted once per window
	TrackedSources        int    // distinct sources in the current window
	BucketEntries         int    // per-source buckets held, all shards
	MaxBucketEntries      int    // the bound on BucketEntries
}

// bucketEntry is one per-source bucket in a shard's dense array. A bucket
// is keyed by the source's compact id (the first 8 bytes of its SHA-256
// key), as the distinct-source window already is: 24 bytes an entry and an
// 8-byte map key instead of 48 and 32, which at the 10,000 sources a window
// tracks is about 0.6 MB of a small server's live heap (docs/benchmarks.md,
// LinkKeys server memory). Two sources share a bucket only if their keys
// agree in 64 bits: about 3e-12 for 10,000 sources, and not something a
// client can arrange, since it does not choose the canonical string its
// address hashes from.
type bucketEntry struct {
	key uint64
	tokens
}

// shard holds the per-source buckets whose compact id maps to it. entries is
// dense so the pruning scans stay cache-friendly; index maps a compact id to
// its slot.
type shard struct {
	mu      sync.Mutex
	index   map[uint64]int32
	entries []bucketEntry
	_       [64]byte // keep neighbouring shards' locks off one cache line
}

// window is the tumbling distinct-source window.
type window struct {
	mu                sync.Mutex
	start             time.Duration
	tracked           map[uint64]struct{}
	protectionCounted bool
}

type lockedBucket struct {
	mu sync.Mutex
	tokens
	_ [64]byte
}

// Limiter is the three-layer admission limiter described in the package
// documentation. It is safe for concurrent use.
type Limiter struct {
	cfg   LimiterConfig
	clock Clock

	perSourceRate  float64 // tokens per second
	maxPerShard    int
	shardMask      uint64
	shards         []shard
	win            window
	overflow       lockedBucket
	global         lockedBucket
	accepted       atomic.Uint64
	rejPerSource   atomic.Uint64
	rejOverflow    atomic.Uint64
	rejGlobal      atomic.Uint64
	protection     atomic.Uint64
	trackedSources atomic.Int64
}

// NewLimiter returns a limiter for cfg (zero fields take their documented
// defaults) reading time from clock (nil means SystemClock). Every bucket
// starts full. It panics if cfg.Validate reports a problem, since a config
// should be validated where it is parsed.
func NewLimiter(cfg LimiterConfig, clock Clock) *Limiter {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	if clock == nil {
		clock = SystemClock()
	}
	now := clock.Now()
	perShard := ceilDiv(cfg.DistinctSourceThreshold, uint64(cfg.Shards))
	perShard = min(max(perShard, 16), math.MaxInt32)
	l := &Limiter{
		cfg:           cfg,
		clock:         clock,
		perSourceRate: cfg.RatePerMinute / 60,
		maxPerShard:   int(perShard),
		shardMask:     uint64(cfg.Shards - 1),
		shards:        make([]shard, cfg.Shards),
	}
	for i := range l.shards {
		l.shards[i].index = make(map[uint64]int32)
	}
	l.win.start = now
	l.win.tracked = make(map[uint64]struct{})
	l.overflow.tokens = tokens{tokens: cfg.OverflowBurst, last: now}
	l.global.tokens = tokens{tokens: cfg.GlobalBurst, last: now}
	return l
}

// Config returns the configuration in force, defaults filled in.
func (l *Limiter) Config() LimiterConfig {
	cfg := l.cfg
	cfg.TrustedProxies = append([]netip.Prefix(nil), cfg.TrustedProxies...)
	return cfg
}

// CheckAddr checks the source ip, normalised with the configured IPv6 prefix.
func (l *Limiter) CheckAddr(ip netip.Addr) Decision {
	return l.Check(KeyForAddr(ip, l.cfg.IPv6Prefix))
}

// admission is the outcome of the distinct-source window.
type admission uint8

const (
	known admission = iota
	newAdmitted
	overflowed
)

// admit rotates the window if it is due and classifies compact.
func (l *Limiter) admit(compact uint64, now time.Duration) admission {
	w := &l.win
	w.mu.Lock()
	defer w.mu.Unlock()
	if now-w.start >= l.cfg.Window {
		w.start = now
		w.tracked = make(map[uint64]struct{})
		w.protectionCounted = false
		l.trackedSources.Store(0)
	}
	if _, ok := w.tracked[compact]; ok {
		return known
	}
	if uint64(len(w.tracked)) < l.cfg.DistinctSourceThreshold {
		w.tracked[compact] = struct{}{}
		l.trackedSources.Store(int64(len(w.tracked)))
		return newAdmitted
	}
	if !w.protectionCounted {
		w.protectionCounted = true
		l.protection.Add(1)
	}
	return overflowed
}

// Check decides one request or connection from key.
func (l *Limiter) Check(key SourceKey) Decision {
	now := l.clock.Now()
	compact := key.compact()
	switch l.admit(compact, now) {
	case known, newAdmitted:
		if ok, retry := l.consumePerSource(&l.shards[compact&l.shardMask], compact, now); !ok {
			l.rejPerSource.Add(1)
			return Decision{Reason: PerSource, RetryAfterSecs: retry}
		}
	case overflowed:
		b := &l.overflow
		b.mu.Lock()
		ok, retry := b.tryConsume(now, l.cfg.OverflowBurst, l.cfg.OverflowRatePerSecond)
		b.mu.Unlock()
		if !ok {
			l.rejOverflow.Add(1)
			return Decision{Reason: Overflow, RetryAfterSecs: retry}
		}
	}
	g := &l.global
	g.mu.Lock()
	ok, retry := g.tryConsume(now, l.cfg.GlobalBurst, l.cfg.GlobalRatePerSecond)
	g.mu.Unlock()
	if !ok {
		l.rejGlobal.Add(1)
		return Decision{Reason: Global, RetryAfterSecs: retry}
	}
	l.accepted.Add(1)
	return Decision{Reason: Allow}
}

// consumePerSource takes a token from key's bucket in s, creating a full
// bucket (after pruning a full shard) if the key has none.
func (l *Limiter) consumePerSource(s *shard, key uint64, now time.Duration) (bool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[key]
	if !ok {
		if len(s.entries) >= l.maxPerShard {
			l.prune(s, now)
		}
		i = int32(len(s.entries))
		s.entries = append(s.entries, bucketEntry{key: key, tokens: tokens{tokens: l.cfg.Burst, last: now}})
		s.index[key] = i
	}
	return s.entries[i].tryConsume(now, l.cfg.Burst, l.perSourceRate)
}

// prune brings a full shard below its bound: first it drops every bucket that
// would be full again by now (dropping those changes no decision), then, if
// that was not enough, the least recently used ones. The second pass can
// forgive a little to a source being limited; that is the price of a bounded
// map, and reaching it means more sources are being limited than the
// threshold, which the global bucket is there to catch.
func (l *Limiter) prune(s *shard, now time.Duration) {
	for i := 0; i < len(s.entries); {
		if s.entries[i].wouldBeFull(now, l.cfg.Burst, l.perSourceRate) {
			s.removeAt(i)
			continue
		}
		i++
	}
	for len(s.entries) >= l.maxPerShard && len(s.entries) > 0 {
		oldest := 0
		for i := 1; i < len(s.entries); i++ {
			if s.entries[i].last < s.entries[oldest].last {
				oldest = i
			}
		}
		s.removeAt(oldest)
	}
}

// removeAt drops entry i by moving the last entry into its slot.
func (s *shard) removeAt(i int) {
	last := len(s.entries) - 1
	delete(s.index, s.entries[i].key)
	if i != last {
		s.entries[i] = s.entries[last]
		s.index[s.entries[i].key] = int32(i)
	}
	s.entries[last] = bucketEntry{}
	s.entries = s.entries[:last]
}

// Stats returns the current counters and gauges. BucketEntries takes each
// shard's lock in turn, so it is a consistent count per shard, not a global
// snapshot.
func (l *Limiter) Stats() LimiterStats {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return LimiterStats{
		Accepted:              l.accepted.Load(),
		RejectedPerSource:     l.rejPerSource.Load(),
		RejectedOverflow:      l.rejOverflow.Load(),
		RejectedGlobal:        l.rejGlobal.Load(),
		ProtectionModeEntries: l.protection.Load(),
		TrackedSources:        int(l.trackedSources.Load()),
		BucketEntries:         n,
		MaxBucketEntries:      l.maxPerShard * len(l.shards),
	}
}

// ShardOf returns the index of the shard holding key's per-source bucket, so
// tests can check that sources spread over shards without timing anything.
func (l *Limiter) ShardOf(key SourceKey) int { return int(key.compact() & l.shardMask) }
