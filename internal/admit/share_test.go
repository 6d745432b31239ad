package admit

import (
	"math"
	"testing"
)

func TestShareSumsExactly(t *testing.T) {
	bases := map[string]LimiterConfig{"handshake": HandshakeDefaults(), "public read": PublicReadDefaults()}
	odd := PublicReadDefaults()
	odd.GlobalBurst = 4000.5
	odd.OverflowBurst = 7
	odd.GlobalRatePerSecond = 333.3
	bases["odd"] = odd
	for name, cfg := range bases {
		for _, n := range []int{1, 2, 3, 7, 16, 64, 1500} {
			var gb, ob, gr, or float64
			for i := range n {
				s := cfg.Share(n, i)
				gb += s.GlobalBurst
				ob += s.OverflowBurst
				gr += s.GlobalRatePerSecond
				or += s.OverflowRatePerSecond
				if s.GlobalBurst != math.Floor(s.GlobalBurst) && i != 0 {
					t.Errorf("%s n=%d i=%d: fractional burst %v", name, n, i, s.GlobalBurst)
				}
				if want := math.Ceil(cfg.Burst / float64(n)); s.Burst != want {
					t.Errorf("%s n=%d: per-source burst %v, want %v", name, n, s.Burst, want)
				}
				if want := (cfg.DistinctSourceThreshold + uint64(n) - 1) / uint64(n); s.DistinctSourceThreshold != want {
					t.Errorf("%s n=%d: threshold %d, want %d", name, n, s.DistinctSourceThreshold, want)
				}
				if s.Window != cfg.Window || s.IPv6Prefix != cfg.IPv6Prefix {
					t.Errorf("%s n=%d: window or prefix changed", name, n)
				}
			}
			if gb != cfg.GlobalBurst || ob != cfg.OverflowBurst {
				t.Errorf("%s n=%d: bursts sum to %v/%v, want %v/%v", name, n, gb, ob, cfg.GlobalBurst, cfg.OverflowBurst)
			}
			if math.Abs(gr-cfg.GlobalRatePerSecond) > 1e-9*cfg.GlobalRatePerSecond ||
				math.Abs(or-cfg.OverflowRatePerSecond) > 1e-9*cfg.OverflowRatePerSecond {
				t.Errorf("%s n=%d: rates sum to %v/%v", name, n, gr, or)
			}
		}
	}
}

func TestShareSplitsDeterministically(t *testing.T) {
	cfg := HandshakeDefaults() // global burst 1000, overflow burst 40
	var got []float64
	for i := range 3 {
		got = append(got, cfg.Share(3, i).GlobalBurst)
	}
	if got[0] != 334 || got[1] != 333 || got[2] != 333 {
		t.Fatalf("1000 over 3 = %v, want [334 333 333]", got)
	}
}

func TestShareRejectsBadIndex(t *testing.T) {
	for _, i := range []int{-1, 4} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Share(4, %d) did not panic", i)
				}
			}()
			PublicReadDefaults().Share(4, i)
		}()
	}
}
