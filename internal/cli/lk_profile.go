package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/launch"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysmain"
	"github.com/loadproof/loadproof/internal/linkkeysserver"
	"github.com/loadproof/loadproof/internal/profiling"
)

// newLinkKeysProfileCmd is `linkkeys-loadtest profile`: the Keycast tool's profile for the LinkKeys
// server. It runs the reference server in this process with the CPU profiler on, runs
// request-bench or handshake-bench against it as a child process (so the client's work stays out
// of the profile), and writes the CPU and heap profiles, a flame graph page for each, and the
// bench's result file.
func newLinkKeysProfileCmd(env *Env) *cobra.Command {
	var bench, output string
	var duration uint64
	c := &cobra.Command{
		Use:   "profile [-- BENCH FLAGS...]",
		Short: "Profile the reference server under request-bench or handshake-bench: CPU and heap profiles, flame graphs",
		Long: "profile starts the LinkKeys reference server in this process with the CPU profiler on and runs\n" +
			"--bench (request-bench or handshake-bench) against it from a child process for --duration-secs,\n" +
			"then writes into --output: linkkeys-cpu-<ts>.pprof and linkkeys-heap-<ts>.pprof, a self-contained\n" +
			"flame graph page beside each (.flame.html: opens in a browser, no Go toolchain or graphviz), the\n" +
			"bench's result (bench-<ts>.json, for `loadproof report`) and the server's info file. Flags after\n" +
			"`--` go to the bench (for example -- --connections 64 --pipeline 8). --serve ADDR then serves\n" +
			"pprof's web UI for the CPU profile until Ctrl-C (only a Host naming it; --serve-token or\n" +
			"LOADPROOF_SERVE_TOKEN requires a token, printed in the URL on stderr). The server's limits come from the TCP_* and\n" +
			"PUBLIC_READ_* variables, as for `server`: with the defaults the public-read limiter refuses most\n" +
			"of request-bench's requests, so the profile shows the limiter; raise PUBLIC_READ_* to profile\n" +
			"dispatch and the cache.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if bench != "request-bench" && bench != "handshake-bench" {
				return usageError("profile: --bench %q: want request-bench or handshake-bench", bench)
			}
			if duration == 0 {
				return usageError("profile: --duration-secs must be at least 1")
			}
			return runLinkKeysProfile(cmd.Context(), cmd, env, bench, output, duration, args)
		},
	}
	f := c.Flags()
	addProfileFlameFlags(f)
	f.StringVar(&bench, "bench", "request-bench", "the load: request-bench or handshake-bench")
	bindDurationSecs(f, &duration, 10, "how long the bench runs (the CPU profile covers it)")
	f.StringVar(&output, "output", "./linkkeys-profile", "output directory")
	return c
}

func runLinkKeysProfile(ctx context.Context, cmd *cobra.Command, env *Env, bench, output string, duration uint64, benchArgs []string) error {
	if err := os.MkdirAll(output, 0o755); err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("profile: creating --output %s: %w", output, err)}
	}
	cfg, err := linkkeysserver.ConfigFromEnv(env.Getenv)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	cfg.Domain = "loadtest.local"
	ts := time.Now().Format("20060102-150405")
	paths := struct{ cpu, heap, result, info, db string }{
		filepath.Join(output, "linkkeys-cpu-"+ts+".pprof"), filepath.Join(output, "linkkeys-heap-"+ts+".pprof"),
		filepath.Join(output, "bench-"+ts+".json"), filepath.Join(output, "server-info.json"), filepath.Join(output, "server.sqlite3"),
	}
	srv, stop, err := startProfileServer(ctx, env, cfg, paths.db, paths.info)
	if err != nil {
		return err
	}
	defer stop()

	benchErr, err := profiling.Self(paths.cpu, paths.heap, func() error {
		return runBenchChild(ctx, cmd, env, bench, paths.info, paths.result, duration, benchArgs)
	})
	switch {
	case errors.Is(err, profiling.ErrCPUStart):
		return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("profile: %w", err)}
	case err != nil:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: %w", err)}
	}
	final := srv.Metrics()
	fmt.Fprintf(env.Stdout, "\nServer during the profile: %d connections accepted, %d frames processed\n",
		final.AcceptedConnections, final.FramesProcessed)
	fmt.Fprintf(env.Stdout, "\nOutput files:\n  CPU profile:  %s\n  Heap profile: %s\n  Bench result: %s (loadproof report --format html %s)\n",
		paths.cpu, paths.heap, paths.result, paths.result)
	if err := writeFlamePages(env, paths.cpu, paths.heap); err != nil {
		return err
	}
	if benchErr != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("profile: %s failed, so the profile shows a failing run: %w", bench, benchErr)}
	}
	return serveProfile(ctx, cmd, env, paths.cpu)
}

// startProfileServer runs the reference server in this process on a free loopback port (with its
// Prometheus endpoint, so the bench samples the server each interval) and writes the info file.
func startProfileServer(ctx context.Context, env *Env, cfg linkkeysserver.Config, dbPath, infoPath string) (*linkkeysserver.Server, func(), error) {
	logger := env.Logger
	store, err := linkkeysserver.OpenStore(ctx, dbPath)
	if err != nil {
		return nil, nil, &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	key, err := store.PrepareServerKey(ctx, linkkeysserver.ServerKeyOptions{Passphrase: []byte(env.Getenv("DOMAIN_KEY_PASSPHRASE"))})
	if err != nil {
		store.Close()
		return nil, nil, &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	cert, err := linkkeys.SelfSignedCert(cfg.Domain, key, time.Time{}, time.Time{})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	ln, _, err := linkkeysserver.Listen(ctx, "127.0.0.1:0", linkkeysserver.ListenOptions{Backlog: cfg.ListenBacklog})
	if err != nil {
		store.Close()
		return nil, nil, &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	srv := &linkkeysserver.Server{Config: cfg, TLSConfig: linkkeys.ServerTLSConfig(cert), Keys: store, Logger: logger}
	served := launch.Serve(func() error { return srv.Serve(ln) }, srv.Shutdown, srv.Close, 5*time.Second)
	hs, metricsAddr, err := linkkeysmain.StartPrometheus("127.0.0.1:0", srv.Metrics, true, "", logger)
	if err != nil {
		srv.Close()
		store.Close()
		return nil, nil, &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	stop := func() {
		hs.Close()
		_ = served.Stop()
		store.Close()
	}
	tcp := ln.Addr().(*net.TCPAddr)
	info := linkkeys.Info{Port: uint16(tcp.Port), Domain: cfg.Domain, PID: uint32(os.Getpid()), MetricsAddr: metricsAddr,
		Fingerprint: linkkeys.Fingerprint(key.Public().(ed25519.PublicKey))}
	if err := linkkeys.WriteInfo(infoPath, info); err != nil {
		stop()
		return nil, nil, err
	}
	logger.Info("reference server started in this process", "addr", tcp.String(), "info", infoPath)
	return srv, stop, nil
}

// runBenchChild runs this binary's bench command (`linkkeys-loadtest request-bench` or `loadproof
// linkkeys request-bench`) against the info file, its output on ours.
func runBenchChild(ctx context.Context, cmd *cobra.Command, env *Env, bench, info, result string, duration uint64, extra []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	args := strings.Fields(cmd.Parent().CommandPath())[1:]
	args = append(args, bench, "--info-file", info, "--duration-secs", strconv.FormatUint(duration, 10), "--json", result)
	args = append(args, extra...)
	c := exec.CommandContext(ctx, exe, args...)
	c.Stdout, c.Stderr = env.Stdout, env.Stderr
	c.WaitDelay = 10 * time.Second
	fmt.Fprintf(env.Stderr, "profile: running %s %s\n", filepath.Base(exe), strings.Join(args, " "))
	return c.Run()
}
