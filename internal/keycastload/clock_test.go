package keycastload

import (
	"strings"
	"testing"
	"time"
)

// TestMonoClock checks that the one-reading clock agrees with time.Now: its readings fall between
// time.Now's before and after, carry a monotonic reading, and their wall-clock part is the same
// instant to within a millisecond.
func TestMonoClock(t *testing.T) {
	c := newMonoClock()
	for range 1000 {
		before := time.Now()
		got := c.now()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Fatalf("monoClock.now() = %v, not between %v and %v", got, before, after)
		}
		if !strings.Contains(got.String(), " m=") {
			t.Fatalf("monoClock.now() = %v has no monotonic reading", got)
		}
		if d := got.Round(0).Sub(before.Round(0)); d < -time.Millisecond || d > time.Millisecond+after.Sub(before) {
			t.Fatalf("wall clock of monoClock.now() is %v off time.Now", d)
		}
	}
}
