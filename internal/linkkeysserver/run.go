package linkkeysserver

import (
	"cmp"
	"context"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
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
	// Hold, when set and true, holds a due release back (it stays due): a
	// child of a sequential fill that has filled its share is quiet while the
	// next child ramps, and its release (a full collection and a madvise of
	// every free page, whose TLB shoot-downs interrupt the other vCPU) would
	// land in the middle of that ramp; the parent says when the whole server
	// is quiet.
	Hold func() bool

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
	if !m.dirty || now.Sub(m.released) < gap || (m.Hold != nil && m.Hold()) {
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
// (a mostly idle server meeting a burst of handshakes, or a steady stream of
// short connections). While the live heap is under Threshold it holds the
// collector's heap goal at about HeapTarget: GOGC is set to
// (HeapTarget - live) / live, at least SmallPercent and at most MaxPercent.
// A server with a live heap of 1 MiB (dozens of handshakes in flight) then
// collects once every ~3 MiB allocated instead of once every 1 MiB at a
// fixed GOGC=50, while a burst whose live heap approaches HeapTarget is
// collected at SmallPercent, so the garbage of a flood still costs at most
// half of what it holds live and fewer freed pages wait for the scavenger.
// At or above Threshold (a server holding many connections, whose
// collections scan a large heap) it restores LargePercent, so big servers
// pay nothing; back below half the Threshold the small band returns
// (hysteresis). Run steps after every collection (a cleanup attached to a
// sentinel object each cycle, so a burst is answered within one cycle). The
// goal is held HeapTarget above Baseline, the live heap the process holds at
// rest, which Run measures with one collection at start: in a binary that
// links much besides the server (linkkeys-loadtest: NATS, Kubernetes types,
// pprof) the other packages' start-up state is about 1 MB of live heap that
// would otherwise take a quarter of the room left for the load's garbage.
// A GOGC variable in the environment is the operator's
// choice: the caller then does not run a pacer.
type GCPacer struct {
	// SmallPercent is the least GOGC while the live heap is small (0 means 50).
	SmallPercent int
	// MaxPercent is the most GOGC while the live heap is small (0 means 400).
	MaxPercent int
	// HeapTarget is the heap goal held while the live heap is small (0 means 4 MiB), above Baseline.
	HeapTarget uint64
	// Baseline is the live heap at rest; Run sets it when it is 0 and LiveHeap is nil.
	Baseline uint64
	// LargePercent is GOGC once it is large (0 means 100).
	LargePercent int
	// Threshold is the live heap at which LargePercent takes over (0 means 64 MiB).
	Threshold uint64
	// LiveHeap reads the live heap; nil means runtime/metrics /gc/heap/live:bytes.
	LiveHeap func() uint64
	// SetPercent sets GOGC; nil means debug.SetGCPercent.
	SetPercent func(int) int

	mu             sync.Mutex
	large, started bool
	percent        int
}

// Step reads the live heap once and sets GOGC if the percent it works out
// differs from the one in force (or on the first step); it returns the
// percent in force. It is safe to call from several goroutines.
func (p *GCPacer) Step() int {
	small, large, threshold := cmp.Or(p.SmallPercent, 50), cmp.Or(p.LargePercent, 100), cmp.Or(p.Threshold, 64<<20)
	most, target := max(cmp.Or(p.MaxPercent, 400), small), cmp.Or(p.HeapTarget, 4<<20)+p.Baseline
	live := p.liveHeap()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case live >= threshold:
		p.large = true
	case live < threshold/2:
		p.large = false
	}
	percent := large
	if !p.large {
		percent = smallBandPercent(live, target, small, most)
	}
	if !p.started || percent != p.percent {
		p.started = true
		p.percent = percent
		set := p.SetPercent
		if set == nil {
			set = debug.SetGCPercent
		}
		set(percent)
	}
	return percent
}

// smallBandPercent is the GOGC that puts the heap goal at target, within
// [least, most]. Go's goal is the larger of live x (1 + GOGC/100) and the
// runtime's heap minimum, 4 MiB x GOGC/100, so the percent is also at most
// target / 4 MiB x 100: a larger one would raise the minimum above target
// while the live heap is tiny (at GOGC=400 no collection runs before 16 MiB).
// A live heap of 0 (before the first collection) counts as tiny.
func smallBandPercent(live, target uint64, least, most int) int {
	const heapMinimum = 4 << 20 // the runtime's heap minimum at GOGC=100
	p := float64(target) * 100 / heapMinimum
	if live >= target {
		p = 0
	} else if live > 0 {
		// In float64 and clamped before the conversion: no overflow for any heap.
		p = min(p, float64(target-live)*100/float64(live))
	}
	return int(min(max(p, float64(least)), float64(most)))
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

// Run measures the Baseline (one collection) unless it is set or LiveHeap
// is, then steps now and after every garbage collection until ctx ends. The
// live heap it reads changes only when a collection ends, so no timer is
// needed; Run returns once the baseline is measured.
func (p *GCPacer) Run(ctx context.Context) {
	if p.Baseline == 0 && p.LiveHeap == nil {
		runtime.GC()
		p.Baseline = p.liveHeap()
	}
	p.Step()
	afterEachGC(ctx, func() { p.Step() })
}

// gcSentinel is allocated once per cycle of afterEachGC; it holds a pointer so
// that it never shares a tiny-allocator block (whose cleanups may never run).
type gcSentinel struct{ _ *gcSentinel }

// afterEachGC calls f on the cleanup goroutine after each garbage collection
// (the one that finds the previous sentinel unreachable) until ctx ends.
func afterEachGC(ctx context.Context, f func()) {
	var arm func()
	arm = func() {
		runtime.AddCleanup(new(gcSentinel), func(struct{}) {
			if ctx.Err() != nil {
				return
			}
			f()
			arm()
		}, struct{}{})
	}
	arm()
}
