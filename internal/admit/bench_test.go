package admit

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCheckKnownSource is the public-read hot path: one known source per
// goroutine, every layer wide open so each op runs all three layers.
func BenchmarkCheckKnownSource(b *testing.B) {
	cfg := generous()
	cfg.Burst = 1e12
	cfg.RatePerMinute = 1e12
	cfg.GlobalBurst = 1e12
	cfg.GlobalRatePerSecond = 1e12
	l := NewLimiter(cfg, SystemClock())
	var next atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := KeyForAddr(v4n(0x0a000000|next.Add(1)), 64)
		for pb.Next() {
			if !l.Check(key).Allowed() {
				b.Fatal("limited")
			}
		}
	})
}

// BenchmarkCheckDistinctSources feeds 1,000,000 distinct sources (cycled) at
// the default public-read config: the flood shape of the ddos run.
func BenchmarkCheckDistinctSources(b *testing.B) {
	const sources = 1_000_000
	keys := make([]SourceKey, sources)
	for i := range keys {
		keys[i] = KeyForAddr(v4n(uint32(i)), 64)
	}
	l := NewLimiter(PublicReadDefaults(), SystemClock())
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		l.Check(keys[i%sources])
	}
}

func BenchmarkKeyForAddr(b *testing.B) {
	for _, tt := range []struct {
		name string
		ip   netip.Addr
	}{
		{"v4", netip.MustParseAddr("203.0.113.9")},
		{"v6", netip.MustParseAddr("2001:db8:1234:5678:9abc:def0:1234:5678")},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink SourceKey
			for range b.N {
				sink = KeyForAddr(tt.ip, 64)
			}
			_ = sink
		})
	}
}

// BenchmarkCheckAddrKnownSource is what a server pays per request when it
// hashes the peer every time instead of caching the key per connection.
func BenchmarkCheckAddrKnownSource(b *testing.B) {
	cfg := generous()
	cfg.GlobalBurst = 1e12
	cfg.GlobalRatePerSecond = 1e12
	cfg.Burst = 1e12
	cfg.RatePerMinute = 1e12
	l := NewLimiter(cfg, SystemClock())
	ip := netip.MustParseAddr("203.0.113.9")
	b.ReportAllocs()
	for range b.N {
		l.CheckAddr(ip)
	}
}

// BenchmarkHeapAfterMillionSources reports, as live-heap-bytes, the heap a
// default-config public-read limiter still holds after 1,000,000 distinct
// sources, one check each, inside one window (the worst case: the window
// fills and protection mode holds for the rest). It measures once whatever
// b.N is, so -benchtime cannot multiply its cost.
func BenchmarkHeapAfterMillionSources(b *testing.B) {
	heap := heapAfterSources(b, PublicReadDefaults(), 1_000_000, time.Minute/2)
	for range b.N {
	}
	b.ReportMetric(float64(heap), "live-heap-bytes")
}

// BenchmarkLimiterHeapDistinctSources reports the heap the default-profile
// handshake limiter (the one `ddos` meets) holds after 1,000,000 and after
// 10,000,000 distinct IPv4 sources, one check each, arriving at the rate the
// ddos client reaches on the 2-core machine (1,000,000 per 65 s, so 10,000,000
// span about 11 of its 60 s windows): live-heap-bytes after the last source,
// peak-heap-bytes the most seen at any millionth source (after a GC), and the
// per-source buckets and tracked sources it ends with. Bounded memory means
// the two sizes report the same order. Like the million-source benchmark it
// measures once whatever b.N is.
func BenchmarkLimiterHeapDistinctSources(b *testing.B) {
	const perSource = 65 * time.Second / 1_000_000
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			var peak uint64
			var stats LimiterStats
			heap := heapAfterSourcesEach(b, HandshakeDefaults(), n, time.Duration(n)*perSource, func(h uint64, s LimiterStats) {
				peak = max(peak, h)
				stats = s
			})
			for range b.N {
			}
			b.ReportMetric(float64(heap), "live-heap-bytes")
			b.ReportMetric(float64(peak), "peak-heap-bytes")
			b.ReportMetric(float64(stats.BucketEntries), "bucket-entries")
			b.ReportMetric(float64(stats.TrackedSources), "tracked-sources")
		})
	}
}

// heapAfterSources runs n distinct IPv4 sources through a limiter of cfg and
// returns the heap growth it still holds.
func heapAfterSources(tb testing.TB, cfg LimiterConfig, n int, spread time.Duration) uint64 {
	return heapAfterSourcesEach(tb, cfg, n, spread, nil)
}

// heapAfterSourcesEach is heapAfterSources calling each, when not nil, with
// the heap growth (after a GC) and the limiter's statistics at every
// millionth source and at the end.
func heapAfterSourcesEach(tb testing.TB, cfg LimiterConfig, n int, spread time.Duration, each func(heap uint64, s LimiterStats)) uint64 {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	clk := &ManualClock{}
	l := NewLimiter(cfg, clk)
	growth := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc < before.HeapAlloc {
			return 0
		}
		return m.HeapAlloc - before.HeapAlloc
	}
	step := spread / time.Duration(n)
	for i := range n {
		clk.Advance(step)
		l.CheckAddr(v4n(uint32(i) + 1<<24))
		if each != nil && (i+1)%1_000_000 == 0 {
			each(growth(), l.Stats())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	s := l.Stats()
	if s.BucketEntries > s.MaxBucketEntries || s.TrackedSources > int(l.Config().DistinctSourceThreshold) {
		tb.Fatalf("unbounded state: %+v", s)
	}
	runtime.KeepAlive(l)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
