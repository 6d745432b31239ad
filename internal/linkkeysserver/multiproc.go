package linkkeysserver

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/syncio"
)

// Multi-process mode (--processes N).
//
// The parent reserves a port (a SO_REUSEPORT socket that is bound but never
// listens, so it takes no connections), starts N children of the same binary
// in their own process group, and sends each one line on stdin: the server
// key's 32-byte Ed25519 seed in hex, so every child presents the same
// certificate and no key touches the disk. Each child binds the port with
// SO_REUSEPORT, listens, and prints "READY <port> <nofile>" (its soft
// open-file limit, after raising it to the hard limit; 0 when unknown). Once
// all are ready the parent releases its reservation. Children then obey stdin lines: "metrics"
// prints one "running" METRICS line, "final" prints the "final" line and shuts
// the child down; SIGINT, SIGTERM and stdin EOF do the same as "final".
// Children also get SIGTERM if the parent dies (procexec).
//
// Budgets that bound a total are divided so the N processes together keep
// it: each child runs Config.Share(n, i) (see there). A child holds no more
// connections than its open-file limit less fdHeadroom allows: its cap, and
// in a sequential fill the mark at which it counts itself full, come down to
// UsableDescriptors of its limit.

// Child protocol words.
const (
	childReady   = "READY"
	childMetrics = "metrics"
	childFinal   = "final"
	childSteer   = "steer"   // "steer <k>": steer the group's new connections to child k (-1: spread)
	childFull    = "FULL"    // the child's open connections reached its high mark (sequential fill); "FULL <k>": and it steered new connections on to child k
	childSteered = "STEERED" // "STEERED <k>": the child has set the group's program to child k
	notMoved     = -2        // a FULL line without <k>
	childRoom    = "ROOM"    // they fell back to its low mark
	childQuiet   = "quiet"   // the whole server took no connection and no frame over the parent's last interval
	childBusy    = "busy"    // it did again (the state every child starts in)
)

// steering is a sequential-fill child's side of the steering: whether new connections are
// steered to it (as far as it knows), and how it hands them on when it turns full.
type steering struct {
	ln           *net.TCPListener
	index, count int
	mine         atomic.Bool // new connections come here
	logger       *slog.Logger
}

// steer applies a "steer k" command.
func (st *steering) steer(k int) {
	if err := SteerReusePort(st.ln, k); err != nil {
		st.logger.Warn("linkkeysserver: steering new connections", "to", k, "err", err)
	}
	st.mine.Store(k == st.index)
}

// reportOccupancy prints FULL or ROOM each time the child's occupancy turns. A child that turns
// full while new connections are steered to it steers them on to the next child itself (or to the
// kernel's spread after the last), before it tells the parent: through the parent, a loaded
// machine took long enough for a listen queue's worth of connections to land past the cap. It says
// where it steered ("FULL <k>"); the parent corrects that when the next child is full too.
func reportOccupancy(ctx context.Context, occ *Occupancy, st *steering, out io.Writer) {
	sent := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-occ.Changed():
		}
		full := occ.Full()
		if full == sent {
			continue
		}
		line := childRoom
		if full {
			line = childFull
			if st.mine.Load() {
				next := st.index + 1
				if next >= st.count {
					next = SpreadIndex
				}
				st.steer(next)
				line = fmt.Sprintf("%s %d", childFull, next)
			}
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return
		}
		sent = full
	}
}

// Share returns the configuration child i of n runs so that n processes
// behind one SO_REUSEPORT port together enforce cfg: both limiters are split
// with admit.LimiterConfig.Share (global and overflow buckets split exactly,
// per-source limits approximately; see there), TCP_MAX_CONNECTIONS is split
// as whole connections summing exactly to the total (the kernel spreads
// connections evenly by 4-tuple hash, so the cap holds to within that
// spread), the handshake concurrency and TCP_MAX_INFLIGHT_FRAME_BYTES are
// split the same way (at least one slot, and one maximum-size frame, each).
// Timeouts, per-connection frame bounds, the body rate and the snapshot TTL
// are per connection or per process and are not divided.
func (cfg Config) Share(n, i int) Config {
	if n <= 1 {
		return cfg
	}
	cfg = cfg.WithDefaults()
	cfg.Handshake = cfg.Handshake.Share(n, i)
	cfg.PublicRead = cfg.PublicRead.Share(n, i)
	cfg.MaxConnections = splitCount(cfg.MaxConnections, n, i)
	cfg.HandshakeConcurrency = int(max(1, splitCount(uint64(cfg.HandshakeConcurrency), n, i)))
	cfg.MaxInflightFrameBytes = int64(max(linkkeys.MaxFrameSize, splitCount(uint64(cfg.MaxInflightFrameBytes), n, i)))
	return cfg
}

func splitCount(total uint64, n, i int) uint64 {
	base := total / uint64(n)
	if uint64(i) < total%uint64(n) {
		base++
	}
	return base
}

// ChildOptions configures RunChild.
type ChildOptions struct {
	Index, Count int
	// Addr is the host:port every child binds with SO_REUSEPORT.
	Addr string
	// Config is the whole server's configuration; the child runs
	// Config.Share(Count, Index), its TCP_MAX_CONNECTIONS share capped at
	// the descriptors its open-file limit leaves (UsableDescriptors).
	Config Config
	// Keys answers the DomainKeys ops (the child's own Store on the shared
	// database file).
	Keys KeySource
	// Stdin carries the key seed line and then commands; Stdout receives
	// the READY and METRICS lines.
	Stdin  io.Reader
	Stdout io.Writer
	// Signals, when not nil, delivers SIGINT/SIGTERM (treated as "final").
	Signals <-chan os.Signal
	Logger  *slog.Logger
	// ReleaseIdleMemory runs a MemoryReleaser in the child, and a GCPacer
	// unless GOGC is set.
	ReleaseIdleMemory bool
	// Fill is how the children share new connections; with FillSequential
	// the child runs Config.ShareSequential, child 0 steers the group to
	// itself before it reports READY, every child prints "FULL" and "ROOM"
	// as its open connections cross its marks, and "steer <k>" on stdin
	// steers the group to child k (-1: spread).
	Fill Fill
}

// RunChild is the body of one child process: it reads the key seed, serves
// on the shared port and answers the parent's commands until "final", a
// signal or stdin EOF, then prints the final METRICS line and shuts down.
func RunChild(ctx context.Context, opt ChildOptions) error {
	in := bufio.NewReader(opt.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return fmt.Errorf("linkkeysserver: child %d: reading the key seed from stdin: %w", opt.Index, err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil || len(seed) != ed25519.SeedSize {
		return fmt.Errorf("linkkeysserver: child %d: stdin's first line must be the %d-byte key seed in hex", opt.Index, ed25519.SeedSize)
	}
	key := ed25519.NewKeyFromSeed(seed)
	cfg := opt.Config.Share(opt.Count, opt.Index)
	if opt.Fill == FillSequential {
		cfg = opt.Config.ShareSequential(opt.Count, opt.Index)
	}
	logger := opt.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// A process holds no more connections than its descriptors: past them accept fails with EMFILE
	// and what the kernel queued to this process waits. Capped here, a sequential fill moves on
	// before that, and once every process is full each sheds at its cap rather than stall.
	nofile := processNofile(logger)
	if usable := UsableDescriptors(nofile); nofile > 0 && usable < cfg.MaxConnections {
		logger.Info("linkkeysserver: this process's open-file limit caps its connections below its share of TCP_MAX_CONNECTIONS",
			"share", cfg.MaxConnections, "soft_limit", nofile, "reserved", fdHeadroom, "cap", max(usable, 1))
		cfg.MaxConnections = max(usable, 1)
	}
	cert, err := linkkeys.SelfSignedCert(cfg.Domain, key, time.Time{}, time.Time{})
	if err != nil {
		return err
	}
	ln, backlogErr, err := Listen(ctx, opt.Addr, ListenOptions{Backlog: cfg.ListenBacklog, ReusePort: true})
	if err != nil {
		return err
	}
	if backlogErr != nil {
		logger.Warn("linkkeysserver: could not set the listen backlog", "err", backlogErr)
	}
	srv := &Server{Config: cfg, TLSConfig: linkkeys.ServerTLSConfig(cert), Keys: opt.Keys, Logger: logger}
	out := syncio.NewWriter(opt.Stdout) // protocol lines come from two goroutines
	var st *steering
	if opt.Fill == FillSequential {
		if opt.Index == 0 {
			// Before any later child joins the group, so none of them takes a connection out of turn.
			if err := SteerReusePort(ln, 0); err != nil {
				ln.Close()
				return err
			}
		}
		srv.Occupancy = NewOccupancy(fillMarks(cfg.MaxConnections, cfg.WithDefaults().ListenBacklog))
		st = &steering{ln: ln, index: opt.Index, count: opt.Count, logger: logger}
		st.mine.Store(opt.Index == 0)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := fmt.Fprintf(out, "%s %d %d\n", childReady, port, nofile); err != nil {
		srv.Close()
		return err
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	if occ := srv.Occupancy; occ != nil {
		go reportOccupancy(rctx, occ, st, out)
	}
	var serverBusy atomic.Bool // as the parent last said ("quiet", "busy")
	serverBusy.Store(true)
	if opt.ReleaseIdleMemory {
		mr := &MemoryReleaser{}
		if opt.Fill == FillSequential {
			mr.Hold = serverBusy.Load
		}
		if os.Getenv("GOGC") == "" { // first, as in a one-process server
			(&GCPacer{}).Run(rctx)
		}
		mr.Start(rctx, 2*time.Second, srv.Metrics)
	}
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		for {
			l, err := in.ReadString('\n')
			if l = strings.TrimSpace(l); l != "" {
				cmds <- l
			}
			if err != nil {
				return
			}
		}
	}()
	var runErr error
loop:
	for {
		select {
		case c, ok := <-cmds:
			if !ok || c == childFinal {
				break loop
			}
			if k, ok := strings.CutPrefix(c, childSteer+" "); ok && st != nil {
				if idx, err := strconv.Atoi(k); err == nil {
					st.steer(idx)
					_, _ = fmt.Fprintf(out, "%s %d\n", childSteered, idx)
				}
			}
			switch c {
			case childQuiet:
				serverBusy.Store(false)
			case childBusy:
				serverBusy.Store(true)
			case childMetrics:
				if err := linkkeys.WriteMetricsLine(out, srv.Metrics().MetricsLine); err != nil {
					runErr = err
					break loop
				}
			}
		case <-opt.Signals:
			break loop
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			runErr = err
			break loop
		}
	}
	final := srv.Metrics()
	final.Label = "final"
	if err := linkkeys.WriteMetricsLine(out, final.MetricsLine); err != nil && runErr == nil {
		runErr = err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return runErr
}

// SupervisorOptions configures StartSupervisor.
type SupervisorOptions struct {
	// Count is the number of children (at least 2 makes sense).
	Count int
	// Command returns the command line of child i; the supervisor sets its
	// stdin, stdout, process group and parent-death signal. Stderr is left
	// as the caller set it.
	Command func(i int) *exec.Cmd
	// Seed is the 32-byte Ed25519 key seed every child presents.
	Seed []byte
	// ReadyTimeout bounds the wait for every child's READY line (0 means
	// 30 s).
	ReadyTimeout time.Duration
	// Logger receives child lines that are not protocol lines.
	Logger *slog.Logger
	// Fill is how the children share new connections. With FillSequential
	// (the children's Command must say so too) each child is started once
	// the one before it listens, so child i is listener i of the
	// SO_REUSEPORT group, and the supervisor steers new connections to the
	// lowest-numbered child that has not reported FULL; once every child is
	// full, or if any child exits (the group's numbering then changes), the
	// kernel's spread takes over.
	Fill Fill
	// MaxConnections, when not 0, is the whole server's TCP_MAX_CONNECTIONS:
	// once every child is listening the supervisor logs their open-file
	// limits and warns when together they hold fewer connections
	// (ProcessFDProblem).
	MaxConnections uint64
}

// Supervisor runs and talks to the children of a multi-process server.
type Supervisor struct {
	children []*child
	logger   *slog.Logger
	mu       sync.Mutex // serialises Snapshot requests
	port     int

	fill      Fill
	steerMu   sync.Mutex
	full      []bool
	steered   int  // the child new connections go to (SpreadIndex: the kernel spreads), as asked
	applied   int  // the same, as a child last set it (its own hand-over or a STEERED answer)
	numbered  bool // the group's numbering is still the children's (no child has exited)
	retargets int  // steering changes the parent made (not a full child's own hand-over)
	stopping  atomic.Bool
}

type child struct {
	index   int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // METRICS lines
	ready   chan int    // port from READY
	nofile  uint64      // soft open-file limit from READY (0: unknown), set before ready
	exited  chan struct{}
	waitErr error
	last    Snapshot
	hasLast bool
}

// StartSupervisor starts the children and waits until every one is
// listening. On error every started child is killed.
func StartSupervisor(opt SupervisorOptions) (*Supervisor, error) {
	if opt.Count < 1 {
		return nil, fmt.Errorf("linkkeysserver: --processes must be at least 1, got %d", opt.Count)
	}
	if len(opt.Seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("linkkeysserver: supervisor needs a %d-byte key seed", ed25519.SeedSize)
	}
	timeout := opt.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	logger := opt.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sv := &Supervisor{logger: logger, fill: opt.Fill, full: make([]bool, opt.Count), numbered: true}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	waitReady := func(c *child) error {
		select {
		case p := <-c.ready:
			if sv.port == 0 {
				sv.port = p
			}
			return nil
		case <-c.exited:
			return fmt.Errorf("linkkeysserver: child %d exited before it was listening: %v", c.index, c.waitErr)
		case <-deadline.C:
			return fmt.Errorf("linkkeysserver: child %d was not listening within %s", c.index, timeout)
		}
	}
	fail := func(err error) (*Supervisor, error) {
		sv.Kill()
		return nil, err
	}
	for i := 0; i < opt.Count; i++ {
		cmd := opt.Command(i)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return fail(fmt.Errorf("linkkeysserver: child %d: %w", i, err))
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return fail(fmt.Errorf("linkkeysserver: child %d: %w", i, err))
		}
		// Its own process group: a terminal's Ctrl-C reaches only the parent, which forwards it.
		if err := procexec.Start(cmd, procexec.Options{Signal: syscall.SIGTERM, NewGroup: true}); err != nil {
			return fail(fmt.Errorf("linkkeysserver: starting child %d (%s): %w", i, cmd.Path, err))
		}
		c := &child{index: i, cmd: cmd, stdin: stdin, lines: make(chan string, 4), ready: make(chan int, 1), exited: make(chan struct{})}
		sv.steerMu.Lock() // onFill reads the list
		sv.children = append(sv.children, c)
		sv.steerMu.Unlock()
		go sv.readChild(c, stdout)
		if _, err := fmt.Fprintf(stdin, "%s\n", hex.EncodeToString(opt.Seed)); err != nil {
			return fail(fmt.Errorf("linkkeysserver: child %d: sending the key seed: %w", i, err))
		}
		if opt.Fill == FillSequential {
			// Listener i of the group must be child i: the next child starts once this one listens.
			if err := waitReady(c); err != nil {
				return fail(err)
			}
		}
	}
	if opt.Fill != FillSequential {
		for _, c := range sv.children {
			if err := waitReady(c); err != nil {
				return fail(err)
			}
		}
	}
	if opt.MaxConnections > 0 {
		nofiles := sv.Nofiles()
		var usable uint64
		for _, l := range nofiles {
			usable += UsableDescriptors(l)
		}
		logger.Info("linkkeysserver: server processes' open-file limits", "soft_limits", fmt.Sprint(nofiles), "reserved_each", fdHeadroom,
			"usable_together", usable, "max_connections", opt.MaxConnections)
		if p := ProcessFDProblem(opt.MaxConnections, nofiles, opt.Fill); p != "" {
			logger.Warn("linkkeysserver: " + p)
		}
	}
	return sv, nil
}

// Nofiles returns each child's soft open-file limit as it reported it when it
// started listening (after raising it to its hard limit; 0 when unknown).
func (sv *Supervisor) Nofiles() []uint64 {
	out := make([]uint64, len(sv.children))
	for i, c := range sv.children {
		out[i] = c.nofile
	}
	return out
}

// Steered returns the child new connections are steered to, as a child
// last set it, or SpreadIndex when the kernel spreads them (always so with
// FillSpread).
func (sv *Supervisor) Steered() int {
	if sv.fill != FillSequential {
		return SpreadIndex
	}
	sv.steerMu.Lock()
	defer sv.steerMu.Unlock()
	return sv.applied
}

// sendSteer asks child c to steer the group's new connections to child target; false when c has
// exited or its stdin is gone.
func (sv *Supervisor) sendSteer(c *child, target int) bool {
	select {
	case <-c.exited:
		return false
	default:
	}
	_, err := fmt.Fprintf(c.stdin, "%s %d\n", childSteer, target)
	return err == nil
}

// onFill records a child's FULL or ROOM line (moved: the child steered new connections on to
// child movedTo itself, or -2 when it did not), or its exit (exited), and steers new connections
// to the lowest-numbered child with room.
func (sv *Supervisor) onFill(index int, full bool, movedTo int, exited bool) {
	if sv.fill != FillSequential {
		return
	}
	if exited && sv.stopping.Load() {
		return // the children are being stopped
	}
	sv.steerMu.Lock()
	defer sv.steerMu.Unlock()
	if exited {
		sv.numbered = false
	} else {
		sv.full[index] = full
		if movedTo != notMoved {
			sv.steered, sv.applied = movedTo, movedTo
		}
	}
	target := SpreadIndex
	if sv.numbered {
		for i, f := range sv.full {
			if !f {
				target = i
				break
			}
		}
	}
	if target == sv.steered {
		if movedTo >= 0 && movedTo == target {
			// A full child handed on by itself: tell the next one that new connections come to
			// it now, so it hands on by itself in its turn (setting the same program again).
			sv.sendSteer(sv.children[target], target)
		}
		return
	}
	// The program belongs to the group: the previous target sets it (so it knows new connections
	// no longer come to it), and so does the new one (so it knows they do); when neither is a
	// running child, the first running child sets it.
	send := func(c *child) bool { return sv.sendSteer(c, target) }
	sent := false
	for _, r := range []int{sv.steered, target} {
		if r >= 0 && r < len(sv.children) && send(sv.children[r]) {
			sent = true
		}
	}
	for _, c := range sv.children {
		if sent {
			break
		}
		sent = send(c)
	}
	if !sent {
		return
	}
	sv.steered = target
	sv.retargets++
	switch {
	case exited:
		sv.logger.Warn("linkkeysserver: a server process exited; the kernel spreads new connections over the rest", "child", index)
	case target == SpreadIndex:
		sv.logger.Info("linkkeysserver: every server process is full; the kernel spreads new connections (each sheds at its cap)")
	default:
		sv.logger.Info("linkkeysserver: new connections go to server process", "child", target)
	}
}

func (sv *Supervisor) readChild(c *child, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, linkkeys.MetricsPrefix):
			c.lines <- l
		case l == childRoom:
			sv.onFill(c.index, false, notMoved, false)
		case strings.HasPrefix(l, childSteered+" "):
			if n, err := strconv.Atoi(strings.TrimPrefix(l, childSteered+" ")); err == nil {
				sv.steerMu.Lock()
				sv.applied = n
				sv.steerMu.Unlock()
			}
		case l == childFull || strings.HasPrefix(l, childFull+" "):
			moved := notMoved
			if k, ok := strings.CutPrefix(l, childFull+" "); ok {
				if n, err := strconv.Atoi(k); err == nil && n >= SpreadIndex && n < len(sv.children) {
					moved = n
				}
			}
			sv.onFill(c.index, true, moved, false)
		case strings.HasPrefix(l, childReady+" "):
			f := strings.Fields(strings.TrimPrefix(l, childReady+" "))
			if len(f) == 0 {
				break
			}
			if p, err := strconv.Atoi(f[0]); err == nil {
				if len(f) > 1 {
					c.nofile, _ = strconv.ParseUint(f[1], 10, 64)
				}
				select {
				case c.ready <- p:
				default:
				}
			}
		default:
			sv.logger.Info("linkkeysserver: child output", "child", c.index, "line", l)
		}
	}
	c.waitErr = c.cmd.Wait()
	close(c.exited)
	sv.onFill(c.index, false, notMoved, true)
}

// Count returns the number of children.
func (sv *Supervisor) Count() int { return len(sv.children) }

// PIDs returns the children's process ids.
func (sv *Supervisor) PIDs() []int {
	out := make([]int, len(sv.children))
	for i, c := range sv.children {
		out[i] = c.cmd.Process.Pid
	}
	return out
}

// Snapshot asks every child for a METRICS line ("metrics", or "final",
// which also stops the children) and returns the parsed lines in child
// order. A child that does not answer within timeout (or has exited)
// contributes its last known snapshot, and the error says which children
// were missing.
func (sv *Supervisor) Snapshot(final bool, timeout time.Duration) ([]Snapshot, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	word := childMetrics
	if final {
		word = childFinal
		sv.stopping.Store(true)
	}
	for _, c := range sv.children {
		_, _ = io.WriteString(c.stdin, word+"\n")
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	out := make([]Snapshot, len(sv.children))
	var errs []error
	for i, c := range sv.children {
		got := false
		for !got {
			select {
			case l := <-c.lines:
				m, err := linkkeys.ParseMetricsLine(l)
				s := Snapshot{MetricsLine: m}
				if err != nil {
					errs = append(errs, fmt.Errorf("child %d: %w", c.index, err))
					continue
				}
				if final && s.Label != "final" {
					continue // an earlier request's answer
				}
				c.last, c.hasLast, got = s, true, true
			case <-c.exited:
				// Drain what it printed before exiting.
				select {
				case l := <-c.lines:
					if m, err := linkkeys.ParseMetricsLine(l); err == nil {
						c.last, c.hasLast = Snapshot{MetricsLine: m}, true
						got = true
						continue
					}
				default:
				}
				errs = append(errs, fmt.Errorf("child %d has exited (%v)", c.index, c.waitErr))
				got = true
			case <-t.C:
				errs = append(errs, fmt.Errorf("child %d did not answer within %s", c.index, timeout))
				got = true
			}
		}
		out[i] = c.last
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("linkkeysserver: collecting child metrics: %w", errors.Join(errs...))
	}
	return out, nil
}

// Tell writes a command word to every child's stdin (a child that has exited
// misses it).
func (sv *Supervisor) Tell(word string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, c := range sv.children {
		_, _ = io.WriteString(c.stdin, word+"\n")
	}
}

// Signal forwards sig to every child that is still running.
func (sv *Supervisor) Signal(sig os.Signal) {
	sv.stopping.Store(true)
	for _, c := range sv.children {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(sig)
		}
	}
}

// Wait waits for every child to exit, killing those still running after
// timeout, and returns the first failure.
func (sv *Supervisor) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	sv.stopping.Store(true)
	var errs []error
	for _, c := range sv.children {
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-t.C:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		if c.waitErr != nil {
			errs = append(errs, fmt.Errorf("child %d: %w", c.index, c.waitErr))
		}
	}
	return errors.Join(errs...)
}

// Kill kills every child and waits for it.
func (sv *Supervisor) Kill() {
	sv.stopping.Store(true)
	for _, c := range sv.children {
		_ = c.cmd.Process.Kill()
		_ = c.stdin.Close()
	}
	for _, c := range sv.children {
		<-c.exited
	}
}
