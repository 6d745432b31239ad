package linkkeysserver

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/syncio"
)

// Multi-process mode: the child's side (serving, answering the parent, sequential-fill steering).

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
