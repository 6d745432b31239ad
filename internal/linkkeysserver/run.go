package linkkeysserver

import (
	"context"
	"io"
	"runtime/debug"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
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
// (debug.FreeOSMemory: a full collection that returns every free page). A
// server under steady load never pays for it.
type MemoryReleaser struct {
	// MinGap is the least time between two releases (0 means 10 s).
	MinGap time.Duration
	// Release frees memory; nil means debug.FreeOSMemory.
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
		release = debug.FreeOSMemory
	}
	release()
	m.dirty = false
	m.released = now
	return true
}

// Run checks snap every interval until ctx ends.
func (m *MemoryReleaser) Run(ctx context.Context, interval time.Duration, snap func() Snapshot) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Check(snap(), now)
		}
	}
}
