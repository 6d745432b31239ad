package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/durflag"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/linkkeys"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/machine"
	"github.com/loadproof/loadproof/internal/result"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// The LinkKeys load clients (docs/protocol-linkkeys.md, The seed's commands): flags and defaults
// are the seed's; --json, --workers, --server-metrics, --resume, --pipeline and --rate are ours.

// lkCommon are the flags every client shares.
type lkCommon struct {
	infoFile    string
	jsonPath    string
	workers     int
	segment     string
	prov        provenance
	target      string
	fingerprint string
	domain      string
	allowHost   string
	prices      prices
	// priced is the cost written to the --json file (lkAfterWrite), for the summary's line.
	priced *cost.Cost
	// runner is where the client runs (the tree's, treeOpts): here, or spread over coordinate's
	// workers.
	runner coord.Runner
}

// newLKCommon is a client's shared flags with its tree's runner and machine prices.
func newLKCommon(o treeOpts) lkCommon {
	return lkCommon{runner: o.runner, prices: prices{fleet: o.fleet}}
}

func (c *lkCommon) bind(f *pflag.FlagSet) {
	f.StringVar(&c.infoFile, "info-file", linkkeysload.DefaultInfoFile, "the info `file` the server subcommand writes (port, domain, fingerprint, pid, and host when it listens on one non-loopback address); not read when --target, --fingerprint and --domain are all given")
	f.StringVar(&c.jsonPath, "json", "", "also write the result (counts by outcome, failure reasons, HDR latency histograms, one-second interval snapshots with server samples, machine records) as JSON to this `file`")
	f.IntVar(&c.workers, "workers", 0, "worker processes of this binary to spread the sockets over (0: enough to stay under the open-file soft limit)")
	f.StringVar(&c.segment, "segment", "", "run only segment I/N of the run (1-based, e.g. 2/4): the N segments' attempts, concurrency and source addresses are disjoint and together the whole run")
	c.prov.bindRunID(f)
	c.prov.bindSignKey(f, "the --json result file")
	f.StringVar(&c.target, "target", "", "the server's `HOST:PORT`; empty: the info file's host (127.0.0.1 without one) and port; a non-loopback host needs --allow-host")
	f.StringVar(&c.fingerprint, "fingerprint", "", "the server key's SHA-256 to pin, 64 `hex` characters; empty: the info file's")
	f.StringVar(&c.domain, "domain", "", "the server's domain `name`; empty: the info file's")
	f.Bool("preflight", true, "make one pinned connection before the run, so a dead server, a stale info file or a non-TLS port fails at once; --preflight=false skips it (a fault test that counts every attempt, a proxy that fails the first connection)")
	c.prices.bind(f)
	f.StringVar(&c.allowHost, "allow-host", "", "authorize exactly this non-loopback target `host` (and a --server-metrics URL on it); loopback targets need no flag")
}

// lkStdoutIsTerminal reports whether the command's stdout is a terminal (the live bar replaces the
// progress lines there).
func lkStdoutIsTerminal(env *Env) bool {
	return termstatus.IsTerminal(env.Stdout)
}

// lkWorkerArgs is the command line, after the executable, that reaches this tree's hidden worker
// command: the path of cmd's parent below the root, then "worker".
func lkWorkerArgs(cmd *cobra.Command) []string {
	var path []string
	for c := cmd.Parent(); c != nil && c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return append(path, "worker")
}

// lkServerArgs is the command line of this tree's server subcommand.
func lkServerArgs(cmd *cobra.Command) []string {
	args := lkWorkerArgs(cmd)
	args[len(args)-1] = "server"
	return args
}

// lkFlags records every flag of cmd (given or default) for the result file, each value as
// result.RedactFlag lets a shared file carry it.
func lkFlags(cmd *cobra.Command) map[string]string {
	m := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		m[f.Name] = result.RedactFlag(f.Name, f.Value.String())
	})
	return m
}

// lkRun prepares the Run of a client: the target (the info file, overridden by --target,
// --fingerprint and --domain, authorized by --allow-host), the server's metrics source, worker
// count, bar, flags.
func lkRun(cmd *cobra.Command, env *Env, c *lkCommon, serverMetrics string, fds int64) (linkkeysload.Target, linkkeysload.Run, error) {
	if err := c.prices.check(); err != nil {
		return linkkeysload.Target{}, linkkeysload.Run{}, err
	}
	opts := linkkeysload.TargetOptions{InfoFile: c.infoFile, InfoFileGiven: cmd.Flags().Changed("info-file"),
		Addr: c.target, Fingerprint: c.fingerprint, Domain: c.domain, ServerMetrics: serverMetrics,
		Rules: hostrule.Rules{AllowHost: c.allowHost}}
	rt, err := opts.Resolve(cmd.Context())
	if err != nil {
		return linkkeysload.Target{}, linkkeysload.Run{}, lkSetupError(err)
	}
	for _, n := range rt.Notes {
		env.Logger.Warn(n)
	}
	target := rt.Target
	soft, err := machine.RaiseNofile()
	if err != nil {
		env.Logger.Warn("could not raise the open-file soft limit", "err", err)
		var lim uint64 = 1024
		if r := machine.Collect(); r.NofileSoft > 0 {
			lim = r.NofileSoft
		}
		soft = lim
	}
	workers := c.workers
	if workers < 0 {
		return target, linkkeysload.Run{}, usageError("--workers %d: must be 0 (automatic) or more", workers)
	}
	if workers == 0 {
		workers = linkkeysload.DefaultWorkers(fds, soft)
	}
	var remote func(context.Context, string) ([][]byte, error)
	if sp := c.runner.Spread; sp != nil {
		remote, workers = sp.LinkKeysRun, sp.Count() // one segment per coordinated worker
	}
	seg, err := parseSegment(c.segment)
	if err != nil {
		return target, linkkeysload.Run{}, err
	}
	runID, err := c.prov.resolveRunID(c.segment, false, env.Logger)
	if err != nil {
		return target, linkkeysload.Run{}, err
	}
	sign, err := c.prov.signer()
	if err != nil {
		return target, linkkeysload.Run{}, err
	}
	if sign != nil && c.jsonPath == "" {
		return target, linkkeysload.Run{}, usageError("--sign-key signs the --json result file: give --json FILE too")
	}
	exe, err := os.Executable()
	if err != nil {
		return target, linkkeysload.Run{}, &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	if workers > 1 {
		env.Logger.Info("fanning out to worker processes", "workers", workers, "sockets", fds, "nofile_soft", soft)
	}
	run := linkkeysload.Run{
		Stdout: env.Stdout, Stderr: env.Stderr, Workers: workers,
		Launcher: linkkeysload.Launcher{Executable: exe, Args: lkWorkerArgs(cmd)},
		Bar:      lkStdoutIsTerminal(env), Flags: lkFlags(cmd), JSONPath: c.jsonPath, Log: env.Logger,
		Remote: remote, Segment: seg, RunID: runID, AfterWrite: c.prices.lkAfterWrite(sign, &c.priced), Metrics: rt.Metrics,
	}
	if line := statusFrom(cmd.Context()); line != nil {
		// A terminal's status line: the attempt totals and the hold countdown, in the bar's place.
		run.Live, run.OnHold = line.Attempts(), line.Hold
		run.OnServerBefore = func(m linkkeys.MetricsLine) {
			line.ServerBaseline(map[string]float64{
				"shed_handshake_per_source": float64(m.ShedHandshakePerSource), "shed_handshake_overflow": float64(m.ShedHandshakeOverflow),
				"shed_handshake_global": float64(m.ShedHandshakeGlobal), "shed_connection_limit": float64(m.ShedConnectionLimit)})
		}
	}
	return target, run, nil
}

// lkSetupError maps a setup error: the library's usage errors exit 2, an unreadable info file
// exits 1 as in the seed.
func lkSetupError(err error) error {
	var ue *linkkeysload.UsageError
	if errors.As(err, &ue) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// lkUsage maps an error of one of linkkeysload's flag parsers to exit 2.
func lkUsage(err error) error {
	return &ExitError{Code: ExitUsage, Err: err}
}

// lkCheckSources checks, before a local run, that this machine can bind the run's source addresses
// (its segment's part), states the ephemeral-port budget, and makes one pinned connection to the
// target (linkkeysload.Preflight) so a dead server or a stale info file fails at once; a
// coordinated run's workers do this on their own machines.
func lkCheckSources(cmd *cobra.Command, env *Env, target linkkeysload.Target, run linkkeysload.Run, uses []linkkeysload.SourceUse) error {
	if run.Remote != nil {
		return nil
	}
	uses = linkkeysload.InSegment(uses, run.Segment)
	warnings, err := linkkeysload.CheckSources(target.Addr, uses, nil)
	for _, w := range warnings {
		env.Logger.Warn(w)
	}
	if err != nil {
		return lkSetupError(err)
	}
	if pre, err := cmd.Flags().GetBool("preflight"); len(uses) > 0 && (err != nil || pre) {
		ctx := cmd.Context()
		if err := linkkeysload.Preflight(ctx, target, uses[0].Range.First); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("before the run: %w", err)}
		}
	}
	return nil
}

// bindDurationSecs adds the seed's --duration-secs and its alias --duration: whole seconds, given as
// 10 or 10s.
func bindDurationSecs(f *pflag.FlagSet, p *uint64, def uint64, usage string) {
	v := durflag.NewSeconds(p, def)
	f.Var(v, "duration-secs", usage+" (10 or 10s)")
	f.Var(v, "duration", "the same as --duration-secs")
}

func lkBase(flag, s string) (linkkeysload.IPv4, error) {
	a, err := linkkeysload.ParseIPv4(flag, s)
	if err != nil {
		return 0, usageError("%v", err)
	}
	return a, nil
}

// interrupted turns a run that the first Ctrl-C cut short into an error, after its partial counts
// were printed.
func interrupted(ctx context.Context, err error) error {
	if err == nil && ctx.Err() != nil {
		return errors.New("interrupted: the counts above are partial")
	}
	return err
}

// lkResult maps a client's error to its exit status: setup failures and unreadable info files exit
// 1 as in the seed. An interrupted run (first Ctrl-C) has printed its partial counts; it exits 1 too.
func lkResult(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// verdict prints the run's "cost:" line when a price was given, then decides its exit status
// (lkVerdict).
func (c *lkCommon) verdict(env *Env, ctx context.Context, res linkkeysload.Result, err error) error {
	if perr := c.prices.lkPrintCost(env.Stdout, &res, c.priced); perr != nil && err == nil {
		return &ExitError{Code: ExitFailure, Err: perr}
	}
	return lkVerdict(ctx, res, err)
}

// lkVerdict is a finished client's exit status: lkResult's for an error or an interrupted run,
// ExitNoSuccess when the run made attempts and not one succeeded (a dead server, a limiter that
// refused everything: the counts above say which), as keycast run does.
func lkVerdict(ctx context.Context, res linkkeysload.Result, err error) error {
	if err := lkResult(interrupted(ctx, err)); err != nil {
		return err
	}
	if total := res.Total(); total > 0 && res.Totals[result.ClassSuccess] == 0 {
		return &ExitError{Code: ExitNoSuccess, Err: fmt.Errorf("%s: not one of %d operations succeeded (%s)", res.Command, total, topCauses(res.Causes, 3))}
	}
	return nil
}

// topCauses names the n most frequent causes with their counts.
func topCauses(causes map[string]int64, n int) string {
	keys := result.CausesByCount(causes)
	if len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", causes[k], k)
	}
	if len(parts) == 0 {
		return "no cause recorded"
	}
	return strings.Join(parts, ", ")
}

func newLinkKeysConnectionsCmd(env *Env, o treeOpts) *cobra.Command {
	common := newLKCommon(o)
	var (
		count, conc, ipCount uint32
		hold, timeout        uint64
		base, serverMetrics  string
		progressEvery        uint32
		keepTLS, inTurn      bool
	)
	c := &cobra.Command{
		Use:   "connections",
		Short: "Open and hold N established, mostly idle TLS connections",
		Long: "Opens --count connections (at most --concurrency attempts in flight) from --client-ip-count source\n" +
			"addresses starting at --client-ip-base, holds every established one at the same time for --hold-secs\n" +
			"without sending a request, then closes them. Past the open-file limit it fans out to worker\n" +
			"processes (--workers). With --server-metrics (a METRICS log file or a http://…/metrics URL), or a\n" +
			"metrics_addr/metrics_log key in the info file, the server's own accounting is printed beside the\n" +
			"client's.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := lkBase("--client-ip-base", base)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("client-ip-count") {
				pre, _ := cmd.Flags().GetBool("preflight")
				ipCount = linkkeysload.ConnectionsSources(count, pre)
				_ = cmd.Flags().Set("client-ip-count", strconv.FormatUint(uint64(ipCount), 10)) // recorded in the result's flags as used
			}
			cfg := linkkeysload.ConnectionsConfig{Count: count, Concurrency: conc, HoldSecs: hold,
				AttemptTimeout: time.Duration(timeout) * time.Second, Sources: linkkeysload.SourceAddrs{Base: b, Count: ipCount},
				ProgressEvery: progressEvery, KeepTLS: keepTLS}
			if err := cfg.Validate(); err != nil {
				return lkUsage(err)
			}
			target, run, err := lkRun(cmd, env, &common, serverMetrics, int64(count))
			if err != nil {
				return err
			}
			if err := lkCheckSources(cmd, env, target, run, []linkkeysload.SourceUse{{Range: linkkeysload.SourceRange{Stream: linkkeysload.CmdConnections,
				First: b, Count: ipCount}, Sockets: int64(count), MustHold: true}}); err != nil {
				return err
			}
			if !cmd.Flags().Changed("workers-in-turn") && run.Remote != nil {
				inTurn = false // the default; a distributed run's workers are on other machines
			}
			cfg.Target, cfg.WorkersInTurn = target, inTurn
			res, err := linkkeysload.Connections(cmd.Context(), cfg, run)
			return common.verdict(env, cmd.Context(), res, err)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "linkkeys", command: "connections", targetFlag: "info-file", outputs: flagFiles("json")})
	common.bind(f)
	f.Uint32Var(&count, "count", 1000, "target number of established connections to open and hold")
	f.Uint32Var(&conc, "concurrency", 2000, "maximum connection attempts in flight (does not bound how many are held)")
	holdFlag := durflag.NewSeconds(&hold, 20)
	f.Var(holdFlag, "hold-secs", "how long to hold the established connections idle, from the moment the last attempt finished (10 or 10s)")
	f.Var(holdFlag, "hold", "the same as --hold-secs")
	f.Var(durflag.NewSeconds(&timeout, 10), "attempt-timeout-secs", "per-attempt (connect + TLS handshake) timeout")
	f.StringVar(&base, "client-ip-base", linkkeysload.DefaultConnectionsBase, "first source address (loopback, or this machine's own addresses for a remote target); attempts round-robin over --client-ip-count addresses")
	f.Uint32Var(&ipCount, "client-ip-count", 0, connectionsSourcesHelp())
	f.Uint32Var(&progressEvery, "progress-every", linkkeysload.DefaultProgressEvery, "print a progress line every this many finished attempts")
	f.StringVar(&serverMetrics, "server-metrics", "", serverMetricsReadHelp)
	f.BoolVar(&inTurn, "workers-in-turn", true, "with several worker processes, run them one after another, each with the whole --concurrency, instead of all at once with a share each "+
		"(one process at a time does the handshakes; the ramp time is then from the first worker's start to the last one's end); "+
		"--workers-in-turn=false runs them all at once, as a distributed run always does")
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "connections", Count: int64(count), LatencyKinds: []string{linkkeysresult.KindConnectHandshake},
			RefusalCounters: lkShedCounters}
	})
	f.BoolVar(&keepTLS, "keep-tls-state", false, "hold each connection with its whole TLS state and close it with a close_notify (about 6 KiB more client memory a connection); by default a held connection keeps only its socket after the handshake and closes with a plain FIN")
	return c
}

// connectionsSourcesHelp documents linkkeysload.ConnectionsSources.
func connectionsSourcesHelp() string {
	lim := admit.HandshakeDefaults()
	return fmt.Sprintf("number of distinct source addresses (below 1 counts as 1); by default enough that no source needs more handshakes "+
		"than the server's default per-source burst (TCP_HANDSHAKE_BURST=%g) for --count: ⌈--count / %g⌉ (the first source also makes "+
		"the preflight connection; ⌈--count / %g⌉ with --preflight=false), at least %d and at most the default distinct-source threshold (%d). "+
		"Against a server with a smaller burst, give more", lim.Burst, lim.Burst-1, lim.Burst, linkkeysload.DefaultClientIPCount, lim.DistinctSourceThreshold)
}

func newLinkKeysHandshakeBenchCmd(env *Env, o treeOpts) *cobra.Command {
	common := newLKCommon(o)
	var (
		duration, tmo       uint64
		conc, ipCount       uint32
		base, serverMetrics string
		resume              bool
	)
	c := &cobra.Command{
		Use:   "handshake-bench",
		Short: "Measure the TLS handshake rate in isolation: connect, handshake, close, repeat",
		Long: "Runs --concurrency loops of connect + TLS handshake + close for --duration-secs and reports the\n" +
			"rate (completed / duration-secs). With --resume each loop keeps a TLS session cache, so after its\n" +
			"first full handshake it resumes; full and resumed handshakes are reported apart.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := lkBase("--client-ip-base", base)
			if err != nil {
				return err
			}
			cfg := linkkeysload.HandshakeConfig{DurationSecs: duration, Concurrency: conc,
				AttemptTimeout: time.Duration(tmo) * time.Second, Sources: linkkeysload.SourceAddrs{Base: b, Count: ipCount}, Resume: resume}
			if err := cfg.Validate(); err != nil {
				return lkUsage(err)
			}
			target, run, err := lkRun(cmd, env, &common, serverMetrics, int64(conc))
			if err != nil {
				return err
			}
			if err := lkCheckSources(cmd, env, target, run, []linkkeysload.SourceUse{{Range: linkkeysload.SourceRange{Stream: linkkeysload.CmdHandshakeBench,
				First: b, Count: ipCount}, Sockets: int64(conc)}}); err != nil {
				return err
			}
			cfg.Target = target
			res, err := linkkeysload.HandshakeBench(cmd.Context(), cfg, run)
			return common.verdict(env, cmd.Context(), res, err)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "linkkeys", command: "handshake-bench", targetFlag: "info-file", outputs: flagFiles("json")})
	common.bind(f)
	bindDurationSecs(f, &duration, 10, "how long to run the benchmark")
	f.Uint32Var(&conc, "concurrency", 64, "concurrent connect+handshake+close loops")
	f.Var(durflag.NewSeconds(&tmo, 10), "attempt-timeout-secs", "per-attempt (connect + TLS handshake) timeout")
	f.StringVar(&base, "client-ip-base", linkkeysload.DefaultHandshakeBase, "first source address (loopback, or this machine's own addresses for a remote target)")
	f.Uint32Var(&ipCount, "client-ip-count", linkkeysload.DefaultClientIPCount, "number of distinct source addresses (below 1 counts as 1)")
	f.BoolVar(&resume, "resume", false, "resume TLS sessions (a session cache per loop); report resumed next to full handshakes")
	f.StringVar(&serverMetrics, "server-metrics", "", serverMetricsReadHelp)
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "handshake-bench", Planned: time.Duration(duration) * time.Second,
			LatencyKinds: []string{linkkeysresult.KindConnectHandshake, linkkeysresult.KindResumed}, RefusalCounters: lkShedCounters}
	})
	return c
}

func newLinkKeysRequestBenchCmd(env *Env, o treeOpts) *cobra.Command {
	common := newLKCommon(o)
	var (
		conns, ipCount     uint32
		duration, tmo      uint64
		op, base, rateText string
		serverMetrics      string
		pipeline           uint32
	)
	c := &cobra.Command{
		Use:   "request-bench",
		Short: "Measure request throughput over persistent connections",
		Long: "Opens --connections connections one after another, then sends --op requests over them for\n" +
			"--duration-secs: one at a time per connection (the seed's closed loop), --pipeline K in flight per\n" +
			"connection (answers matched by order), or with --rate R at a constant total arrival rate (open\n" +
			"model: latency counted from each request's intended send time, so coordinated omission is\n" +
			"corrected; corrected and uncorrected percentiles and late sends are reported).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rate, err := linkkeysload.ParseRate(rateText)
			if err != nil {
				return lkUsage(err)
			}
			b, err := lkBase("--client-ip-base", base)
			if err != nil {
				return err
			}
			verbose, _ := cmd.Flags().GetBool("verbose")
			cfg := linkkeysload.RequestConfig{Connections: conns, DurationSecs: duration, Op: op, DebugSample: verbose,
				Sources: linkkeysload.SourceAddrs{Base: b, Count: ipCount}, AttemptTimeout: time.Duration(tmo) * time.Second,
				Pipeline: pipeline, Rate: rate}
			if err := cfg.Validate(); err != nil {
				return lkUsage(err)
			}
			target, run, err := lkRun(cmd, env, &common, serverMetrics, int64(conns))
			if err != nil {
				return err
			}
			if err := lkCheckSources(cmd, env, target, run, []linkkeysload.SourceUse{{Range: linkkeysload.SourceRange{Stream: linkkeysload.CmdRequestBench,
				First: b, Count: ipCount}, Sockets: int64(conns), MustHold: true}}); err != nil {
				return err
			}
			cfg.Target = target
			res, err := linkkeysload.RequestBench(cmd.Context(), cfg, run)
			return common.verdict(env, cmd.Context(), res, err)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "linkkeys", command: "request-bench", targetFlag: "info-file", outputs: flagFiles("json")})
	common.bind(f)
	f.Uint32Var(&conns, "connections", 32, "persistent connections to open once and reuse")
	bindDurationSecs(f, &duration, 10, "how long to send requests")
	f.StringVar(&op, "op", linkkeysload.OpDomainKeys, "operation: domain-keys (DomainKeys/get-domain-keys) or hello (Hello/hello)")
	f.StringVar(&base, "client-ip-base", linkkeysload.DefaultRequestBase, "first source address (loopback, or this machine's own addresses for a remote target)")
	f.Uint32Var(&ipCount, "client-ip-count", linkkeysload.DefaultClientIPCount, "number of distinct source addresses (below 1 counts as 1)")
	f.Var(durflag.NewSeconds(&tmo, 10), "attempt-timeout-secs", "per-connection (connect + TLS handshake) timeout of the setup phase")
	f.Uint32Var(&pipeline, "pipeline", 1, "requests in flight per connection (1: the seed's one at a time)")
	f.StringVar(&rateText, "rate", "", "open model: total requests per second across all connections (empty: the closed model)")
	f.StringVar(&serverMetrics, "server-metrics", "", serverMetricsReadHelp)
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "request-bench", Planned: time.Duration(duration) * time.Second,
			LatencyKinds: []string{linkkeysresult.KindRequest}, RefusalCounters: lkRateLimitedCounters}
	})
	return c
}

// lkShedCounters are the server's counters (server sample keys) of the handshakes and connections
// its admission control shed: the client sees each as a failed attempt, the status line shows them
// as refused.
var lkShedCounters = []string{"shed_handshake_per_source", "shed_handshake_overflow", "shed_handshake_global", "shed_connection_limit"}

// lkRateLimitedCounters is the server's counter (a server sample key) of the requests its
// public-read limiter answered Unavailable: request-bench counts each as an error, the status line
// shows them as refused.
var lkRateLimitedCounters = []string{"rate_limited_responses"}

// serverMetricsReadHelp is --server-metrics on connections, ddos, handshake-bench and request-bench
// (read before and after the run, sampled in between). It does not say "(default …)": pflag prints
// the default itself.
const (
	serverMetricsReadHelp = "where the server's METRICS are read before and after the run and sampled once a second into the JSON result's timeline: its METRICS log file or http(s)://HOST:PORT/metrics (`source`; a non-loopback host needs --allow-host; empty: the info file's metrics_addr, else its metrics_log)"
)

func newLinkKeysDDoSCmd(env *Env, o treeOpts) *cobra.Command {
	common := newLKCommon(o)
	var (
		sources, conc       uint32
		tmo                 uint64
		base, serverMetrics string
		progressEvery       uint32
	)
	c := &cobra.Command{
		Use:   "ddos",
		Short: "Exercise the distinct-source protection: one connection attempt from each of many source addresses",
		Long: "Makes one connection attempt from each of --sources distinct source addresses (base + i inside\n" +
			"the base's /8: 127.0.0.0/8 by default). With --server-metrics (a METRICS log file or a http://…/metrics URL), or a\n" +
			"metrics_addr/metrics_log key in the info file, the server's counters are read before and after the\n" +
			"run and every attempt is checked against them (accepted, admitted, shed, handshake failures).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := lkBase("--client-ip-base", base)
			if err != nil {
				return err
			}
			cfg := linkkeysload.DDoSConfig{Sources: sources, Concurrency: conc,
				AttemptTimeout: time.Duration(tmo) * time.Second, Base: b, ProgressEvery: progressEvery}
			if err := cfg.Validate(); err != nil {
				return lkUsage(err)
			}
			target, run, err := lkRun(cmd, env, &common, serverMetrics, int64(conc))
			if err != nil {
				return err
			}
			if err := lkCheckSources(cmd, env, target, run, []linkkeysload.SourceUse{{Range: linkkeysload.SourceRange{Stream: linkkeysload.CmdDDoS,
				First: b, Count: sources}, Sockets: int64(conc)}}); err != nil {
				return err
			}
			cfg.Target = target
			res, err := linkkeysload.DDoS(cmd.Context(), cfg, run)
			return common.verdict(env, cmd.Context(), res, err)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "linkkeys", command: "ddos", targetFlag: "info-file", outputs: flagFiles("json")})
	common.bind(f)
	f.Uint32Var(&sources, "sources", 12000, "distinct simulated sources, one attempt each; the default is above the 10,000 distinct-source threshold")
	f.Uint32Var(&conc, "concurrency", 1000, "attempts in flight")
	f.Var(durflag.NewSeconds(&tmo, linkkeysload.DefaultDDoSTimeoutSecs), "attempt-timeout-secs", "per-attempt (connect + TLS handshake) timeout")
	f.StringVar(&base, "client-ip-base", linkkeysload.DefaultDDoSBase, "first source address")
	f.Uint32Var(&progressEvery, "progress-every", linkkeysload.DefaultProgressEvery, "print a progress line every this many finished attempts")
	f.StringVar(&serverMetrics, "server-metrics", "", serverMetricsReadHelp)
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "ddos", Count: int64(sources), Noun: "sources", LatencyKinds: []string{linkkeysresult.KindConnectHandshake},
			RefusalCounters: lkShedCounters}
	})
	return c
}

func newLinkKeysSmokeCmd(env *Env) *cobra.Command {
	var jsonPath string
	c := &cobra.Command{
		Use:   "smoke",
		Short: "Start a server on a temporary directory and run the four clients with small counts against it",
		Long: "The smoke run of tools.sh load-test: starts this binary's server subcommand on a temporary\n" +
			"directory (METRICS every 3 s, auto-exit after 60 s), runs connections (500), handshake-bench (5 s),\n" +
			"request-bench (16 connections, 5 s) and ddos (500 sources) with the server's default limits, prints a\n" +
			"summary, stops the server and removes the directory. It exits non-zero when a client errors, when a\n" +
			"client succeeds zero times, or when the server's METRICS do not account for every connections and\n" +
			"ddos attempt. It proves the harness works end to end; it is not a capacity claim.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sum, err := linkkeysload.Smoke(cmd.Context(), linkkeysload.SmokeOptions{
				ServerArgs: lkServerArgs(cmd), Stdout: env.Stdout, Stderr: env.Stderr, Log: env.Logger,
			})
			if jsonPath != "" {
				if werr := writeJSONFile(jsonPath, sum); werr != nil && err == nil {
					err = werr
				}
			}
			if errors.Is(err, linkkeysload.ErrSmokeFailed) {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			if err != nil {
				return &ExitError{Code: ExitCouldNotRun, Err: err}
			}
			return nil
		},
	}
	c.Flags().StringVar(&jsonPath, "json", "", "also write the summary with every client's result as JSON to this `file`")
	return c
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	b = append(b, '\n')
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// linkKeysHiddenCmds are the worker command that fanned-out client runs start.
func linkKeysHiddenCmds(env *Env, o treeOpts) []*cobra.Command {
	var spec, result string
	c := &cobra.Command{
		Use:   "worker",
		Short: "Run one worker's segment of a fanned-out client run (started by the client commands)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if h := o.runner.Share; h != nil {
				// A coordinated worker's task: its segment, start instant and barrier relay come
				// from the coordinator; the result goes back over NATS, not to a file.
				if spec == "" {
					return usageError("worker: --spec is required")
				}
				res, err := linkkeysload.RunSpec(cmd.Context(), spec, env.Stdout,
					linkkeysload.SpecOptions{Split: h.Segment, Start: h.Start, Barrier: h.BarrierPath})
				if err != nil {
					return lkResult(err)
				}
				return h.Deliver(res)
			}
			if spec == "" || result == "" {
				return usageError("worker: --spec and --result are required (this command is started by the client commands)")
			}
			return lkResult(linkkeysload.RunWorker(cmd.Context(), spec, result, env.Stdout))
		},
	}
	c.Flags().StringVar(&spec, "spec", "", "the worker's segment and configuration (JSON)")
	c.Flags().StringVar(&result, "result", "", "where to write the worker's result")
	return []*cobra.Command{c}
}
