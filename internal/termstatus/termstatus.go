// Package termstatus draws one in-place status line on a terminal while a run goes on: elapsed
// against planned time, attempts against the planned count, the current rate of successes, p99
// latency with a unit that suits it, errors and refusals by design, and the countdown of a hold.
//
// It is fed the way the dashboard and remote write are: Line.Interval is an engine interval
// observer (engine.WithIntervalObserver), Line.Attempts takes a LinkKeys client's running attempt
// totals, Line.Hold starts a countdown. A ticker redraws the line with a carriage return at most
// every Options.Every (4 times a second by default) and only when its text changed; Close clears
// it. Everything else the command prints to the same terminal goes through Line.Writer (and its
// logger through Line.Handler), which clears the line first, so no output is ever written over.
//
// Once other output follows the last figures (the run's summary), the line is drawn again only
// when new figures come (or while a hold counts down), so it never reappears below a finished run.
// Refusals by design are the intervals' refusal classes plus, where Options.RefusalCounters name
// the server's shed counters, their increase over the run, taken off the errors the client saw.
//
// The command decides whether there is a terminal (Enabled); on a pipe nothing of this package
// runs and the output is exactly what it was without it.
package termstatus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/loadproof/loadproof/internal/hist"
	"github.com/loadproof/loadproof/internal/result"
)

// DisableEnv turns the status line off when set to anything but "" or "0" (as NO_COLOR turns
// colour off): for a terminal recorder, a screen reader, a CI log that claims to be a terminal.
const DisableEnv = "LOADPROOF_NO_STATUS"

// DefaultEvery is the shortest time between two redraws.
const DefaultEvery = 250 * time.Millisecond

// clearLine returns the cursor to the start of the line and erases it (CR, then ANSI EL).
const clearLine = "\r\x1b[K"

// Enabled reports whether a status line belongs on w: w is a terminal, TERM is not "dumb", and
// DisableEnv is not set. getenv may be nil (the variables are then unset).
func Enabled(w io.Writer, getenv func(string) string) bool {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if v := getenv(DisableEnv); v != "" && v != "0" {
		return false
	}
	if getenv("TERM") == "dumb" {
		return false
	}
	return IsTerminal(w)
}

// IsTerminal reports whether w is a terminal: an *os.File on one, or a Line's Writer over one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	fd := f.Fd()
	return fd != ^uintptr(0) && term.IsTerminal(int(fd))
}

// Part is one part of a run that restarts its clock (a capacity phase): its label and planned
// length.
type Part struct {
	Label   string
	Planned time.Duration
}

// Options say what the line shows. The zero value of every field is usable.
type Options struct {
	// Label names the run ("connections", "keycast run").
	Label string
	// Planned is the run's planned length (0: not known, only the elapsed time is shown).
	Planned time.Duration
	// Count is the run's planned number of attempts (0: not count-bound).
	Count int64
	// Noun names the Count's items ("attempts", "sources"); default "attempts".
	Noun string
	// LatencyKinds are the latency kinds whose p99 is shown, the first one an interval has wins
	// (the successes' latency, never one with refusals in it); empty: none shown.
	LatencyKinds []string
	// Parts, when set, are the parts of a run whose intervals count from zero again: the first
	// interval of each restarts the clock and the counts under the next part's label.
	Parts []Part
	// RefusalCounters name server counters (keys of the intervals' server samples, cumulative)
	// whose increase during the run is refusals by design that the client counted as failures: a
	// handshake the server's limiter closed looks like a failed handshake from the client. Their
	// increase since the baseline (Line.ServerBaseline, else the run's first sample) is shown as
	// refused and taken off the errors.
	RefusalCounters []string
	// Every is the shortest time between redraws; default DefaultEvery.
	Every time.Duration
	// Width is the terminal's width in columns, the line is cut to one less; 0 asks the terminal
	// (80 where it cannot say).
	Width int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Line is one status line on a terminal. Its methods are safe for concurrent use.
type Line struct {
	w    io.Writer
	o    Options
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	s       state
	drawn   string // the text on screen; "" when the line is clear
	partial bool   // the last write through Writer left the cursor mid-line: no redraw until it ends one
	stale   bool   // other output came after the last figures: no redraw until new ones (or a hold) come
	redraws int
}

// New starts a status line on w (the terminal; stderr in the commands) and its ticker. Close it.
func New(w io.Writer, o Options) *Line {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Noun == "" {
		o.Noun = "attempts"
	}
	if o.Width <= 0 {
		o.Width = 80
		if f, ok := w.(interface{ Fd() uintptr }); ok {
			if c, _, err := term.GetSize(int(f.Fd())); err == nil && c > 0 {
				o.Width = c
			}
		}
	}
	l := &Line{w: w, o: o, stop: make(chan struct{}), done: make(chan struct{})}
	l.s = state{label: o.Label, planned: o.Planned, count: o.Count, part: -1}
	if len(o.Parts) > 0 {
		l.s.label = ""
	}
	go l.tick()
	return l
}

func (l *Line) tick() {
	defer close(l.done)
	t := time.NewTicker(l.o.Every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.Redraw()
		}
	}
}

// Redraw draws the line now if its text changed (the ticker calls it; tests call it to draw a
// state without waiting for a tick).
func (l *Line) Redraw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now()
	if l.partial || l.stale && !l.s.holdRunning(now) {
		// Once the command prints after the last figures (its summary, at the end), the line
		// comes back only with new figures, so it is never drawn again below a finished run.
		return
	}
	text := clip(l.s.render(l.o, now), l.o.Width-1)
	if text == l.drawn {
		return
	}
	io.WriteString(l.w, "\r"+text+"\x1b[K")
	l.drawn = text
	l.redraws++
}

// Redraws returns how many times the line was drawn.
func (l *Line) Redraws() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.redraws
}

// Text returns the line's text as it would be drawn now.
func (l *Line) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return clip(l.s.render(l.o, l.o.Now()), l.o.Width-1)
}

// Close stops the ticker and clears the line. It is safe to call more than once.
func (l *Line) Close() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		defer l.mu.Unlock()
		l.clearLocked()
	})
}

func (l *Line) clearLocked() {
	if l.drawn != "" {
		io.WriteString(l.w, clearLine)
		l.drawn = ""
	}
}

// Interval takes an engine interval snapshot (an engine.WithIntervalObserver function). An
// interval that starts before the previous one did is the first of a new part of the run.
func (l *Line) Interval(iv *result.Interval) {
	if iv == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = false
	l.s.interval(iv, l.o, l.o.Now())
}

// Begin starts a new part of the run under label, planned to last planned (0: unknown): the clock
// and the counts start again.
func (l *Line) Begin(label string, planned time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = false
	l.s = state{label: label, planned: planned, part: l.s.part}
}

// ServerBaseline sets the server's counters read before the run (by the names of
// Options.RefusalCounters), from which their increase is counted; without it the run's first
// server sample is the baseline.
func (l *Line) ServerBaseline(counters map[string]float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s.baseline = maps.Clone(counters)
}

// Hold shows the countdown of a hold of n connections that ends at until, in place of the
// run's figures, until the next Begin or the first interval of a new part.
func (l *Line) Hold(n int64, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = false
	l.s.holding, l.s.holdUntil = n, until
}

// Attempts returns the sink of a LinkKeys client's running attempt totals (linkkeysload's
// Progress: Update and Close). Its Close does not end the line: the hold that follows the
// attempts is shown on it too.
func (l *Line) Attempts() *Attempts { return &Attempts{l: l} }

// Attempts feeds running attempt totals to a Line.
type Attempts struct{ l *Line }

// Update sets the running totals: attempted = ok + failed.
func (a *Attempts) Update(attempted, ok, failed int64) {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = false
	if l.s.start.IsZero() {
		l.s.start = l.o.Now()
	}
	l.s.attempted, l.s.attemptsOK, l.s.attemptsFailed, l.s.haveAttempts = attempted, ok, failed, true
}

// Close ends the attempts (the line stays).
func (a *Attempts) Close() {}

// Writer returns w with the line cleared before every write, for the command's other output to
// the same terminal (stdout, stderr). It reports w's descriptor (Fd), so IsTerminal sees through it.
func (l *Line) Writer(w io.Writer) io.Writer { return &clearingWriter{l: l, w: w} }

type clearingWriter struct {
	l *Line
	w io.Writer
}

func (c *clearingWriter) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.clearLocked()
	c.l.stale = true
	n, err := c.w.Write(p)
	if n > 0 {
		c.l.partial = p[n-1] != '\n'
	}
	return n, err
}

// Fd returns the descriptor of the writer underneath, or ^uintptr(0) when it has none.
func (c *clearingWriter) Fd() uintptr {
	if f, ok := c.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// Handler returns h with the line cleared before every record it writes (a logger that writes
// straight to the terminal).
func (l *Line) Handler(h slog.Handler) slog.Handler { return &clearingHandler{l: l, h: h} }

type clearingHandler struct {
	l *Line
	h slog.Handler
}

func (c *clearingHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return c.h.Enabled(ctx, lv)
}

func (c *clearingHandler) Handle(ctx context.Context, r slog.Record) error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.clearLocked()
	c.l.partial, c.l.stale = false, true
	return c.h.Handle(ctx, r)
}

func (c *clearingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &clearingHandler{l: c.l, h: c.h.WithAttrs(as)}
}

func (c *clearingHandler) WithGroup(name string) slog.Handler {
	return &clearingHandler{l: c.l, h: c.h.WithGroup(name)}
}

// window is how much recent time the current rate and p99 cover: at least one second of
// intervals (ten at 100 ms), so a short interval's noise does not make the line flicker.
const window = time.Second

// maxRecent bounds the recent intervals kept.
const maxRecent = 64

type recent struct {
	secs float64
	ok   int64
	lat  *hist.Histogram // nil when the interval has none of the kinds
}

// state is what the line shows; render is a pure function of it and the time.
type state struct {
	label   string
	planned time.Duration
	count   int64
	part    int // index into Options.Parts of the current part; -1 before the first

	start  time.Time // when the run's clock started; zero before anything arrived
	lastT  float64
	seenIv bool

	ok, failed, refused int64
	recent              []recent

	haveAttempts                          bool
	attempted, attemptsOK, attemptsFailed int64

	holding   int64
	holdUntil time.Time

	baseline      map[string]float64 // server counters before the run; nil until known
	serverRefused int64              // their increase: refusals the client counted as failures
}

func (s *state) interval(iv *result.Interval, o Options, now time.Time) {
	if s.seenIv && iv.T < s.lastT {
		// A new part of the run (a capacity phase): its clock and counts start again.
		*s = state{label: s.label, planned: s.planned, part: s.part}
	}
	s.server(iv.Server, o)
	if !s.seenIv && len(o.Parts) > 0 && s.part+1 < len(o.Parts) {
		s.part++
		s.label, s.planned = o.Parts[s.part].Label, o.Parts[s.part].Planned
	}
	if !s.seenIv || s.start.IsZero() {
		s.start = now.Add(-time.Duration((iv.T + iv.Secs) * float64(time.Second)))
	}
	s.seenIv, s.lastT = true, iv.T
	var ok int64
	for class, n := range iv.Counts {
		switch {
		case class == result.ClassSuccess:
			ok += n
		case result.IsRefusal(class):
			s.refused += n
		default:
			s.failed += n
		}
	}
	s.ok += ok
	r := recent{secs: iv.Secs, ok: ok}
	for _, k := range o.LatencyKinds {
		if h := iv.Latency[k]; h != nil {
			r.lat = h.Clone() // the observer must not keep the interval's own
			break
		}
	}
	s.recent = append(s.recent, r)
	// Keep the intervals that cover the window, and no more than maxRecent.
	var secs float64
	keep := 0
	for i := len(s.recent) - 1; i >= 0 && keep < maxRecent; i-- {
		keep++
		secs += s.recent[i].secs
		if secs >= window.Seconds()-1e-9 { // 10 × 0.1 s is one second
			break
		}
	}
	s.recent = slices.Clone(s.recent[len(s.recent)-keep:])
}

// server counts the refusal counters' increase from a sample.
func (s *state) server(sample map[string]float64, o Options) {
	if len(o.RefusalCounters) == 0 || len(sample) == 0 {
		return
	}
	if s.baseline == nil {
		s.baseline = map[string]float64{}
		for _, k := range o.RefusalCounters {
			if v, ok := sample[k]; ok {
				s.baseline[k] = v
			}
		}
	}
	var n float64
	for _, k := range o.RefusalCounters {
		v, ok := sample[k]
		if !ok {
			continue
		}
		b, known := s.baseline[k]
		switch {
		case !known:
			s.baseline[k], b = v, v // a counter first seen now counts from here
		case v < b:
			// Below its baseline: the server restarted, or the samples are already relative to
			// the run's start; either way the value is the increase.
			s.baseline[k], b = 0, 0
		}
		if d := v - b; d > 0 {
			n += d
		}
	}
	s.serverRefused = max(s.serverRefused, int64(n)) // counters only grow; a missing sample is no drop
}

// holdRunning reports whether a hold is counting down at now.
func (s *state) holdRunning(now time.Time) bool {
	return !s.holdUntil.IsZero() && now.Before(s.holdUntil)
}

// current returns the successes per second and the p99 latency over the recent intervals
// (p99 < 0 when none had a latency).
func (s *state) current() (rate float64, p99 time.Duration) {
	var secs float64
	var ok int64
	var lat *hist.Histogram
	for _, r := range s.recent {
		secs += r.secs
		ok += r.ok
		if r.lat != nil {
			if lat == nil {
				lat = hist.New()
			}
			lat.Merge(r.lat)
		}
	}
	if secs > 0 {
		rate = float64(ok) / secs
	}
	p99 = -1
	if lat != nil && lat.Count() > 0 {
		p99 = lat.Quantile(0.99)
	}
	return rate, p99
}

func (s *state) render(o Options, now time.Time) string {
	var parts []string
	if s.label != "" {
		parts = append(parts, s.label)
	}
	if s.holding > 0 || !s.holdUntil.IsZero() {
		left := max(s.holdUntil.Sub(now), 0)
		parts = append(parts, fmt.Sprintf("holding %s connections: %s left", hist.CountText(s.holding), clock(left.Round(time.Second))))
		return strings.Join(parts, "  ")
	}
	if s.start.IsZero() {
		return strings.Join(append(parts, "starting…"), "  ")
	}
	el := now.Sub(s.start).Truncate(time.Second)
	if s.planned > 0 {
		parts = append(parts, clock(el)+"/"+clock(s.planned))
	} else {
		parts = append(parts, clock(el))
	}
	if s.count > 0 && s.haveAttempts {
		parts = append(parts, fmt.Sprintf("%s/%s %s", hist.CountText(s.attempted), hist.CountText(s.count), o.Noun))
	} else if s.haveAttempts {
		parts = append(parts, fmt.Sprintf("%s %s", hist.CountText(s.attempted), o.Noun))
	}
	rate, p99 := s.current()
	if s.seenIv {
		parts = append(parts, rateText(rate)+" ok/s")
		if p99 >= 0 {
			parts = append(parts, "p99 "+hist.DurationText(p99))
		}
	}
	failed, refused := s.failed, s.refused
	if s.haveAttempts && s.attemptsFailed > failed {
		failed = s.attemptsFailed // attempt totals run ahead of the last interval
	}
	// The server's refusals were counted by the client as failures: move them over.
	moved := min(s.serverRefused, failed)
	failed, refused = failed-moved, refused+moved
	parts = append(parts, "errors "+hist.CountText(failed), "refused "+hist.CountText(refused))
	return strings.Join(parts, "  ")
}

// clock renders a duration as seconds below a minute ("42s"), else as m:ss or h:mm:ss.
func clock(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d < time.Minute {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	h, m, s := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

func rateText(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return hist.CountText(int64(r + 0.5))
}

// clip cuts s to at most n columns (runes; the line is ASCII but for µ and …).
func clip(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
