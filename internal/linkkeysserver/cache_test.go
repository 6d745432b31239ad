package linkkeysserver

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/testwait"
)

// pubkey_cache_test.rs, ported.

func newTestCache[K comparable](t *testing.T, cfg CacheConfig) (*Cache[K], *admit.ManualClock) {
	t.Helper()
	clock := &admit.ManualClock{}
	cfg.Clock = clock
	return NewCache[K](cfg), clock
}

// countingLoader returns value and counts its calls.
func countingLoader(n *atomic.Int64, value []byte, found bool) Loader {
	return func() ([]byte, bool, error) {
		n.Add(1)
		return value, found, nil
	}
}

func TestCacheHitDoesNotReinvokeTheLoader(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	var n atomic.Int64
	for range 5 {
		v, found, err := c.GetOrLoad("k", countingLoader(&n, []byte("v"), true))
		if err != nil || !found || string(v) != "v" {
			t.Fatalf("got %q %v %v", v, found, err)
		}
	}
	if n.Load() != 1 {
		t.Errorf("loader ran %d times, want 1", n.Load())
	}
	if s := c.Stats(); s.Misses != 1 || s.Hits != 4 || s.Entries != 1 || s.Bytes != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestCacheHitReturnsTheSameBackingAllocation(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	var n atomic.Int64
	a, _, _ := c.GetOrLoad("k", countingLoader(&n, []byte("value"), true))
	b, _, _ := c.GetOrLoad("k", countingLoader(&n, []byte("other"), true))
	if &a[0] != &b[0] {
		t.Error("hit returned a copy, want the stored bytes")
	}
}

func TestCacheEvictionKeepsEntriesAndBytesWithinBudget(t *testing.T) {
	c, clock := newTestCache[int](t, CacheConfig{MaxEntries: 4, MaxBytes: 100})
	var n atomic.Int64
	for i := range 50 {
		clock.Advance(time.Millisecond) // distinct last-use times
		if _, _, err := c.GetOrLoad(i, countingLoader(&n, make([]byte, 10+i%30), true)); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		if s.Entries > 4 || s.Bytes > 100 {
			t.Fatalf("after %d inserts: %d entries, %d bytes; budget 4 and 100", i+1, s.Entries, s.Bytes)
		}
	}
	if c.Stats().Evictions == 0 {
		t.Error("no evictions counted")
	}
}

func TestCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	c, clock := newTestCache[int](t, CacheConfig{MaxEntries: 1, MaxBytes: 1 << 20})
	var n atomic.Int64
	c.GetOrLoad(1, countingLoader(&n, []byte("a"), true))
	clock.Advance(time.Millisecond)
	c.GetOrLoad(2, countingLoader(&n, []byte("b"), true))
	clock.Advance(time.Millisecond)
	c.GetOrLoad(2, countingLoader(&n, []byte("b"), true))
	if n.Load() != 2 {
		t.Errorf("the newest entry was evicted: %d loads, want 2", n.Load())
	}
}

func TestCacheOversizedResponseIsServedButNotCached(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{MaxBytes: 8})
	var n atomic.Int64
	big := bytes.Repeat([]byte("x"), 9)
	for range 2 {
		v, found, err := c.GetOrLoad("big", countingLoader(&n, big, true))
		if err != nil || !found || len(v) != 9 {
			t.Fatalf("got %d bytes %v %v", len(v), found, err)
		}
	}
	if n.Load() != 2 || c.Stats().Entries != 0 {
		t.Errorf("%d loads and %d entries, want 2 and 0", n.Load(), c.Stats().Entries)
	}
}

func TestCacheNegativeEntriesSuppressLookupsAndExpireQuickly(t *testing.T) {
	c, clock := newTestCache[string](t, CacheConfig{TTL: time.Minute, NegativeTTL: time.Second})
	var n atomic.Int64
	for range 3 {
		if _, found, err := c.GetOrLoad("missing", countingLoader(&n, nil, false)); found || err != nil {
			t.Fatalf("found %v err %v", found, err)
		}
	}
	if n.Load() != 1 || c.Stats().NegativeHits != 2 {
		t.Errorf("%d loads, %d negative hits; want 1 and 2", n.Load(), c.Stats().NegativeHits)
	}
	clock.Advance(time.Second)
	c.GetOrLoad("missing", countingLoader(&n, nil, false))
	if n.Load() != 2 {
		t.Errorf("negative entry not expired after its TTL: %d loads", n.Load())
	}
}

func TestCacheMisconfiguredNegativeTTLIsClamped(t *testing.T) {
	var logs bytes.Buffer
	for _, neg := range []time.Duration{time.Minute, 2 * time.Minute} {
		c := NewCache[string](CacheConfig{TTL: time.Minute, NegativeTTL: neg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if ttl, got := c.TTLs(); ttl != time.Minute || got != 6*time.Second {
			t.Errorf("negative TTL %v: clamped to %v, want 6s", neg, got)
		}
	}
	if !strings.Contains(logs.String(), "clamping") {
		t.Errorf("no warning logged: %q", logs.String())
	}
	c := NewCache[string](CacheConfig{TTL: 5 * time.Millisecond, NegativeTTL: time.Second})
	if _, got := c.TTLs(); got != time.Millisecond {
		t.Errorf("tiny TTL: negative clamped to %v, want the 1 ms floor", got)
	}
}

func TestCacheConcurrentMissesForTheSameKeyCoalesce(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	release := make(chan struct{})
	var loads atomic.Int64
	load := func() ([]byte, bool, error) {
		loads.Add(1)
		<-release
		return []byte("v"), true, nil
	}
	var wg sync.WaitGroup
	results := make([]string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, _ := c.GetOrLoad("k", load)
			results[i] = string(v)
		}()
	}
	eventually(t, "15 callers waiting on the load", func() bool { return c.Stats().CoalescedLoads == 15 })
	close(release)
	testwait.WaitGroup(t, &wg, testwait.Long, "the 16 callers' returns")
	if loads.Load() != 1 {
		t.Errorf("loader ran %d times, want 1", loads.Load())
	}
	for i, r := range results {
		if r != "v" {
			t.Errorf("caller %d got %q", i, r)
		}
	}
	if s := c.Stats(); s.Misses != 1 || s.CoalescedLoads != 15 {
		t.Errorf("stats %+v, want 1 miss and 15 coalesced", s)
	}
}

func TestCacheConcurrentMissesForDifferentKeysDoNotBlockEachOther(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.GetOrLoad("slow", func() ([]byte, bool, error) {
			close(started)
			<-release
			return []byte("s"), true, nil
		})
	}()
	testwait.Recv(t, started, testwait.Long, "start of the slow load")
	// If "fast" waited for "slow", this would never return: "slow" is only released afterwards.
	var v []byte
	var err error
	testwait.Call(t, testwait.Long, "the fast key's load while the slow one waits", func() {
		v, _, err = c.GetOrLoad("fast", func() ([]byte, bool, error) { return []byte("f"), true, nil })
	})
	if err != nil || string(v) != "f" {
		t.Errorf("fast key: %q %v", v, err)
	}
	close(release)
	testwait.Recv(t, done, testwait.Long, "the slow key's return")
}

func TestCacheKeysNeverCrossBoundaries(t *testing.T) {
	type appKey struct{ Subject, Domain, Application, Instance string }
	c, _ := newTestCache[appKey](t, CacheConfig{MaxEntries: 16})
	keys := []appKey{
		{"alice", "example.com", "app", "1"},
		{"bob", "example.com", "app", "1"},
		{"alice", "example.org", "app", "1"},
		{"alice", "example.com", "other", "1"},
		{"alice", "example.com", "app", "2"},
	}
	for i, k := range keys {
		want := []byte{byte(i)}
		v, _, _ := c.GetOrLoad(k, func() ([]byte, bool, error) { return want, true, nil })
		if !bytes.Equal(v, want) {
			t.Errorf("key %+v got another key's value %v", k, v)
		}
	}
	if c.Stats().Misses != uint64(len(keys)) {
		t.Errorf("%d loads for %d distinct keys", c.Stats().Misses, len(keys))
	}
}

func TestCacheInvalidate(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	var n atomic.Int64
	for _, k := range []string{"a", "b", "c"} {
		c.GetOrLoad(k, countingLoader(&n, []byte(k), true))
	}
	c.Invalidate("b")
	for _, k := range []string{"a", "b", "c"} {
		c.GetOrLoad(k, countingLoader(&n, []byte(k), true))
	}
	if n.Load() != 4 {
		t.Errorf("Invalidate(b): %d loads, want 4 (only b reloaded)", n.Load())
	}
	c.InvalidateAll()
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Errorf("after InvalidateAll: %+v", s)
	}
	for _, k := range []string{"a", "b", "c"} {
		c.GetOrLoad(k, countingLoader(&n, []byte(k), true))
	}
	if n.Load() != 7 {
		t.Errorf("InvalidateAll: %d loads, want 7", n.Load())
	}
}

func TestCacheInvalidateDuringALoadDropsItsResult(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	c.GetOrLoad("k", func() ([]byte, bool, error) {
		c.Invalidate("k") // a writer invalidates while the old snapshot loads
		return []byte("stale"), true, nil
	})
	if c.Stats().Entries != 0 {
		t.Error("a load started before Invalidate was stored")
	}
}

func TestCacheExpiredEntriesAreReloaded(t *testing.T) {
	c, clock := newTestCache[string](t, CacheConfig{TTL: time.Minute})
	var n atomic.Int64
	c.GetOrLoad("k", countingLoader(&n, []byte("old"), true))
	clock.Advance(time.Minute)
	v, _, _ := c.GetOrLoad("k", countingLoader(&n, []byte("new"), true))
	if string(v) != "new" || n.Load() != 2 {
		t.Errorf("after the TTL got %q with %d loads, want a reload", v, n.Load())
	}
}

func TestCacheLoaderErrorsAreNotCached(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	boom := errors.New("db down")
	var n atomic.Int64
	for range 3 {
		_, _, err := c.GetOrLoad("k", func() ([]byte, bool, error) { n.Add(1); return nil, false, boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
	}
	if n.Load() != 3 || c.Stats().Entries != 0 {
		t.Errorf("%d loads, %d entries; want 3 and 0", n.Load(), c.Stats().Entries)
	}
}

func TestCachePanickingLoaderReleasesWaiters(t *testing.T) {
	c, _ := newTestCache[string](t, CacheConfig{})
	release := make(chan struct{})
	waiterErr := make(chan error, 1)
	go func() {
		defer func() { recover() }()
		c.GetOrLoad("k", func() ([]byte, bool, error) { <-release; panic("loader bug") })
	}()
	eventually(t, "the load to start", func() bool { return c.Stats().Misses == 1 })
	go func() {
		_, _, err := c.GetOrLoad("k", func() ([]byte, bool, error) { return []byte("x"), true, nil })
		waiterErr <- err
	}()
	eventually(t, "a waiter", func() bool { return c.Stats().CoalescedLoads == 1 })
	close(release)
	if err := testwait.Recv(t, waiterErr, testwait.Long, "the waiter's return"); err == nil {
		t.Error("waiter of a panicked load got no error")
	}
	// The next lookup loads afresh.
	if v, _, err := c.GetOrLoad("k", func() ([]byte, bool, error) { return []byte("x"), true, nil }); err != nil || string(v) != "x" {
		t.Errorf("after the panic: %q %v", v, err)
	}
}

func TestDomainSnapshotKeysAreIndependent(t *testing.T) {
	c, _ := newTestCache[snapshotKey](t, CacheConfig{})
	var keysN, revsN atomic.Int64
	k, _, _ := c.GetOrLoad(snapDomainKeys, countingLoader(&keysN, []byte("keys"), true))
	r, _, _ := c.GetOrLoad(snapRevocations, countingLoader(&revsN, []byte("revs"), true))
	if string(k) != "keys" || string(r) != "revs" || keysN.Load() != 1 || revsN.Load() != 1 {
		t.Errorf("keys %q revs %q loads %d/%d", k, r, keysN.Load(), revsN.Load())
	}
	c.Invalidate(snapRevocations)
	c.GetOrLoad(snapDomainKeys, countingLoader(&keysN, []byte("keys"), true))
	if keysN.Load() != 1 {
		t.Error("invalidating revocations dropped the domain keys snapshot")
	}
}
