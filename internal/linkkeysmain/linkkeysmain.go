// Package linkkeysmain is the LinkKeys reference server's command: its flags,
// its environment and the wiring of linkkeysserver, its SQLite store, the
// METRICS loop and the Prometheus endpoint, for one process, the parent of
// --processes children and each child. Two commands share it, so their flags
// and behaviour cannot drift: `linkkeys-loadtest server` (and `loadproof
// linkkeys server`), which internal/cli mounts in the cobra tree, and the lean
// cmd/linkkeys-server, a thin main over this package alone. The lean binary
// links only the server side (no load clients, NATS, Kubernetes types, pprof
// or cobra), so the file-backed part of its resident memory (the binary's own
// code and read-only data, paged in as they run) is a fraction of the fat
// binary's; docs/benchmarks.md, LinkKeys server memory, has the figures.
//
// Flags are registered on a pflag.FlagSet ([Flags.Register]); [Run] runs the
// command; errors that choose an exit status are [*ExitError].
package linkkeysmain

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/cmdenv"
	"github.com/loadproof/loadproof/internal/durflag"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/procexec"
)

// Exit statuses of the server command (internal/cmdenv's, shared with the command tree).
const (
	ExitUsage       = cmdenv.ExitUsage       // bad flags or environment
	ExitCouldNotRun = cmdenv.ExitCouldNotRun // the server could not start (address in use, children failed)
)

// ExitError carries an exit status with an error.
type ExitError = cmdenv.ExitError

func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Env is what the command needs from the outside world; tests substitute it.
type Env = cmdenv.Env

// Flags are the server command's flags: the seed's (docs/protocol-linkkeys.md, The seed's
// commands, server) plus ours. Register sets their defaults.
type Flags struct {
	DBPath            string
	Domain            string
	InfoFile          string
	MetricsInterval   uint64
	DurationSecs      uint64
	MetricsAddr       string
	EmptyDomainKeys   bool
	Listen            string
	Processes         int
	ProcessFill       string
	PerProcessMetrics bool
	ReleaseIdleMemory bool
	ParkAfter         time.Duration
	SourcePrefixes    []string
	ChildIndex        int
	ChildCount        int

	listenChanged func() bool
}

// Short and Long describe the command in help texts.
const (
	Short = "Run the LinkKeys reference TCP/TLS server (prints METRICS lines)"
	Long  = "server runs the LinkKeys reference server: a self-signed Ed25519 certificate, the full admission control\n" +
		"(TCP_* and PUBLIC_READ_* variables), a real SQLite file, and a METRICS line on stdout every interval.\n" +
		"With TCP_SOURCE_PREFIXES or --source-prefix it also counts its accounting per named source range.\n" +
		"It writes an info file (port, domain, fingerprint, pid) for the client subcommands. By default the\n" +
		"server's own key is stored as an active signing key, so get-domain-keys returns one key;\n" +
		"--empty-domain-keys serves the upstream load test's empty list. DOMAIN_KEY_PASSPHRASE, when set,\n" +
		"stores the key encrypted and reuses it on later starts."
)

// Register defines the flags on fl, bound to f.
func (f *Flags) Register(fl *pflag.FlagSet) {
	fl.StringVar(&f.DBPath, "db-path", "loadtest-data/loadtest.sqlite3", "SQLite database `file` (created and migrated if missing)")
	fl.StringVar(&f.Domain, "domain", "loadtest.local", "domain name: certificate SAN/CN and get-domain-keys' domain")
	fl.StringVar(&f.InfoFile, "info-file", "loadtest-data/loadtest-info.json", "info `file` written once the listener is bound")
	fl.Var(durflag.NewSeconds(&f.MetricsInterval, 5), "metrics-interval-secs", "time between METRICS lines, as 5 or 5s (at least 1 s)")
	fl.Var(durflag.NewSeconds(&f.DurationSecs, 0), "duration-secs", "exit after this long (120 or 2m); 0 runs until Ctrl-C or SIGTERM")
	fl.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics on this `address` (off when empty)")
	fl.BoolVar(&f.EmptyDomainKeys, "empty-domain-keys", false, "do not store the server key: get-domain-keys on a fresh database returns the upstream load test's empty list")
	fl.StringVar(&f.Listen, "listen", "127.0.0.1:0", "listen `address` (host:port; port 0 picks a free one); when not given and TCP_PORT is set, 127.0.0.1:$TCP_PORT")
	fl.IntVar(&f.Processes, "processes", 1, "server processes sharing the port with SO_REUSEPORT; limits are divided among them")
	fl.StringVar(&f.ProcessFill, "process-fill", "auto", "with --processes: `auto` (sequential unless each process's share of TCP_MAX_CONNECTIONS is under 8 times the listen backlog, then spread), "+
		"sequential (new connections go to one process at a time, in order, until its share of TCP_MAX_CONNECTIONS or its open-file limit less 256, whichever is less, is nearly full; each process then enforces the whole rate budgets) "+
		"or spread (the kernel spreads new connections over every process by hash)")
	fl.BoolVar(&f.PerProcessMetrics, "per-process-metrics", false, "with --processes, also print each process's METRICS line as PROCESS_METRICS <i> {json}")
	fl.BoolVar(&f.ReleaseIdleMemory, "release-idle-memory", true, "return freed heap memory to the OS and drop the mappings of the binary's read-only pages at start and when the server goes quiet after activity, and (unless GOGC is set) hold the collector's heap goal about 4 MiB above the live heap at rest (GOGC from 50 to about 100) while the live heap is under 64 MiB (see docs/benchmarks.md)")
	fl.StringArrayVar(&f.SourcePrefixes, "source-prefix", nil, "count the accounting of connections from a named source range apart, as `NAME=CIDR` or NAME=FIRST-LAST "+
		"(repeatable; added to those of TCP_SOURCE_PREFIXES; METRICS fields source_<NAME>_<counter>)")
	fl.DurationVar(&f.ParkAfter, "park-after", linkkeysserver.DefaultParkAfter, "park a connection (no goroutine, no buffers) after it had nothing to read this long; negative never parks (benchmark comparisons)")
	_ = fl.MarkHidden("park-after")
	fl.IntVar(&f.ChildIndex, "child-index", 0, "internal: index of this child process")
	fl.IntVar(&f.ChildCount, "child-count", 0, "internal: number of child processes")
	_ = fl.MarkHidden("child-index")
	_ = fl.MarkHidden("child-count")
	f.listenChanged = func() bool { return fl.Changed("listen") }
}

// Run runs the server as the flags say: one process, the parent of --processes children, or one
// child. cmdPrefix is the command line that names the server command in this binary, without the
// binary (["server"], ["linkkeys", "server"], or none for cmd/linkkeys-server): the parent starts
// its children as this binary with cmdPrefix and the child flags.
func Run(ctx context.Context, env Env, f Flags, cmdPrefix []string) error {
	// The server command serves no heap profile, so it keeps no allocation samples: the
	// profiler's hash table and stack records are about 1.4 MiB of anonymous memory once
	// sampling starts (runtime/metrics /memory/classes/profiling/buckets).
	runtime.MemProfileRate = 0
	if f.ChildCount > 0 {
		return runChild(ctx, env, f)
	}
	return runServer(ctx, env, f, f.listenChanged != nil && f.listenChanged(), cmdPrefix)
}

// serverStop waits for the end of the METRICS loop and reports why it
// stopped: a signal (SIGINT or SIGTERM), the context, or the duration.
type serverStop struct {
	sigs chan os.Signal
	done chan struct{}
	got  os.Signal // set by the loopContext goroutine before done closes
}

func newServerStop() *serverStop {
	s := &serverStop{sigs: make(chan os.Signal, 2)}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	return s
}

func (s *serverStop) stop() { signal.Stop(s.sigs) }

// loopContext returns a context cancelled by ctx or by the first signal.
func (s *serverStop) loopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		select {
		case sig := <-s.sigs:
			s.got = sig
			cancel()
		case <-lctx.Done():
		}
	}()
	return lctx, cancel
}

// signal returns the signal that ended the loop, if any; call it after
// cancelling the loop context. When the parent context was cancelled by
// cli.Main's own handler, the same signal reaches our channel within
// moments; wait briefly for it.
func (s *serverStop) signal(ctxDone bool) os.Signal {
	<-s.done
	if s.got != nil || !ctxDone {
		return s.got
	}
	select {
	case sig := <-s.sigs:
		return sig
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

func printStopLine(w io.Writer, sig os.Signal) {
	switch sig {
	case os.Interrupt:
		fmt.Fprintln(w, "received ctrl-c, shutting down")
	case syscall.SIGTERM:
		fmt.Fprintln(w, "received SIGTERM, shutting down")
	}
}

func serverConfig(env Env, f Flags) (linkkeysserver.Config, error) {
	cfg, err := linkkeysserver.ConfigFromEnv(env.Getenv)
	if err != nil {
		return cfg, &ExitError{Code: ExitUsage, Err: err}
	}
	if len(f.SourcePrefixes) > 0 {
		ps, problems := linkkeysserver.ParseSourcePrefixes(strings.Join(f.SourcePrefixes, ","))
		cfg.SourcePrefixes = append(cfg.SourcePrefixes, ps...)
		if len(problems) == 0 {
			problems = linkkeysserver.CheckSourcePrefixes(cfg.SourcePrefixes)
		}
		if len(problems) > 0 {
			return cfg, usageError("--source-prefix (with %s): %s", linkkeysserver.SourcePrefixesVar, strings.Join(problems, "; "))
		}
	}
	cfg.Domain = f.Domain
	cfg.ParkAfter = f.ParkAfter
	if f.ParkAfter == 0 {
		cfg.ParkAfter = -1
	}
	if f.Domain == "" {
		return cfg, usageError("--domain must not be empty")
	}
	return cfg, nil
}

func mkParents(paths ...string) error {
	for _, p := range paths {
		if d := filepath.Dir(p); d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("creating directory %s: %w", d, err)
			}
		}
	}
	return nil
}

func listenAddr(cfg linkkeysserver.Config, f Flags, changed bool) string {
	if !changed && cfg.Port != 0 {
		return "127.0.0.1:" + strconv.Itoa(int(cfg.Port))
	}
	return f.Listen
}

// StartPrometheus serves /metrics on addr, and /config (the server's config: line) when configLine
// is not empty; it returns the server and the address it bound (which the info file advertises to
// clients as metrics_addr).
func StartPrometheus(addr string, src func() linkkeysserver.Snapshot, process bool, configLine string, logger *slog.Logger) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", linkkeysserver.NewPrometheusExporter(src, process))
	if configLine != "" {
		// A load client on another machine verifies the limits the server runs from this line,
		// beside its METRICS (docs/capacity.md, Plans against an existing server).
		mux.HandleFunc("/config", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, configLine+"\n")
		})
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("prometheus endpoint stopped", "err", err)
		}
	}()
	logger.Info("prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return hs, ln.Addr().String(), nil
}

// runServer is the single-process server, or the parent of
// --processes children. Startup order follows the seed's server.
func runServer(ctx context.Context, env Env, f Flags, listenChanged bool, cmdPrefix []string) error {
	logger := env.Logger
	cfg, err := serverConfig(env, f)
	if err != nil {
		return err
	}
	if _, err := linkkeysserver.ParseFill(f.ProcessFill); err != nil {
		return usageError("%v", err)
	}
	if f.Processes < 1 {
		return usageError("--processes must be at least 1, got %d", f.Processes)
	}
	stop := newServerStop()
	defer stop.stop()
	if err := mkParents(f.DBPath, f.InfoFile); err != nil {
		return err
	}
	store, err := linkkeysserver.OpenStore(ctx, f.DBPath)
	if err != nil {
		return err
	}
	defer store.Close()
	key, err := store.PrepareServerKey(ctx, linkkeysserver.ServerKeyOptions{
		Passphrase: []byte(env.Getenv("DOMAIN_KEY_PASSPHRASE")),
		DontStore:  f.EmptyDomainKeys,
	})
	if err != nil {
		return err
	}
	fingerprint := linkkeys.Fingerprint(key.Public().(ed25519.PublicKey))
	fmt.Fprintln(env.Stdout, linkkeysserver.ConfigLine(cfg))
	linkkeysserver.RaiseAndReportFDLimit(logger, cfg.MaxConnections, f.Processes)
	addr := listenAddr(cfg, f, listenChanged)
	if f.Processes > 1 {
		return runParent(ctx, env, f, cfg, stop, key, fingerprint, addr, cmdPrefix)
	}

	cert, err := linkkeys.SelfSignedCert(cfg.Domain, key, time.Time{}, time.Time{})
	if err != nil {
		return err
	}
	ln, backlogErr, err := linkkeysserver.Listen(ctx, addr, linkkeysserver.ListenOptions{Backlog: cfg.ListenBacklog})
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	if backlogErr != nil {
		logger.Warn("could not set the listen backlog", "err", backlogErr)
	}
	srv := &linkkeysserver.Server{Config: cfg, TLSConfig: linkkeys.ServerTLSConfig(cert), Keys: store, Logger: logger}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	var metricsAddr string
	if f.MetricsAddr != "" {
		hs, bound, err := StartPrometheus(f.MetricsAddr, srv.Metrics, true, linkkeysserver.ConfigLine(cfg), logger)
		if err != nil {
			srv.Close()
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		defer hs.Close()
		metricsAddr = bound
	}
	tcp := ln.Addr().(*net.TCPAddr)
	if err := linkkeys.WriteInfo(f.InfoFile, linkkeys.Info{Port: uint16(tcp.Port), Domain: cfg.Domain, Fingerprint: fingerprint, PID: uint32(os.Getpid()), MetricsAddr: metricsAddr,
		Host: linkkeys.InfoHost(tcp.IP.String())}); err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(env.Stdout, "listening on %s pid=%d (info written to %s)\n", tcp.AddrPort(), os.Getpid(), f.InfoFile)

	lctx, cancel := stop.loopContext(ctx)
	if f.ReleaseIdleMemory {
		// The pacer first: its collection at start measures the live heap at rest, and the
		// releaser's first trim then drops the code pages that collection touched.
		if env.Getenv("GOGC") == "" {
			(&linkkeysserver.GCPacer{}).Run(lctx)
		}
		(&linkkeysserver.MemoryReleaser{}).Start(lctx, 2*time.Second, srv.Metrics)
	}
	loopErr := make(chan error, 1)
	go func() {
		loopErr <- linkkeysserver.MetricsLoop(lctx, env.Stdout, time.Duration(f.MetricsInterval)*time.Second,
			time.Duration(f.DurationSecs)*time.Second, srv.Metrics)
	}()
	var runErr error
	select {
	case err := <-loopErr:
		if err != nil && !errors.Is(err, context.Canceled) {
			runErr = err
		}
	case err := <-serveErr:
		runErr = fmt.Errorf("server stopped: %w", err)
		cancel()
		<-loopErr
	}
	cancel()
	printStopLine(env.Stdout, stop.signal(ctx.Err() != nil))
	final := srv.Metrics()
	final.Label = "final"
	if err := linkkeys.WriteMetricsLine(env.Stdout, final.MetricsLine); err != nil && runErr == nil {
		runErr = err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return runErr
}

// runParent starts --processes children on one SO_REUSEPORT
// port, prints the summed METRICS lines and forwards SIGINT/SIGTERM.
func runParent(ctx context.Context, env Env, f Flags, cfg linkkeysserver.Config, stop *serverStop,
	key ed25519.PrivateKey, fingerprint, addr string, cmdPrefix []string) error {
	logger := env.Logger
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--listen %q: %v", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return usageError("--listen %q: port %q is not a number", addr, portStr)
	}
	res, err := linkkeysserver.ReservePort(host, port)
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	exe, err := os.Executable()
	if err != nil {
		res.Release()
		return fmt.Errorf("finding this binary to start --processes children: %w", err)
	}
	childAddr := net.JoinHostPort(host, strconv.Itoa(res.Port))
	asked, _ := linkkeysserver.ParseFill(f.ProcessFill) // checked in runServer
	fill, why := linkkeysserver.ChooseFill(asked, cfg, f.Processes)
	switch {
	case why != "":
		logger.Info("process fill", "fill", fill.String(), "why", why)
	case fill == linkkeysserver.FillSequential:
		if p := linkkeysserver.SequentialFillProblem(cfg, f.Processes); p != "" {
			logger.Warn("--process-fill sequential: " + p)
		}
	}
	sv, err := linkkeysserver.StartSupervisor(linkkeysserver.SupervisorOptions{
		Count: f.Processes,
		Fill:  fill,
		Seed:  key.Seed(),
		Command: func(i int) *exec.Cmd {
			args := append(append([]string{}, cmdPrefix...),
				"--child-index", strconv.Itoa(i), "--child-count", strconv.Itoa(f.Processes),
				"--listen", childAddr, "--db-path", f.DBPath, "--domain", f.Domain,
				"--release-idle-memory="+strconv.FormatBool(f.ReleaseIdleMemory), "--park-after", f.ParkAfter.String(),
				"--process-fill", fill.String())
			for _, p := range f.SourcePrefixes {
				args = append(args, "--source-prefix", p)
			}
			cmd := exec.Command(exe, args...)
			cmd.Stderr = env.Stderr
			return cmd
		},
		Logger: logger,
		// The children report their open-file limits; the parent warns when together they hold
		// fewer connections than TCP_MAX_CONNECTIONS.
		MaxConnections: cfg.MaxConnections,
	})
	res.Release()
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	logger.Info("started server processes", "count", sv.Count(), "pids", fmt.Sprint(sv.PIDs()))
	parent := &linkkeysserver.Parent{Supervisor: sv, Logger: logger}
	if f.PerProcessMetrics {
		parent.PerProcess = env.Stdout
	}
	parent.Collect(false) // starts the clock and gives the Prometheus endpoint a first sum
	var metricsAddr string
	if f.MetricsAddr != "" {
		hs, bound, err := StartPrometheus(f.MetricsAddr, parent.Last, false, linkkeysserver.ConfigLine(cfg), logger)
		if err != nil {
			sv.Kill()
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		defer hs.Close()
		metricsAddr = bound
	}
	if err := linkkeys.WriteInfo(f.InfoFile, linkkeys.Info{Port: uint16(res.Port), Domain: cfg.Domain, Fingerprint: fingerprint, PID: uint32(os.Getpid()), MetricsAddr: metricsAddr,
		Host: linkkeys.InfoHost(host)}); err != nil {
		sv.Kill()
		return err
	}
	fmt.Fprintf(env.Stdout, "listening on %s pid=%d (info written to %s)\n", childAddr, os.Getpid(), f.InfoFile)

	lctx, cancel := stop.loopContext(ctx)
	err = linkkeysserver.MetricsLoop(lctx, env.Stdout, time.Duration(f.MetricsInterval)*time.Second,
		time.Duration(f.DurationSecs)*time.Second, func() linkkeysserver.Snapshot { return parent.Collect(false) })
	cancel()
	var runErr error
	if err != nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	sig := stop.signal(ctx.Err() != nil)
	printStopLine(env.Stdout, sig)
	final := parent.Finish(sig, 10*time.Second)
	if err := linkkeys.WriteMetricsLine(env.Stdout, final.MetricsLine); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// runChild is one --processes child (hidden flags).
func runChild(ctx context.Context, env Env, f Flags) error {
	fill, err := linkkeysserver.ParseFill(f.ProcessFill)
	if err != nil {
		return usageError("%v", err)
	}
	cfg, err := serverConfig(env, f)
	if err != nil {
		return err
	}
	store, err := linkkeysserver.OpenStore(ctx, f.DBPath)
	if err != nil {
		return err
	}
	defer store.Close()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return linkkeysserver.RunChild(ctx, linkkeysserver.ChildOptions{
		Index: f.ChildIndex, Count: f.ChildCount, Addr: f.Listen, Config: cfg, Keys: store,
		Stdin: os.Stdin, Stdout: env.Stdout, Signals: sigs, Logger: env.Logger.With("child", f.ChildIndex),
		ReleaseIdleMemory: f.ReleaseIdleMemory, Fill: fill,
	})
}

// Main runs the server command on its own, as cmd/linkkeys-server does, with args (without the
// binary's name) and returns the exit status: flags as `linkkeys-loadtest server` takes them,
// --help, exit 2 for a usage error, the first SIGINT or SIGTERM drains and a second exits at once.
// --processes children are this binary again, with no command name.
func Main(args []string) int {
	env := *cmdenv.OS()
	ctx, stop := procexec.SignalContext()
	defer stop()
	procexec.WatchParent() // after SignalContext, so a SIGTERM from the watcher drains like any other
	return run(ctx, env, args)
}

// run parses args and runs the command; Main without the process's signals and environment.
func run(ctx context.Context, env Env, args []string) int {
	fl := pflag.NewFlagSet("linkkeys-server", pflag.ContinueOnError)
	fl.SetOutput(env.Stderr)
	fl.Usage = func() {
		fmt.Fprintf(env.Stderr, "%s\n\n%s\n\nUsage:\n  linkkeys-server [flags]\n\nFlags:\n%s", Short, Long, fl.FlagUsages())
	}
	var f Flags
	f.Register(fl)
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(env.Stderr, "error: %v\n", err)
		return ExitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "error: linkkeys-server takes no arguments, got %q\n", fl.Args())
		return ExitUsage
	}
	err := Run(ctx, env, f, nil)
	if err == nil {
		return 0
	}
	fmt.Fprintf(env.Stderr, "error: %v\n", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
