package engine

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Pacer gives the intended send time of the n-th request (n from 0) of an open-model run, relative to
// the run start. Latency measured from this intended time, not from the actual send, includes the
// time a request waited because the generator fell behind, which corrects coordinated omission.
type Pacer interface {
	// At returns the offset from the start at which request n is intended to be sent.
	At(n int64) time.Duration
	// Rate returns the intended rate (requests per second) at offset t, for reporting.
	Rate(t time.Duration) float64
}

// ConstantPacer sends at a fixed rate. Phase shifts every send by Phase/Rate seconds, so segments
// of a split run interleave evenly (see Segment.Offset).
type ConstantPacer struct {
	PerSecond float64
	Phase     float64
}

// At implements Pacer.
func (p ConstantPacer) At(n int64) time.Duration {
	return time.Duration((float64(n) + p.Phase) / p.PerSecond * float64(time.Second))
}

// Rate implements Pacer.
func (p ConstantPacer) Rate(time.Duration) float64 { return p.PerSecond }

// LinearPacer ramps the rate linearly from From to To over Over, then holds To. The number of sends
// by time t is the integral of the rate; At inverts it exactly.
type LinearPacer struct {
	From, To float64
	Over     time.Duration
	Phase    float64
}

// Rate implements Pacer.
func (p LinearPacer) Rate(t time.Duration) float64 {
	if p.Over <= 0 || t >= p.Over {
		return p.To
	}
	return p.From + (p.To-p.From)*t.Seconds()/p.Over.Seconds()
}

// At implements Pacer.
func (p LinearPacer) At(n int64) time.Duration {
	x := float64(n) + p.Phase
	T := p.Over.Seconds()
	if p.Over <= 0 {
		return time.Duration(x / p.To * float64(time.Second))
	}
	a := (p.To - p.From) / T // slope
	rampCount := p.From*T + a*T*T/2
	if x >= rampCount {
		return time.Duration((T + (x-rampCount)/p.To) * float64(time.Second))
	}
	var t float64
	if math.Abs(a) < 1e-12 {
		t = x / p.From
	} else {
		// a/2 t^2 + From t - x = 0
		t = (-p.From + math.Sqrt(p.From*p.From+2*a*x)) / a
	}
	return time.Duration(t * float64(time.Second))
}

// ValidateRate checks an open-model rate flag.
func ValidateRate(name string, r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
		return fmt.Errorf("engine: %s %v must be a finite number of requests per second greater than 0", name, r)
	}
	return nil
}

// Ticket is one scheduled send of an open-model run.
type Ticket struct {
	N        int64     // sequence number within this segment
	Intended time.Time // when the request should have been sent; late sends keep it
}

// Schedule hands out tickets at the pacer's intended times until ctx ends, until max tickets (if max
// > 0), or until the end offset (if end > 0). A ticket that cannot be handed out on time because all
// consumers are busy is still handed out, late, with its original intended time, so the latency
// recorded from Intended includes the wait. The channel is closed when the schedule ends.
func Schedule(ctx context.Context, start time.Time, p Pacer, max int64, end time.Duration) <-chan Ticket {
	ch := make(chan Ticket)
	go func() {
		defer close(ch)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for n := int64(0); max <= 0 || n < max; n++ {
			off := p.At(n)
			if end > 0 && off >= end {
				return
			}
			intended := start.Add(off)
			if d := time.Until(intended); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			t := Ticket{N: n, Intended: intended}
			select {
			case <-ctx.Done():
				return
			case ch <- t:
			}
		}
	}()
	return ch
}
