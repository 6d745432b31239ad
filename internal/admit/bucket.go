package admit

import (
	"math"
	"time"
)

// tokens is the mutable state of one token bucket; capacity and rate live with
// the owner so the per-source map stores only 16 bytes per source.
type tokens struct {
	tokens float64
	last   time.Duration
}

// elapsedSeconds is now-last in seconds, never negative: a reading taken
// before last (possible when goroutines race on a shared bucket) counts as no
// time passing, as Rust's saturating Instant::duration_since does.
func elapsedSeconds(now, last time.Duration) float64 {
	if now <= last {
		return 0
	}
	return float64(now-last) / float64(time.Second)
}

// wouldBeFull reports whether the bucket has refilled to capacity by now. Such
// a bucket is indistinguishable from one never created, so dropping it
// changes no decision.
func (t *tokens) wouldBeFull(now time.Duration, capacity, rate float64) bool {
	return t.tokens+elapsedSeconds(now, t.last)*rate >= capacity
}

// tryConsume refills, then takes one token if there is one. On failure it
// returns the whole seconds until one token will be there, at least 1.
func (t *tokens) tryConsume(now time.Duration, capacity, rate float64) (bool, uint64) {
	t.tokens = math.Min(capacity, t.tokens+elapsedSeconds(now, t.last)*rate)
	if now > t.last {
		t.last = now
	}
	if t.tokens >= 1 {
		t.tokens--
		return true, 0
	}
	return false, retryAfter(t.tokens, rate)
}

// retryAfter is max(1, ceil((1-tokens)/rate)) whole seconds, saturating at
// math.MaxUint64 for absurdly slow rates.
func retryAfter(tokens, rate float64) uint64 {
	wait := math.Ceil((1 - tokens) / rate)
	switch {
	case !(wait >= 1): // also catches NaN
		return 1
	case wait >= math.MaxUint64:
		return math.MaxUint64
	default:
		return uint64(wait)
	}
}

// Bucket is a token bucket: it holds at most Capacity tokens, refills at Rate
// tokens per second, and starts full. It is not safe for concurrent use; the
// Limiter guards its buckets with its own locks.
type Bucket struct {
	capacity float64
	rate     float64
	state    tokens
}

// NewBucket returns a full bucket of the given capacity refilling at
// ratePerSecond, with now as its last refill time.
func NewBucket(capacity, ratePerSecond float64, now time.Duration) Bucket {
	return Bucket{capacity: capacity, rate: ratePerSecond, state: tokens{tokens: capacity, last: now}}
}

// TryConsume refills the bucket up to now (tokens = min(capacity,
// tokens+elapsed*rate)) and takes one token if at least one is there. When it
// cannot, ok is false and retryAfterSecs is max(1, ceil((1-tokens)/rate)).
func (b *Bucket) TryConsume(now time.Duration) (ok bool, retryAfterSecs uint64) {
	return b.state.tryConsume(now, b.capacity, b.rate)
}

// WouldBeFull reports whether the bucket will have refilled to capacity by
// now, without changing it.
func (b *Bucket) WouldBeFull(now time.Duration) bool {
	return b.state.wouldBeFull(now, b.capacity, b.rate)
}

// Tokens returns the tokens held as of the last TryConsume.
func (b *Bucket) Tokens() float64 { return b.state.tokens }

// Capacity returns the bucket's capacity.
func (b *Bucket) Capacity() float64 { return b.capacity }

// Rate returns the refill rate in tokens per second.
func (b *Bucket) Rate() float64 { return b.rate }
