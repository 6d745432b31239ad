package linkkeysserver

import (
	"cmp"
	"context"
	"io"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/machine"
)

// MetricsLoop prints a "running" METRICS line from snap at once and then
// every interval (at least one second, as upstream). After each line, when
// duration is positive and the line's whole elapsed seconds reach it, the
// loop returns nil. It returns ctx's error when ctx ends first. The caller
// prints the "final" line. A write error ends the loop with that error.
func MetricsLoop(ctx context.Context, w io.Writer, interval, duration time.Duration, snap func() Snapshot) error {
	interval = max(interval, time.Second)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s := snap()
		s.Label = "running"
		if err := linkkeys.WriteMetricsLine(w, s.MetricsLine); err != nil {
			return err
		}
		if duration > 0 && time.Duration(int64(s.ElapsedSecs))*time.Second >= duration {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// MemoryReleaser returns freed heap memory to the operating system after
// bursts of activity. Go's runtime keeps freed memory mapped up to about
// twice the live heap (GOGC=100) and gives the rest back slowly, so after a
// connection ramp the RSS of a server holding idle connections stays far
// above what the connections need. Once a check finds neither a new
// connection nor a processed frame since the previous check, after activity
// since the last release, and at least MinGap after it, Release runs
// (debug.FreeOSMemory: a full collection that returns every free page, then
// machine.TrimCodePages: the mappings of the binary's read-only pages are
// dropped, so the pages mapped at start-up or during the burst and not run
// since stop counting in the RSS). A server under steady load never pays for
// it. Start trims the code pages once at the start as well.
type MemoryReleaser struct {
	// MinGap is the least time between two releases (0 means 10 s).
	MinGap time.Duration
	// Release frees memory; nil means debug.FreeOSMemory and then
	// machine.TrimCodePages (whose error, on systems without it, is
	// ignored: there is nothing to trim).
	Release func()

	last     Snapshot
	started  bool
	dirty    bool
	released time.Time
}

// Check looks at s (taken at now) and releases memory when the server has
// gone quiet after activity. It reports whether it released.
func (m *MemoryReleaser) Check(s Snapshot, now time.Time) bool {
	active := !m.started || s.AcceptedConnections != m.last.AcceptedConnections || s.FramesProcessed != m.last.FramesProcessed
	m.started = true
	m.last = s
	if active {
		m.dirty = true
		return false
	}
	gap := m.MinGap
	if gap <= 0 {
		gap = 10 * time.Second
	}
	if !m.dirty || now.Sub(m.released) < gap {
		return false
	}
	release := m.Release
	if release == nil {
		release = freeAndTrim
	}
	release()
	m.dirty = false
	m.released = now
	return true
}

func freeAndTrim() {
	debug.FreeOSMemory()
	machine.TrimCodePages()
}

// Start trims the code pages at once (unless Release is set), so that the
// pages start-up touched are gone before the first METRICS line, and then
// checks snap every interval, in its own goroutine, until ctx ends.
func (m *MemoryReleaser) Start(ctx context.Context, interval time.Duration, snap func() Snapshot) {
	if m.Release == nil {
		machine.TrimCodePages()
	}
	go every(ctx, interval, func(now time.Time) { m.Check(snap(), now) })
}

// every calls f at each tick of interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func(time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// GCPacer paces the garbage collector for a server whose live heap is small
// (a mostly idle server meeting a burst of handshakes): while the live heap
// is under Threshold it runs the collector at SmallPercent (GOGC), so the
// garbage of a burst is collected at half the heap growth GOGC=100 allows and
// fewer freed pages wait for the scavenger; at or above Threshold (a server
// holding many connections, whose collections scan a large heap) it restores
// LargePercent, so big servers pay nothing. It reads the live heap every
// interval; the switch has hysteresis (back to SmallPercent below half the
// Threshold). A GOGC variable in the environment is the operator's choice:
// the caller then does not run a pacer.
type GCPacer struct {
	// SmallPercent is GOGC while the live heap is small (0 means 50).
	SmallPercent int
	// LargePercent is GOGC once it is large (0 means 100).
	LargePercent int
	// Threshold is the live heap at which LargePercent takes over (0 means 64 MiB).
	Threshold uint64
	// LiveHeap reads the live heap; nil means runtime/metrics /gc/heap/live:bytes.
	LiveHeap func() uint64
	// SetPercent sets GOGC; nil means debug.SetGCPercent.
	SetPercent func(int) int

	large, started bool
}

// Step reads the live heap once and sets GOGC if the band changed (or on the
// first step); it returns the percent in force.
func (p *GCPacer) Step() int {
	small, large, threshold := cmp.Or(p.SmallPercent, 50), cmp.Or(p.LargePercent, 100), cmp.Or(p.Threshold, 64<<20)
	live := p.liveHeap()
	wasLarge := p.large
	switch {
	case live >= threshold:
		p.large = true
	case live < threshold/2:
		p.large = false
	}
	percent := small
	if p.large {
		percent = large
	}
	if !p.started || p.large != wasLarge {
		p.started = true
		set := p.SetPercent
		if set == nil {
			set = debug.SetGCPercent
		}
		set(percent)
	}
	return percent
}

func (p *GCPacer) liveHeap() uint64 {
	if p.LiveHeap != nil {
		return p.LiveHeap()
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// Run steps every interval until ctx ends.
func (p *GCPacer) Run(ctx context.Context, interval time.Duration) {
	p.Step()
	every(ctx, interval, func(time.Time) { p.Step() })
}
