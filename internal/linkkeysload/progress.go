package linkkeysload

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loadproof/loadproof/internal/engine"
)

// Progress receives the running totals of finished attempts: attempted = ok + failed. Update is
// called with totals that never decrease, under the caller's lock (one call at a time).
type Progress interface {
	Update(attempted, ok, failed int64)
	// Close ends the display (waits for a bar to draw its last state).
	Close()
}

// nopProgress discards updates.
type nopProgress struct{}

func (nopProgress) Update(int64, int64, int64) {}
func (nopProgress) Close()                     {}

// SeedProgress prints the seed's progress line each time attempted reaches a multiple of Every:
// "  progress: attempted={n} success={s} failed={f}" (connections) or with allowed/denied (ddos).
// Totals advance by one (workers report every attempt), so the lines fall exactly on the multiples;
// should totals ever jump, one line is printed, with the totals at that moment, when a multiple is
// passed.
type SeedProgress struct {
	W      io.Writer
	Every  int64
	OKName string // "success" or "allowed"
	NoName string // "failed" or "denied"
	last   int64
}

// Update implements Progress.
func (p *SeedProgress) Update(attempted, ok, failed int64) {
	every := max(p.Every, 1)
	if attempted/every > p.last/every {
		fmt.Fprintf(p.W, "  progress: attempted=%d %s=%d %s=%d\n", attempted, p.OKName, ok, p.NoName, failed)
	}
	p.last = attempted
}

// Close implements Progress.
func (p *SeedProgress) Close() {}

// NewBarProgress draws the engine's progress bar of total attempts on w (a terminal), with the
// success and failure counts beside it.
func NewBarProgress(w io.Writer, name string, total int64, okName, noName string) Progress {
	return engine.NewBar(w, name, total, okName, noName)
}

// attemptProgress is how a run shows its attempts: the seed's progress line every `every` attempts,
// or the bar where r.Bar is set; r.Live gets the totals beside them, in the bar's place.
func (r *Run) attemptProgress(name string, total int64, every uint32, okName, noName string) Progress {
	var p Progress = &SeedProgress{W: r.stdout(), Every: int64(max(every, 1)), OKName: okName, NoName: noName}
	switch {
	case r.Bar && r.Live != nil:
		return r.Live
	case r.Bar:
		return NewBarProgress(r.stdout(), name, total, okName, noName)
	case r.Live != nil:
		return teeProgress{p, r.Live}
	}
	return p
}

// teeProgress hands the totals to two displays.
type teeProgress struct{ a, b Progress }

func (t teeProgress) Update(attempted, ok, failed int64) {
	t.a.Update(attempted, ok, failed)
	t.b.Update(attempted, ok, failed)
}

func (t teeProgress) Close() {
	t.a.Close()
	t.b.Close()
}

// Worker progress protocol: a worker prints these lines on stdout; the parent reads them.
const workerLinePrefix = "@lkload "

// workerProgress prints machine-readable progress lines for the parent process: with interval 0 one
// per finished attempt, so the parent's sum advances by one at a time and its progress lines fall on
// the exact multiples a single process would print (a write per attempt is cheap next to a TLS
// handshake); with an interval, at most once per interval and always when attempted reaches total.
type workerProgress struct {
	w        io.Writer
	interval time.Duration
	total    int64
	lastAt   time.Time
	lastN    int64
}

func (p *workerProgress) Update(attempted, ok, failed int64) {
	now := time.Now()
	if p.interval > 0 && attempted != p.total && now.Sub(p.lastAt) < p.interval {
		return
	}
	p.lastAt, p.lastN = now, attempted
	fmt.Fprintf(p.w, "%sprogress %d %d %d\n", workerLinePrefix, attempted, ok, failed)
}

func (p *workerProgress) Close() {}

// parseWorkerProgress reads a worker progress line; ok is false for any other line.
func parseWorkerProgress(line string) (attempted, okN, failed int64, ok bool) {
	rest, found := strings.CutPrefix(line, workerLinePrefix+"progress ")
	if !found {
		return 0, 0, 0, false
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	var v [3]int64
	for i, s := range f {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, 0, false
		}
		v[i] = n
	}
	if v[1]+v[2] != v[0] {
		return 0, 0, 0, false
	}
	return v[0], v[1], v[2], true
}

// aggregate sums the latest progress of every worker and passes the totals on.
type aggregate struct {
	mu   sync.Mutex
	per  map[int][3]int64
	sink Progress
}

func newAggregate(sink Progress) *aggregate {
	return &aggregate{per: map[int][3]int64{}, sink: sink}
}

func (a *aggregate) line(worker int, line string) bool {
	n, ok, failed, valid := parseWorkerProgress(line)
	if !valid {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.per[worker]
	if n < prev[0] {
		return true // out of order; totals never go back
	}
	a.per[worker] = [3]int64{n, ok, failed}
	var t [3]int64
	for _, v := range a.per {
		t[0] += v[0]
		t[1] += v[1]
		t[2] += v[2]
	}
	a.sink.Update(t[0], t[1], t[2])
	return true
}
