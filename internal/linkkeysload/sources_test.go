package linkkeysload

import (
	"testing"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/engine"
)

// TestConnectionsSources: connections' default source count is the fewest sources that
// keep every source within the server's default per-source burst, the preflight connection
// included, never below the seed's default and never above the distinct-source threshold.
func TestConnectionsSources(t *testing.T) {
	lim := admit.HandshakeDefaults()
	burst := uint64(lim.Burst)
	seed := uint64(DefaultClientIPCount)
	for _, count := range []uint64{0, 1, burst*seed - 1, burst * seed, burst*seed + 1, 3000, 200000, 1 << 31} {
		for _, pre := range []bool{true, false} {
			// The first source's handshakes: its round-robin share, plus the preflight connection.
			first := func(n uint64) uint64 {
				f := (count + n - 1) / n
				if pre {
					f++
				}
				return f
			}
			n := uint64(ConnectionsSources(uint32(count), pre))
			switch {
			case n < seed:
				t.Errorf("count %d: %d sources, fewer than the seed's %d", count, n, seed)
			case n > lim.DistinctSourceThreshold:
				t.Errorf("count %d: %d sources, above the distinct-source threshold %d", count, n, lim.DistinctSourceThreshold)
			case n < lim.DistinctSourceThreshold && first(n) > burst:
				t.Errorf("count %d (preflight %v): %d sources: the first makes %d handshakes, above the burst %d", count, pre, n, first(n), burst)
			case n > seed && first(n-1) <= burst:
				t.Errorf("count %d (preflight %v): %d sources, one fewer would do", count, pre, n)
			}
		}
	}
}

// TestInSegment: a segment's uses take its part of each range and of the sockets; the parts of all
// segments tile the whole run's, and the whole run's uses come back unchanged.
func TestInSegment(t *testing.T) {
	uses := []SourceUse{{Range: SourceRange{First: IPv4(0x7f000100), Count: 10}, Sockets: 101, MustHold: true}}
	if got := InSegment(uses, engine.Segment{}); &got[0] != &uses[0] {
		t.Error("the whole run's uses were copied or changed")
	}
	var addrs uint32
	var sockets int64
	for i := range 4 {
		got := InSegment(uses, engine.Segment{Index: i, Count: 4})
		u := got[0]
		if want := IPv4(0x7f000100) + IPv4(addrs); u.Range.First != want || !u.MustHold {
			t.Errorf("segment %d/4: %+v; want its range to start at %v", i+1, u, want)
		}
		addrs += u.Range.Count
		sockets += u.Sockets
	}
	if addrs != 10 || sockets != 101 || uses[0].Sockets != 101 || uses[0].Range.Count != 10 {
		t.Errorf("the 4 segments hold %d addresses and %d sockets (want 10 and 101); the run's uses now %+v", addrs, sockets, uses[0])
	}
}
