package linkkeysserver

import "testing"

// TestGCPacer: GOGC 50 while the live heap is small, 100 from the threshold on, back to 50 only
// below half of it; GOGC is set on the first step and on each change only.
func TestGCPacer(t *testing.T) {
	var live uint64
	var sets []int
	p := &GCPacer{Threshold: 100, LiveHeap: func() uint64 { return live },
		SetPercent: func(v int) int { sets = append(sets, v); return 0 }}
	for _, c := range []struct {
		live uint64
		want int
	}{{10, 50}, {99, 50}, {100, 100}, {60, 100}, {50, 100}, {49, 50}, {49, 50}, {200, 100}} {
		live = c.live
		if got := p.Step(); got != c.want {
			t.Errorf("live %d: GOGC %d, want %d", c.live, got, c.want)
		}
	}
	if want := []int{50, 100, 50, 100}; len(sets) != len(want) || sets[0] != 50 || sets[1] != 100 || sets[2] != 50 || sets[3] != 100 {
		t.Errorf("SetGCPercent calls %v, want %v", sets, want)
	}
}
