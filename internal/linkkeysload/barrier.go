package linkkeysload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The hold barrier makes every worker of a connections run hold its connections at the same time.
// The parent serves a Unix socket; each worker connects to it when it starts, sends "ready <held>"
// when its attempts are done, and then waits. The parent starts the hold when every worker is ready
// (a worker whose socket closes counts as done, so a crashed worker cannot stall the others) and,
// hold-secs later, releases them all by closing their sockets. Waiting on a socket needs no polling,
// and a parent that dies releases its workers the same way.

// With workers in turn (ConnectionsConfig.WorkersInTurn) the barrier also hands out turns: a
// worker that has joined waits for a "go" line before its attempts, the parent sends it to one
// worker at a time, in the order they joined, and to the next when the one before is ready or gone.
// The parent then measures the ramp itself: from the first "go" to the last worker's end.

// barrierConnectGrace bounds how long the parent waits for workers to connect at all.
const barrierConnectGrace = 30 * time.Second

// barrierGo is the line that gives a worker its turn.
const barrierGo = "go\n"

type barrier struct {
	ln    net.Listener
	path  string
	dir   string
	n     int
	mu    sync.Mutex
	conns []net.Conn
	done  int   // ready or gone
	held  int64 // sum of ready counts
	all   chan struct{}
	once  sync.Once

	inTurn     bool
	queue      []net.Conn // joined, waiting for their turn
	active     net.Conn   // the worker whose turn it is
	turnsFrom  time.Time  // the first go
	turnsUntil time.Time  // the last worker's end
}

// listenTemp listens on a Unix socket in a directory of its own (the parent's side of the hold
// barrier and of a split combined run's gate); the caller closes ln and removes dir. what names
// the socket in errors.
func listenTemp(what string) (ln net.Listener, dir, path string, err error) {
	dir, err = os.MkdirTemp("", "lkload-*")
	if err != nil {
		return nil, "", "", errorf("making %s: %w", what, err)
	}
	path = filepath.Join(dir, "s.sock")
	if ln, err = net.Listen("unix", path); err != nil {
		os.RemoveAll(dir)
		return nil, "", "", errorf("making %s: %w", what, err)
	}
	return ln, dir, path, nil
}

func newBarrier(n int, inTurn bool) (*barrier, error) {
	ln, dir, path, err := listenTemp("the hold barrier")
	if err != nil {
		return nil, err
	}
	b := &barrier{ln: ln, path: path, dir: dir, n: n, all: make(chan struct{}), inTurn: inTurn}
	go b.serve()
	go func() {
		t := time.NewTimer(barrierConnectGrace)
		defer t.Stop()
		select {
		case <-t.C:
			b.mu.Lock()
			missing := b.n - len(b.conns)
			b.mu.Unlock()
			for range missing {
				b.finish(0)
			}
		case <-b.all:
		}
	}()
	return b, nil
}

func (b *barrier) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		if b.inTurn {
			b.queue = append(b.queue, c)
			b.nextTurnLocked()
		}
		b.mu.Unlock()
		go func() {
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
					n, _ := strconv.ParseInt(rest, 10, 64)
					b.finishConn(c, n)
					// Keep reading: EOF after ready is the worker exiting after release.
					for sc.Scan() {
					}
					return
				}
			}
			b.finishConn(c, 0) // gone before ready
		}()
	}
}

// finishConn counts worker c ready (or gone) and, in turn, gives the next worker its turn.
func (b *barrier) finishConn(c net.Conn, held int64) {
	b.mu.Lock()
	if b.inTurn {
		if b.active == c {
			b.active = nil
			b.turnsUntil = time.Now()
		} else {
			b.queue = slices.DeleteFunc(b.queue, func(q net.Conn) bool { return q == c })
		}
		b.nextTurnLocked()
	}
	b.mu.Unlock()
	b.finish(held)
}

// nextTurnLocked gives the turn to the next joined worker when no one has it.
func (b *barrier) nextTurnLocked() {
	for b.active == nil && len(b.queue) > 0 {
		c := b.queue[0]
		b.queue = b.queue[1:]
		if _, err := io.WriteString(c, barrierGo); err != nil {
			continue // gone: its reader counts it
		}
		b.active = c
		if b.turnsFrom.IsZero() {
			b.turnsFrom = time.Now()
		}
	}
}

// turns returns the time from the first worker's turn to the last one's end (zero when no turn
// was given or one is still running).
func (b *barrier) turns() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.turnsFrom.IsZero() || b.active != nil || b.turnsUntil.Before(b.turnsFrom) {
		return 0
	}
	return b.turnsUntil.Sub(b.turnsFrom)
}

func (b *barrier) finish(held int64) {
	b.mu.Lock()
	b.done++
	b.held += held
	if b.done >= b.n {
		b.once.Do(func() { close(b.all) })
	}
	b.mu.Unlock()
}

// allReady is closed when every worker is ready or gone.
func (b *barrier) allReady() <-chan struct{} { return b.all }

func (b *barrier) heldTotal() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// release lets every worker go and removes the socket.
func (b *barrier) release() {
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	_ = os.RemoveAll(b.dir)
}

// barrierClient is the worker side of the barrier. A worker joins when it starts, so the parent
// sees a worker that dies at any point after that as a closed socket.
type barrierClient struct {
	c net.Conn
}

// joinBarrier connects to the parent's barrier; with no path (or no parent listening) the worker
// holds for nothing and releases at once.
func joinBarrier(path string) *barrierClient {
	if path == "" {
		return &barrierClient{}
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return &barrierClient{}
	}
	return &barrierClient{c: c}
}

// waitTurn blocks until the parent gives this worker its turn (workers in turn). Without a
// barrier it returns at once.
func (b *barrierClient) waitTurn(ctx context.Context) error {
	if b.c == nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() { _ = b.c.SetReadDeadline(time.Now()) })
	defer stop()
	// Byte by byte: what follows the line belongs to wait.
	var line []byte
	var buf [1]byte
	for len(line) < len(barrierGo) {
		if _, err := b.c.Read(buf[:]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errorf("worker: the parent ended the hold barrier before this worker's turn: %w", err)
		}
		line = append(line, buf[0])
	}
	if string(line) != barrierGo {
		return errorf("worker: the hold barrier sent %q, not the turn", line)
	}
	_ = b.c.SetReadDeadline(time.Time{})
	return nil
}

// wait reports ready with the number of connections held and blocks until the parent releases the
// workers or ctx ends.
func (b *barrierClient) wait(ctx context.Context, held int64) {
	if b.c == nil {
		return
	}
	defer b.c.Close()
	stop := context.AfterFunc(ctx, func() { _ = b.c.Close() })
	defer stop()
	if _, err := fmt.Fprintf(b.c, "ready %d\n", held); err != nil {
		return
	}
	var buf [1]byte
	for {
		if _, err := b.c.Read(buf[:]); err != nil {
			return
		}
	}
}

// close leaves the barrier without waiting (a worker that fails early).
func (b *barrierClient) close() {
	if b.c != nil {
		_ = b.c.Close()
	}
}
