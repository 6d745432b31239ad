package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/durflag"
	"github.com/loadproof/loadproof/internal/linkkeysload"
	"github.com/loadproof/loadproof/internal/linkkeysresult"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// newLinkKeysCombinedCmd is `linkkeys-loadtest combined`: the four kinds of load at once, each
// from its own source-address range (docs/load-testing.md, Combined runs).
func newLinkKeysCombinedCmd(env *Env, o treeOpts) *cobra.Command {
	common := newLKCommon(o)
	var (
		duration, timeout, ddosTimeout uint64
		held, heldConc, heldIPs        uint32
		heldRate                       float64
		heldHold                       uint64
		heldBase                       string
		hsConc, hsIPs                  uint32
		hsRate, hsStart                float64
		hsDuration                     uint64
		hsResume                       bool
		hsBase                         string
		rqConns, rqPipeline, rqIPs     uint32
		rqRate, rqStart                float64
		rqDuration                     uint64
		rqOp, rqBase                   string
		waves                          []string
		serverMetrics                  string
		streamProcs                    bool
	)
	c := &cobra.Command{
		Use:   "combined",
		Short: "Run a held population, a handshake stream, a request stream and ddos waves at once",
		Long: "Runs, at the same time and each from its own source-address range (no two may overlap):\n" +
			"  --held N                     N connections, ramped (--held-concurrency at a time, or --held-rate per\n" +
			"                               second), then held idle until every other stream has ended (and at least\n" +
			"                               --held-hold-secs); how many the server closed meanwhile, and how, is reported;\n" +
			"  --handshake-concurrency C    connect+handshake+close loops (paced at --handshake-rate R per second when\n" +
			"                               given, with C in flight at most; --handshake-resume resumes sessions);\n" +
			"  --request-connections M      requests over M persistent connections, one at a time, --request-pipeline K\n" +
			"                               in flight, or at --request-rate Q per second in total;\n" +
			"  --ddos-wave sources=S,at=T   one attempt from each of S distinct sources, T seconds in (repeatable; also\n" +
			"                               concurrency=C, base=IP, name=NAME).\n" +
			"Each stream has its own counts and histograms; the server is sampled once a second, and with\n" +
			"--server-metrics (or the info file's metrics_addr/metrics_log) its accounting of every attempt is\n" +
			"checked, per stream where the server counts per source prefix.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var cfg linkkeysload.CombinedConfig
			cfg.AttemptTimeout = time.Duration(timeout) * time.Second
			cfg.DDoSTimeout = time.Duration(ddosTimeout) * time.Second
			if held > 0 {
				b, err := lkBase("--held-ip-base", heldBase)
				if err != nil {
					return err
				}
				cfg.Held = &linkkeysload.HeldStream{Count: held, Concurrency: heldConc, Rate: heldRate, HoldSecs: heldHold,
					Sources: linkkeysload.SourceAddrs{Base: b, Count: heldIPs}}
			}
			if hsConc > 0 || f.Changed("handshake-rate") {
				b, err := lkBase("--handshake-ip-base", hsBase)
				if err != nil {
					return err
				}
				cfg.Handshakes = &linkkeysload.HandshakeStream{Concurrency: hsConc, Rate: hsRate, Resume: hsResume, StartSecs: hsStart,
					DurationSecs: orDuration(hsDuration, duration), Sources: linkkeysload.SourceAddrs{Base: b, Count: hsIPs}}
			}
			if rqConns > 0 {
				b, err := lkBase("--request-ip-base", rqBase)
				if err != nil {
					return err
				}
				cfg.Requests = &linkkeysload.RequestStream{Connections: rqConns, Pipeline: rqPipeline, Rate: rqRate, Op: rqOp, StartSecs: rqStart,
					DurationSecs: orDuration(rqDuration, duration), Sources: linkkeysload.SourceAddrs{Base: b, Count: rqIPs}}
			}
			next := linkkeysload.IPv4(0)
			for _, w := range waves {
				wave, err := linkkeysload.ParseDDoSWave(w, next)
				if err != nil {
					return lkUsage(err)
				}
				cfg.DDoS = append(cfg.DDoS, wave)
				next = wave.Base + linkkeysload.IPv4(wave.Sources)
			}
			if err := cfg.Validate(); err != nil {
				return lkUsage(err)
			}
			target, run, err := lkRun(cmd, env, &common, serverMetrics, cfg.Sockets())
			if err != nil {
				return err
			}
			if err := lkCheckSources(cmd, env, target, run, cfg.SourceUses()); err != nil {
				return err
			}
			cfg.Target = target
			run.StreamProcesses = streamProcs
			res, err := linkkeysload.Combined(cmd.Context(), cfg, run)
			if perr := common.prices.lkPrintCost(env.Stdout, &res, common.priced); perr != nil && err == nil {
				err = perr
			}
			return lkResult(interrupted(cmd.Context(), err))
		},
	}
	attachRemoteWrite(c, env, dashboardRun{harness: "linkkeys", command: "combined"})
	f := c.Flags()
	common.bind(f)
	bindDurationSecs(f, &duration, 20, "how long the handshake and request streams run (each may override it)")
	f.Var(durflag.NewSeconds(&timeout, linkkeysload.DefaultAttemptTimeoutSecs), "attempt-timeout-secs", "per-attempt (connect + TLS handshake) timeout")
	f.Var(durflag.NewSeconds(&ddosTimeout, linkkeysload.DefaultDDoSTimeoutSecs), "ddos-attempt-timeout-secs", "per-attempt timeout of the ddos waves (10 or 10s)")
	f.Uint32Var(&held, "held", 0, "held population: connections to establish and hold (0: no held stream)")
	f.Uint32Var(&heldConc, "held-concurrency", 2000, "held population: attempts in flight")
	f.Float64Var(&heldRate, "held-rate", 0, "held population: pace the ramp at this many attempts per second (0: as fast as --held-concurrency allows)")
	f.Var(durflag.NewSeconds(&heldHold, 0), "held-hold-secs", "held population: hold at least this long after the ramp (it is held until every other stream has ended) (10 or 10s)")
	f.StringVar(&heldBase, "held-ip-base", linkkeysload.DefaultConnectionsBase, "held population: first source address")
	f.Uint32Var(&heldIPs, "held-ip-count", 64, "held population: distinct source addresses")
	f.Uint32Var(&hsConc, "handshake-concurrency", 0, "handshake stream: loops (0: no handshake stream unless --handshake-rate is given)")
	f.Float64Var(&hsRate, "handshake-rate", 0, "handshake stream: handshakes per second (open model); --handshake-concurrency bounds those in flight")
	f.BoolVar(&hsResume, "handshake-resume", false, "handshake stream: resume TLS sessions")
	f.Float64Var(&hsStart, "handshake-start-secs", 0, "handshake stream: seconds after the start")
	f.Var(durflag.NewSeconds(&hsDuration, 0), "handshake-duration-secs", "handshake stream: duration (0: --duration-secs) (10 or 10s)")
	f.StringVar(&hsBase, "handshake-ip-base", linkkeysload.DefaultHandshakeBase, "handshake stream: first source address")
	f.Uint32Var(&hsIPs, "handshake-ip-count", 128, "handshake stream: distinct source addresses")
	f.Uint32Var(&rqConns, "request-connections", 0, "request stream: persistent connections (0: no request stream)")
	f.Uint32Var(&rqPipeline, "request-pipeline", 1, "request stream: requests in flight per connection")
	f.Float64Var(&rqRate, "request-rate", 0, "request stream: requests per second in total (open model; 0: closed model)")
	f.StringVar(&rqOp, "request-op", linkkeysload.OpDomainKeys, "request stream: domain-keys or hello")
	f.Float64Var(&rqStart, "request-start-secs", 0, "request stream: seconds after the start")
	f.Var(durflag.NewSeconds(&rqDuration, 0), "request-duration-secs", "request stream: duration (0: --duration-secs) (10 or 10s)")
	f.StringVar(&rqBase, "request-ip-base", linkkeysload.DefaultRequestBase, "request stream: first source address")
	f.Uint32Var(&rqIPs, "request-ip-count", linkkeysload.DefaultClientIPCount, "request stream: distinct source addresses")
	f.StringArrayVar(&waves, "ddos-wave", nil, "a ddos wave: sources=S[,at=SECS][,concurrency=C][,base=IP][,name=NAME] (repeatable; base defaults to 127.5.0.0, then to the end of the previous wave)")
	f.BoolVar(&streamProcs, "stream-processes", true, "run the request stream in worker processes of its own, apart from the other streams (in one process, handshake loops starve it: docs/load-testing.md); false: every process runs a share of every stream")
	f.StringVar(&serverMetrics, "server-metrics", "", "the server's METRICS log file or http(s)://HOST:PORT/metrics (a non-loopback host needs --allow-host): sampled once a second, and read before and after the run for the server's accounting")
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "combined", Planned: time.Duration(duration) * time.Second,
			LatencyKinds: []string{linkkeysresult.KindRequest, linkkeysresult.KindConnectHandshake}}
	})
	return c
}

func orDuration(v, def uint64) uint64 {
	if v == 0 {
		return def
	}
	return v
}
