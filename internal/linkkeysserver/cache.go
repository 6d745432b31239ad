package linkkeysserver

import (
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
)

// Defaults of the snapshot cache (upstream's DOMAIN_SNAPSHOT_CACHE).
const (
	DefaultCacheMaxEntries  = 8
	DefaultCacheMaxBytes    = 8 << 20
	DefaultCacheNegativeTTL = time.Second
)

// CacheConfig configures a Cache. Zero fields mean the defaults.
type CacheConfig struct {
	// MaxEntries bounds the cached values, positive and negative (default 8).
	MaxEntries int
	// MaxBytes bounds the summed size of cached values (default 8 MiB). A
	// value larger than MaxBytes is returned to its caller but not stored.
	MaxBytes int64
	// TTL is how long a found value is served (default 60 s).
	TTL time.Duration
	// NegativeTTL is how long a not-found result is served (default 1 s). A
	// NegativeTTL not strictly below TTL is clamped to TTL/10 (at least
	// 1 ms) and a warning is logged.
	NegativeTTL time.Duration
	// Clock is the monotonic time source (nil means admit.SystemClock()).
	Clock admit.Clock
	// Logger receives the clamping warning (nil discards it).
	Logger *slog.Logger
}

// CacheStats are a Cache's counters and gauges. Every lookup is counted in
// exactly one of Hits, NegativeHits, Misses (this caller ran the loader) and
// CoalescedLoads (this caller waited for another caller's load).
type CacheStats struct {
	Hits           uint64
	Misses         uint64
	Evictions      uint64
	CoalescedLoads uint64
	NegativeHits   uint64
	Entries        int64
	Bytes          int64
}

func (a CacheStats) add(b CacheStats) CacheStats {
	a.Hits += b.Hits
	a.Misses += b.Misses
	a.Evictions += b.Evictions
	a.CoalescedLoads += b.CoalescedLoads
	a.NegativeHits += b.NegativeHits
	a.Entries += b.Entries
	a.Bytes += b.Bytes
	return a
}

// Loader produces the value for a cache miss: found=false is a negative
// result (cached for NegativeTTL); a non-nil error is returned to the caller
// and every caller waiting on the same load, and is never cached.
type Loader func() (value []byte, found bool, err error)

// Cache is a sharded, single-flight, TTL response cache bounded in entries
// and bytes, after LinkKeys' pubkey_cache: concurrent misses on one key run
// the loader once; found and not-found results have their own TTLs; expired
// entries are dropped on lookup; when a bound is exceeded, the least recently
// used entries are evicted by a bounded round-robin scan over the shards.
// Values are returned as stored (the same backing array on every hit), so
// callers must not modify them. It is safe for concurrent use.
type Cache[K comparable] struct {
	shards     []cacheShard[K]
	seed       maphash.Seed
	maxEntries int64
	maxBytes   int64
	ttl        time.Duration
	negTTL     time.Duration
	clock      admit.Clock
	cursor     atomic.Uint32

	entries      atomic.Int64
	bytes        atomic.Int64
	hits         atomic.Uint64
	misses       atomic.Uint64
	evictions    atomic.Uint64
	coalesced    atomic.Uint64
	negativeHits atomic.Uint64
}

type cacheShard[K comparable] struct {
	mu       sync.Mutex
	items    map[K]*cacheEntry
	inflight map[K]*cacheFlight
	gen      uint64 // bumped by invalidation; a load started before is not stored
	_        [40]byte
}

type cacheEntry struct {
	value    []byte
	found    bool
	expires  time.Duration
	lastUsed time.Duration
}

type cacheFlight struct {
	done  chan struct{}
	value []byte
	found bool
	err   error
}

// NewCache returns an empty cache for cfg.
func NewCache[K comparable](cfg CacheConfig) *Cache[K] {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultCacheMaxEntries
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultCacheMaxBytes
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultSnapshotTTL
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = DefaultCacheNegativeTTL
	}
	if cfg.NegativeTTL >= cfg.TTL {
		clamped := max(cfg.TTL/10, time.Millisecond)
		if cfg.Logger != nil {
			cfg.Logger.Warn("linkkeysserver: cache negative TTL is not shorter than the positive TTL; clamping it",
				"negative_ttl", cfg.NegativeTTL, "ttl", cfg.TTL, "clamped_to", clamped)
		}
		cfg.NegativeTTL = clamped
	}
	if cfg.Clock == nil {
		cfg.Clock = admit.SystemClock()
	}
	n := min(16, cfg.MaxEntries)
	c := &Cache[K]{
		shards:     make([]cacheShard[K], n),
		seed:       maphash.MakeSeed(),
		maxEntries: int64(cfg.MaxEntries),
		maxBytes:   cfg.MaxBytes,
		ttl:        cfg.TTL,
		negTTL:     cfg.NegativeTTL,
		clock:      cfg.Clock,
	}
	for i := range c.shards {
		c.shards[i].items = make(map[K]*cacheEntry)
		c.shards[i].inflight = make(map[K]*cacheFlight)
	}
	return c
}

// TTLs returns the positive and (possibly clamped) negative TTL in force.
func (c *Cache[K]) TTLs() (ttl, negative time.Duration) { return c.ttl, c.negTTL }

func (c *Cache[K]) shard(key K) *cacheShard[K] {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.Comparable(c.seed, key)%uint64(len(c.shards))]
}

// GetOrLoad returns the cached value for key, or runs load once for all
// concurrent callers missing on key and caches its result. found=false is a
// (possibly cached) negative result. A panicking loader releases its waiters
// with an error and re-panics in the loading caller.
func (c *Cache[K]) GetOrLoad(key K, load Loader) (value []byte, found bool, err error) {
	s := c.shard(key)
	now := c.clock.Now()
	s.mu.Lock()
	if e := s.items[key]; e != nil {
		if now < e.expires {
			e.lastUsed = now
			v, f := e.value, e.found
			s.mu.Unlock()
			if f {
				c.hits.Add(1)
			} else {
				c.negativeHits.Add(1)
			}
			return v, f, nil
		}
		c.removeLocked(s, key, e)
	}
	if f := s.inflight[key]; f != nil {
		s.mu.Unlock()
		c.coalesced.Add(1)
		<-f.done
		return f.value, f.found, f.err
	}
	f := &cacheFlight{done: make(chan struct{})}
	s.inflight[key] = f
	gen := s.gen
	s.mu.Unlock()
	c.misses.Add(1)

	finished := false
	defer func() {
		if !finished {
			f.err = fmt.Errorf("linkkeysserver: cache loader panicked")
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			close(f.done)
		}
	}()
	f.value, f.found, f.err = load()
	finished = true

	s.mu.Lock()
	delete(s.inflight, key)
	stored := false
	if f.err == nil && s.gen == gen && int64(len(f.value)) <= c.maxBytes {
		ttl := c.ttl
		if !f.found {
			ttl = c.negTTL
		}
		done := c.clock.Now()
		if old := s.items[key]; old != nil {
			c.removeLocked(s, key, old)
		}
		s.items[key] = &cacheEntry{value: f.value, found: f.found, expires: done + ttl, lastUsed: done}
		c.entries.Add(1)
		c.bytes.Add(int64(len(f.value)))
		stored = true
	}
	s.mu.Unlock()
	close(f.done)
	if stored {
		c.evict()
	}
	return f.value, f.found, f.err
}

func (c *Cache[K]) removeLocked(s *cacheShard[K], key K, e *cacheEntry) {
	delete(s.items, key)
	c.entries.Add(-1)
	c.bytes.Add(-int64(len(e.value)))
}

// evict drops least recently used entries, shard by shard in round-robin
// order, until both bounds hold or shards*8 attempts have been made.
func (c *Cache[K]) evict() {
	attempts := len(c.shards) * 8
	for i := 0; i < attempts && (c.entries.Load() > c.maxEntries || c.bytes.Load() > c.maxBytes); i++ {
		s := &c.shards[int(c.cursor.Add(1))%len(c.shards)]
		s.mu.Lock()
		var victim K
		var ve *cacheEntry
		for k, e := range s.items {
			if ve == nil || e.lastUsed < ve.lastUsed {
				victim, ve = k, e
			}
		}
		if ve != nil {
			c.removeLocked(s, victim, ve)
			c.evictions.Add(1)
		}
		s.mu.Unlock()
	}
}

// Invalidate removes key's entry; a load of key already running is not
// stored when it finishes.
func (c *Cache[K]) Invalidate(key K) {
	s := c.shard(key)
	s.mu.Lock()
	if e := s.items[key]; e != nil {
		c.removeLocked(s, key, e)
	}
	s.gen++
	s.mu.Unlock()
}

// InvalidateAll removes every entry; loads already running are not stored.
func (c *Cache[K]) InvalidateAll() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.items {
			c.removeLocked(s, k, e)
		}
		s.gen++
		s.mu.Unlock()
	}
}

// Stats returns the counters and gauges.
func (c *Cache[K]) Stats() CacheStats {
	return CacheStats{
		Hits:           c.hits.Load(),
		Misses:         c.misses.Load(),
		Evictions:      c.evictions.Load(),
		CoalescedLoads: c.coalesced.Load(),
		NegativeHits:   c.negativeHits.Load(),
		Entries:        c.entries.Load(),
		Bytes:          c.bytes.Load(),
	}
}
