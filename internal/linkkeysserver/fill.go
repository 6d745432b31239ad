package linkkeysserver

import (
	"fmt"
	"sync/atomic"

	"github.com/loadproof/loadproof/internal/linkkeys"
)

// Fill is how the children of a multi-process server (--processes) share new
// connections.
type Fill int

const (
	// FillSpread lets the kernel spread new connections over every child by
	// 4-tuple hash (SO_REUSEPORT's own rule): all children are busy at once.
	FillSpread Fill = iota
	// FillSequential sends every new connection to one child until its cap
	// (its share of TCP_MAX_CONNECTIONS, or its open-file limit less
	// fdHeadroom when that is less) is nearly full, then to the next: the lowest-
	// numbered child with room takes them, and when every child is full the
	// kernel's spread takes over (each child then sheds at its own cap). One
	// process at a time does the handshakes, so a server that needs many
	// processes only for their open files (20,000 a process here) runs its
	// ramp at the cost of one (docs/load-testing.md, the 200,000 ramp).
	FillSequential
	// FillAuto is sequential unless the processes' shares are too small for
	// it (SequentialFillProblem), then spread: ChooseFill decides.
	FillAuto
)

// ParseFill reads a --process-fill value.
func ParseFill(s string) (Fill, error) {
	switch s {
	case "spread":
		return FillSpread, nil
	case "sequential":
		return FillSequential, nil
	case "auto":
		return FillAuto, nil
	}
	return 0, fmt.Errorf("linkkeysserver: --process-fill %q: want auto (sequential unless each process's share is too small for it, then spread), "+
		"spread (the kernel spreads new connections over the processes) or sequential (one process at a time until its share of TCP_MAX_CONNECTIONS or its open files are nearly full)", s)
}

func (f Fill) String() string {
	switch f {
	case FillSequential:
		return "sequential"
	case FillAuto:
		return "auto"
	}
	return "spread"
}

// ChooseFill resolves f for n processes under cfg: auto becomes sequential
// when SequentialFillProblem finds nothing against it, else spread; why says
// what decided (empty for an explicit choice). The sequential fill is the
// default because spreading a ramp over many processes on few cores costs
// every busy process its runtime's monitor and scheduler hand-offs: on a
// 2-vCPU guest the 200,000 ramp over 12 processes cost 8–20 % less CPU per
// connection sequentially, held every connection where the spread lost
// 84–539 to handshake timeouts, and cut its p99 latency from 4.4–4.9 s to
// 2.3–2.9 s (docs/load-testing.md, the 200,000 ramp, 2026-12-05 evening).
func ChooseFill(f Fill, cfg Config, n int) (chosen Fill, why string) {
	if f != FillAuto {
		return f, ""
	}
	if n <= 1 {
		return FillSpread, "one process"
	}
	if p := SequentialFillProblem(cfg, n); p != "" {
		return FillSpread, p
	}
	return FillSequential, "each process's share leaves room for its listen queues"
}

// ShareSequential returns the configuration child i of n runs in a
// sequential fill. Only one child takes new connections at a time, so each
// one enforces the whole handshake and public-read budgets and the whole
// handshake concurrency (dividing them would cap the one busy child at 1/n
// of the server's rate); TCP_MAX_CONNECTIONS and TCP_MAX_INFLIGHT_FRAME_BYTES
// bound what every child holds at once and are divided as in Share. The
// budgets hold exactly while one child fills; around a hand-over, new
// connections already steered to the previous child still reach it, so for
// that moment two children admit.
func (cfg Config) ShareSequential(n, i int) Config {
	if n <= 1 {
		return cfg
	}
	cfg = cfg.WithDefaults()
	cfg.MaxConnections = splitCount(cfg.MaxConnections, n, i)
	cfg.MaxInflightFrameBytes = int64(max(linkkeys.MaxFrameSize, splitCount(uint64(cfg.MaxInflightFrameBytes), n, i)))
	return cfg
}

// fillMarks returns the open-connection counts at which a child of a
// sequential fill reports itself full (high) and, after that, as having room
// again (low), for a child whose cap is quota and whose listen backlog is
// backlog. Below the cap it leaves room for what is already on its way when
// new connections are steered elsewhere: the connections whose SYN this
// child's listener took count as open only once accepted, and the kernel
// bounds both its queues, of handshakes in progress and of connections
// waiting for accept, by the backlog; on a saturated machine both fill up
// (200,000-connection ramps shed 88–274 connections at the caps with no room
// for the queues, 153 with room for one). Then 2 % (at most 1,024) for the
// moments the hand-over itself takes. The same 2 % between the marks keeps
// churn at the cap from flipping the steering on every connection. The
// queues' share is at most a quarter of the cap, so a small cap still fills.
func fillMarks(quota uint64, backlog int) (high, low int64) {
	q := int64(min(quota, 1<<62))
	slack := min(max(q/50, 1), 1024)
	high = max(q-slack-min(2*int64(max(backlog, 0)), q/4), 1)
	low = max(high-slack, 0)
	return high, low
}

// Occupancy watches a server's open connections (every accepted socket until
// it closes) against two marks: it turns full when they reach the high mark
// and turns back when they fall to the low one, and signals Changed on each
// turn. The marks come down when the process runs out of descriptors first
// (exhausted).
type Occupancy struct {
	high, low atomic.Int64
	full      atomic.Bool
	changed   chan struct{}
}

// NewOccupancy returns a watch with the given marks (low < high).
func NewOccupancy(high, low int64) *Occupancy {
	o := &Occupancy{changed: make(chan struct{}, 1)}
	o.high.Store(high)
	o.low.Store(low)
	return o
}

// Marks returns the high and low marks in force.
func (o *Occupancy) Marks() (high, low int64) { return o.high.Load(), o.low.Load() }

// Full reports whether the last turn was to full.
func (o *Occupancy) Full() bool { return o.full.Load() }

// Changed receives a value after each turn (several turns may share one).
func (o *Occupancy) Changed() <-chan struct{} { return o.changed }

// note is called with the open count after every change to it.
func (o *Occupancy) note(open int64) {
	switch {
	case open >= o.high.Load() && !o.full.Load():
		if !o.full.CompareAndSwap(false, true) {
			return
		}
	case open <= o.low.Load() && o.full.Load():
		if !o.full.CompareAndSwap(true, false) {
			return
		}
	default:
		return
	}
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// exhausted is called when an accept failed for want of a descriptor
// (EMFILE, ENFILE) with open connections: the marks assumed more descriptors
// than the process has (something else holds the reserve, or the system's
// table is full). The high mark comes down to open, keeping the gap between
// the marks, and the watch turns full, so a sequential fill steers new
// connections on instead of queueing them to a process that cannot accept
// them until a connection closes.
func (o *Occupancy) exhausted(open int64) {
	high, low := o.Marks()
	if open < 1 || open >= high {
		o.note(open)
		return
	}
	o.low.Store(max(open-(high-low), 0))
	o.high.Store(open)
	o.note(open)
}

// SequentialFillProblem returns, for a sequential fill of n processes under
// cfg, why it will shed connections at the processes' caps before the whole
// TCP_MAX_CONNECTIONS is reached, or "" when it should not: a process hands
// new connections on at its share less twice the listen backlog (the queues
// whose connections still reach it), but never more than a quarter below its
// share, so with shares under eight times the backlog a saturated ramp can
// queue more to a process than it has room for (15,000 connections over 12
// processes with the default backlog shed 339–724 of them).
func SequentialFillProblem(cfg Config, n int) string {
	if n <= 1 {
		return ""
	}
	cfg = cfg.WithDefaults()
	share := cfg.MaxConnections / uint64(n)
	if backlog := uint64(max(cfg.ListenBacklog, 0)); share < 8*backlog {
		return fmt.Sprintf("each of the %d processes holds about %d connections (TCP_MAX_CONNECTIONS %d), under 8 times the listen backlog %d; "+
			"a process fills before the connections already queued to it are accepted, so a fast ramp sheds some at its cap. "+
			"Use fewer processes, a smaller TCP_LISTEN_BACKLOG, or --process-fill spread (what auto picks then)", n, share, cfg.MaxConnections, backlog)
	}
	return ""
}
