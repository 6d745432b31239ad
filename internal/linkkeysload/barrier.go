package linkkeysload

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
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

// barrierConnectGrace bounds how long the parent waits for workers to connect at all.
const barrierConnectGrace = 30 * time.Second

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
}

func newBarrier(n int) (*barrier, error) {
	dir, err := os.MkdirTemp("", "lkload-barrier-*")
	if err != nil {
		return nil, errorf("making the hold barrier: %w", err)
	}
	path := filepath.Join(dir, "b.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, errorf("making the hold barrier: %w", err)
	}
	b := &barrier{ln: ln, path: path, dir: dir, n: n, all: make(chan struct{})}
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
		b.mu.Unlock()
		go func() {
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
					n, _ := strconv.ParseInt(rest, 10, 64)
					b.finish(n)
					// Keep reading: EOF after ready is the worker exiting after release.
					for sc.Scan() {
					}
					return
				}
			}
			b.finish(0) // gone before ready
		}()
	}
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
