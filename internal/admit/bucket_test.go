package admit

import (
	"math"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	type step struct {
		at    time.Duration // absolute clock reading
		ok    bool
		retry uint64
	}
	tests := []struct {
		name     string
		capacity float64
		rate     float64
		steps    []step
	}{
		{"starts full then empties", 2, 1, []step{{0, true, 0}, {0, true, 0}, {0, false, 1}}},
		{"retry rounds up whole seconds", 1, 0.3, []step{{0, true, 0}, {0, false, 4}}},
		{"partial refill shortens the retry", 1, 0.25, []step{{0, true, 0}, {2 * time.Second, false, 2}}},
		{"refill is capped at capacity", 2, 1, []step{
			{0, true, 0}, {0, true, 0}, {time.Hour, true, 0}, {time.Hour, true, 0}, {time.Hour, false, 1}}},
		{"failed tries still advance the refill clock", 1, 1, []step{
			{0, true, 0}, {500 * time.Millisecond, false, 1}, {time.Second, true, 0}}},
		{"time running backwards adds nothing", 1, 1, []step{
			{10 * time.Second, true, 0}, {5 * time.Second, false, 1}, {11 * time.Second, true, 0}}},
		{"capacity below one never admits", 0.5, 100, []step{{0, false, 1}, {time.Hour, false, 1}}},
		{"tiny rate saturates the retry", 1, 1e-300, []step{{0, true, 0}, {0, false, math.MaxUint64}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket(tt.capacity, tt.rate, tt.steps[0].at)
			if b.Tokens() != tt.capacity || b.Capacity() != tt.capacity || b.Rate() != tt.rate {
				t.Fatalf("new bucket: tokens %v capacity %v rate %v", b.Tokens(), b.Capacity(), b.Rate())
			}
			for i, s := range tt.steps {
				ok, retry := b.TryConsume(s.at)
				if ok != s.ok || retry != s.retry {
					t.Fatalf("step %d at %v: (%v, %d), want (%v, %d); tokens %v", i, s.at, ok, retry, s.ok, s.retry, b.Tokens())
				}
			}
		})
	}
}

func TestBucketWouldBeFull(t *testing.T) {
	b := NewBucket(3, 1, 0)
	if !b.WouldBeFull(0) {
		t.Fatal("a new bucket is not full")
	}
	b.TryConsume(0)
	b.TryConsume(0)
	if b.WouldBeFull(1999 * time.Millisecond) {
		t.Fatal("full before 2 s of refill")
	}
	if !b.WouldBeFull(2 * time.Second) {
		t.Fatal("not full after 2 s of refill")
	}
	if b.Tokens() != 1 {
		t.Fatalf("WouldBeFull changed the bucket: tokens %v", b.Tokens())
	}
}

func TestManualClock(t *testing.T) {
	var c ManualClock
	if c.Now() != 0 {
		t.Fatal("zero clock is not at 0")
	}
	c.Advance(3 * time.Second)
	c.Advance(-time.Second)
	if c.Now() != 2*time.Second {
		t.Fatalf("now = %v", c.Now())
	}
	c.Set(time.Minute)
	if c.Now() != time.Minute {
		t.Fatalf("now = %v", c.Now())
	}
	s := SystemClock()
	if a, b := s.Now(), s.Now(); b < a {
		t.Fatalf("system clock ran backwards: %v then %v", a, b)
	}
}
