package linkkeysserver

import (
	"bufio"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
)

// Multi-process mode: the parent's side (starting, steering, sampling and stopping the children).

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
