package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/durflag"
	"github.com/loadproof/loadproof/internal/engine"
	"github.com/loadproof/loadproof/internal/keycast"
	"github.com/loadproof/loadproof/internal/keycastload"
	"github.com/loadproof/loadproof/internal/keycastresult"
	"github.com/loadproof/loadproof/internal/launch"
	"github.com/loadproof/loadproof/internal/profiling"
	"github.com/loadproof/loadproof/internal/report"
	"github.com/loadproof/loadproof/internal/termstatus"
)

// Defaults of the Keycast tool commands that are not keycastload's.
const (
	defaultResultsFile = "./loadtest-results.json"
)

// kcLogger returns the logger for a Keycast tool command: debug with -v/--verbose (unless RUST_LOG
// names another level, as upstream's EnvFilter lets it), info otherwise.
func kcLogger(cmd *cobra.Command, env *Env) *slog.Logger {
	verbose, _ := cmd.Flags().GetBool("verbose")
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	switch env.Getenv("RUST_LOG") {
	case "debug", "trace":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	if level == slog.LevelInfo && env.Logger != nil {
		return env.Logger
	}
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func envOr(env *Env, name, def string) string {
	if v := env.Getenv(name); v != "" {
		return v
	}
	return def
}

// newKeycastSetupCmd is `setup` (docs/protocol-keycast.md, setup).
func newKeycastSetupCmd(env *Env) *cobra.Command {
	var (
		cfg    keycastload.SetupConfig
		output string
	)
	c := &cobra.Command{
		Use:   "setup",
		Short: "Create test users with OAuth authorizations",
		Long: "Creates test users and writes their access tokens to the users file (mode 0600).\n\n" +
			"HTTP mode registers each user through the API (register, authorize with PKCE S256, token).\n" +
			"DB mode writes users, their sealed personal keys and authorizations straight into the server's\n" +
			"SQLite or PostgreSQL database; it needs the server's master key file (--master-key-path).\n" +
			"Without --mode, DB mode is used when --url names localhost or 127.0.0.1 and a database URL\n" +
			"is given (--database-url or DATABASE_URL); otherwise HTTP mode.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := kcLogger(cmd, env)
			if !cmd.Flags().Changed("database-url") {
				cfg.DatabaseURL = env.Getenv("DATABASE_URL")
			}
			if !cmd.Flags().Changed("master-key-path") {
				cfg.MasterKeyPath = envOr(env, "MASTER_KEY_PATH", keycastload.DefaultMasterKeyPath)
			}
			if err := cfg.Validate(); err != nil {
				return kcUsage("setup", err)
			}
			cfg.Progress, cfg.Logger, cfg.Bar = env.Stderr, log, isTerminal(env.Stderr)
			return runSetup(cmd.Context(), env, cfg, output)
		},
	}
	f := c.Flags()
	f.StringVarP(&cfg.URL, "url", "u", keycastload.DefaultURL, "target base URL")
	f.IntVarP(&cfg.Users, "users", "n", keycastload.DefaultSetupUsers, "number of users")
	f.IntVarP(&cfg.Concurrency, "concurrency", "c", keycastload.DefaultSetupConcurrency, "concurrent registrations (HTTP mode)")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "the server's database (SQLite path or postgres:// URL; env DATABASE_URL); enables DB mode")
	f.StringVar(&cfg.MasterKeyPath, "master-key-path", keycastload.DefaultMasterKeyPath, "the server's master key file, used by DB mode (env MASTER_KEY_PATH)")
	f.StringVar(&cfg.Mode, "mode", "", "db or http (default: chosen from --url and the database URL)")
	f.StringVarP(&output, "output", "o", keycastload.DefaultUsersFile, "credentials file to write")
	addTLSFlags(f, &cfg.TLS)
	return c
}

func runSetup(ctx context.Context, env *Env, cfg keycastload.SetupConfig, output string) error {
	// The tokens exist nowhere but in this file: make sure it can be written before creating accounts.
	if err := checkOutputFile("--output", output); err != nil {
		return err
	}
	res, err := keycastload.Setup(ctx, cfg)
	if res == nil {
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
	}
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	if err := saveUsers(output, res.File); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	failed := len(res.Failures)
	cfg.Logger.Info(fmt.Sprintf("Created %d users (%s mode) in %s; saved to %s", len(res.File.Users), res.Mode,
		res.Duration.Round(time.Millisecond), output))
	if failed > 0 {
		fmt.Fprintf(env.Stderr, "%d users failed%s\n", res.Attempted-len(res.File.Users), keycastload.FormatFailures(res.Failures))
	}
	if res.Interrupted {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("setup: interrupted after %d of %d users; the users created so far are saved in %s", res.Attempted, cfg.Users, output)}
	}
	return nil
}

// saveUsers writes the users file, or a fallback that keeps the tokens (keycast.SaveUsersFile).
func saveUsers(output string, uf *keycast.UsersFile) error {
	if err := keycast.SaveUsersFile(output, uf); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// runFlags are `run`'s flags.
type runFlags struct {
	prov                                     provenance
	prices                                   prices
	url, scenario, method, usersFile, output string
	concurrency                              int
	requests                                 int64
	duration, rampUp, reportInterval         uint64
	seed                                     uint64
	rate, rateFrom                           float64
	timeout                                  time.Duration
	maxErrorRate                             float64
	maxErrorRateSet                          bool // --max-error-rate given (off otherwise, as upstream)
	tls                                      keycastload.TLSOptions
	segment                                  string
	httpClient                               string
	flags                                    map[string]string // every flag as given, for the results envelope
	runner                                   coord.Runner      // where the run goes (the tree's, treeOpts)
}

// newKeycastRunCmd is `run` (docs/protocol-keycast.md, run).
func newKeycastRunCmd(env *Env, o treeOpts) *cobra.Command {
	fl := runFlags{runner: o.runner, prices: prices{fleet: o.fleet}}
	c := &cobra.Command{
		Use:   "run",
		Short: "Run load test against the HTTP RPC endpoint",
		Long: "Sends POST /api/nostr requests as the users of the users file and writes the results file.\n\n" +
			"Closed model (default): --concurrency workers, each sending its next request when the previous\n" +
			"one ends. --duration 0 with --requests N runs until exactly N requests are done.\n" +
			"Open model (--rate R): requests arrive at R per second (ramping from --rate-from over --ramp-up),\n" +
			"at most --concurrency in flight; latency is measured from each request's intended send time, so\n" +
			"a slow server cannot hide its queueing (coordinated omission).\n\n" +
			"An attempt whose connection cannot be opened (refused, timed out, TLS failed) is a connect\n" +
			"failure: counted apart from requests (summary connect_failures), in the error rates but not in\n" +
			"throughput or latency; the worker backs off (10 ms doubling to 1 s) until a connection opens.\n\n" +
			"Exit status: 0 the run ended; 1 interrupted (partial results saved) or the error rate is above\n" +
			"--max-error-rate; 2 bad flags or users file (nothing sent); 3 the run could not start (target\n" +
			"unreachable); 4 the run ended but no request succeeded (for example every request a 401, or\n" +
			"the target dead throughout). The results file is written in cases 0, 1 and 4.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl.maxErrorRateSet = cmd.Flags().Changed("max-error-rate")
			fl.flags = lkFlags(cmd)
			return runRun(cmd.Context(), env, kcLogger(cmd, env), fl)
		},
	}
	f := c.Flags()
	attachDashboard(c, env, dashboardRun{harness: "keycast", command: "run", targetFlag: "url", outputs: flagFiles("output")})
	f.StringVarP(&fl.url, "url", "u", keycastload.DefaultURL, "target base URL")
	f.IntVarP(&fl.concurrency, "concurrency", "c", keycastload.DefaultConcurrency, "workers (closed model) or most requests in flight (open model)")
	f.Int64VarP(&fl.requests, "requests", "n", 0, "total requests (0 = unlimited, stop by duration)")
	f.VarP(durflag.NewSeconds(&fl.duration, 60), "duration", "d", "how long to run, as 60 or 60s (0 = until --requests are done)")
	f.Var(durflag.NewSeconds(&fl.rampUp, 5), "ramp-up", "ramp-up, as 5 or 5s")
	f.StringVarP(&fl.scenario, "scenario", "s", string(keycast.ScenarioMixed), "warm-cache, cold-start or mixed")
	f.StringVarP(&fl.method, "method", "m", string(keycast.MethodSignEvent), "sign-event, get-public-key, nip44-encrypt or register")
	f.StringVar(&fl.usersFile, "users-file", keycastload.DefaultUsersFile, "users file written by setup")
	f.StringVarP(&fl.output, "output", "o", defaultResultsFile, "results file to write")
	f.Var(durflag.NewSeconds(&fl.reportInterval, 5), "report-interval", "time between progress lines and timeline points, as 5 or 5s (at least 1 s)")
	f.Uint64Var(&fl.seed, "seed", 0, "seed used to offset the deterministic user schedule")
	f.Float64Var(&fl.rate, "rate", 0, "open model: arrival rate in requests per second (0 = closed model)")
	f.Float64Var(&fl.rateFrom, "rate-from", 0, "open model: starting rate of the ramp to --rate over --ramp-up")
	f.Var(durflag.NewDuration(&fl.timeout, keycastload.DefaultHTTPTimeout), "timeout", "per-request timeout, as 5 (seconds) or 5s, 500ms")
	f.StringVar(&fl.httpClient, "http-client", keycastload.HTTPClientFast,
		"fast (the hand-written HTTP/1.1 client) or std (the same load over net/http); recorded in metadata.http_client")
	addTLSFlags(f, &fl.tls)
	f.Float64Var(&fl.maxErrorRate, "max-error-rate", 0, "exit 1 when the error rate (failed requests and connect failures over all attempts, 0-1) is above this (default: off)")
	f.StringVar(&fl.segment, "segment", "", "run only segment I/N of the run (1-based, e.g. 2/4): the N segments' requests, concurrency, rate and users are disjoint and together the whole run")
	fl.prov.bindRunID(f)
	fl.prov.bindSignKey(f, "the results file")
	attachStatus(c, env, func(*cobra.Command) termstatus.Options {
		return termstatus.Options{Label: "keycast run", Planned: time.Duration(fl.duration) * time.Second, Count: fl.requests,
			Noun: "requests", LatencyKinds: []string{"latency"}}
	})
	fl.prices.bind(f)
	return c
}

func runRun(ctx context.Context, env *Env, log *slog.Logger, fl runFlags) error {
	scenario, method := keycast.Scenario(fl.scenario), keycast.Method(fl.method)
	cfg := keycastload.RunConfig{
		Flags: fl.flags, HTTPClient: fl.httpClient,
		URL: fl.url, Concurrency: fl.concurrency, Requests: fl.requests,
		Duration: time.Duration(fl.duration) * time.Second, RampUp: time.Duration(fl.rampUp) * time.Second,
		Scenario: scenario, Method: method, UsersFile: fl.usersFile,
		ReportInterval: time.Duration(max(fl.reportInterval, 1)) * time.Second,
		Seed:           fl.seed, Rate: fl.rate, RateFrom: fl.rateFrom,
		Progress: env.Stderr, Logger: log, HTTPTimeout: fl.timeout, TLS: fl.tls,
	}
	if err := cfg.Validate(); err != nil {
		return kcUsage("run", err)
	}
	// The verdict's threshold, not the run's: runVerdict applies it to the results.
	if fl.maxErrorRateSet && !(fl.maxErrorRate >= 0 && fl.maxErrorRate <= 1) {
		return usageError("run: --max-error-rate %v must be between 0 and 1", fl.maxErrorRate)
	}
	var err error
	if err := fl.prices.check(); err != nil {
		return err
	}
	if err := checkOutputFile("--output", fl.output); err != nil {
		return err
	}
	if cfg.Segment, err = parseSegment(fl.segment); err != nil {
		return err
	}
	share, spread := fl.runner.Share, fl.runner.Spread != nil
	if cfg.RunID, err = fl.prov.resolveRunID(fl.segment, share != nil, log); err != nil {
		return err
	}
	sign, err := fl.prov.signer()
	if err != nil {
		return err
	}
	share.Apply(&cfg)
	run := fl.runner.KeycastRun()
	if method != keycast.MethodRegister {
		uf, err := keycast.ReadUsersFile(fl.usersFile)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if spread {
			// keycastload.Run checks the users before it sends anything; a coordinated run's
			// workers run it on other machines, so the users are checked here, before they start.
			if err := keycastload.CheckUsers(uf.Users, fl.usersFile); err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
		}
		cfg.Users = uf.Users
		log.Info(fmt.Sprintf("Loaded %d users from %s", len(uf.Users), fl.usersFile))
	}
	res, err := run(ctx, cfg)
	if err != nil {
		var ue *keycastload.UsageError
		if errors.As(err, &ue) {
			return &ExitError{Code: ExitUsage, Err: err} // the users file's users, refused before anything was sent
		}
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	if share != nil {
		return share.Deliver(res) // a coordinated worker: the coordinator writes and judges the merged run
	}
	if h := engine.ResultHook(ctx); h != nil && res.Envelope != nil {
		h(res.Envelope)
	}
	if err := fl.prices.apply(res.Envelope, res.CostCapacity()); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if err := finishRun(env, log, res, fl.output, sign); err != nil {
		return err
	}
	return runVerdict(res, fl, fl.output)
}

// finishRun prints upstream's cache block and text report and writes the results file, signed
// (output.sig) when sign is set.
func finishRun(env *Env, log *slog.Logger, res *keycastresult.Results, output string, sign func(string) error) error {
	if sm := res.ServerMetrics; sm != nil {
		fmt.Fprint(env.Stdout, keycastload.CacheBlock(sm.Before, sm.After))
	}
	fmt.Fprintf(env.Stdout, "\n%s\n", report.Text(res))
	if err := keycastresult.Write(output, res); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	log.Info("Results saved to " + output)
	if sign != nil {
		if err := sign(output); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	if res.Stop != nil && res.Stop.Reason == keycastload.StopSignal {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("run: interrupted after %.1fs; partial results saved to %s", res.Stop.ElapsedSecs, output)}
	}
	return nil
}

// runVerdict turns a finished run's results into its exit status: ExitNoSuccess when not one
// request succeeded, ExitFailure when --max-error-rate is set and the error rate is above it.
func runVerdict(res *keycastresult.Results, fl runFlags, output string) error {
	s := res.Summary
	if s.SuccessfulRequests == 0 {
		return &ExitError{Code: ExitNoSuccess, Err: fmt.Errorf("run: no request succeeded (%s); results saved to %s", s.FailureBreakdown(), output)}
	}
	if fl.maxErrorRateSet && s.ErrorRate > fl.maxErrorRate {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("run: error rate %.1f%% is above --max-error-rate %.1f%% (%s); results saved to %s",
			s.ErrorRate*100, fl.maxErrorRate*100, s.FailureBreakdown(), output)}
	}
	return nil
}

// newKeycastReportCmd is `report` (docs/protocol-keycast.md, report).
func newKeycastReportCmd(env *Env) *cobra.Command {
	var input, format, compare string
	c := &cobra.Command{
		Use:   "report",
		Short: "Display results from a previous test run",
		Long: "Prints a results file (ours or the upstream tool's) as text, json or csv, in the upstream\n" +
			"layouts; --compare adds the comparison against a baseline results file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch format {
			case report.FormatText, report.FormatJSON, report.FormatCSV:
			default:
				return usageError("report: unknown --format %q; want text, json or csv", format)
			}
			cur, err := keycastresult.Read(input)
			if err != nil {
				return readResultsExit(err)
			}
			var base *keycastresult.Results
			if compare != "" {
				if base, err = keycastresult.Read(compare); err != nil {
					return readResultsExit(err)
				}
			}
			out, err := report.Render(cur, format)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			fmt.Fprintln(env.Stdout, out)
			if base != nil {
				fmt.Fprintf(env.Stdout, "\n%s\n", report.SanitizeText(report.Compare(cur, base)))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&input, "input", "i", defaultResultsFile, "results file")
	f.StringVarP(&format, "format", "f", report.FormatText, "text, json or csv")
	f.StringVar(&compare, "compare", "", "baseline results file to compare against")
	return c
}

// readResultsExit maps a results-file read error to an exit status: a file that is not a results
// file at all is a usage error (the wrong file was named); an unreadable or inconsistent one is a
// failure.
func readResultsExit(err error) error {
	if errors.Is(err, keycastresult.ErrNotResults) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// profileFlags are `profile`'s flags (the seed's flamegraph.sh, without sudo or dtrace).
type profileFlags struct {
	users, concurrency    int
	duration              uint64
	scenario, method      string
	output, url, pprofURL string
	skipSetup             bool
	tls                   keycastload.TLSOptions
}

// newKeycastProfileCmd is `profile`: the seed's flamegraph.sh as a Go command. It starts the
// reference server with its pprof endpoint (or profiles a running server through --pprof-url),
// runs setup and run with the script's defaults, captures a CPU profile over the run and a heap
// profile after it, writes them with the results and users files into --output, and prints the
// top functions and how to open the flame graph.
func newKeycastProfileCmd(env *Env) *cobra.Command {
	var fl profileFlags
	c := &cobra.Command{
		Use:   "profile",
		Short: "Profile the server under load: CPU and heap profiles over a setup and run (flamegraph.sh)",
		Long: "Without --url, starts the reference server (this binary's `server` command) on free local\n" +
			"ports with a temporary data directory and its pprof endpoint. With --url, profiles that server\n" +
			"through --pprof-url (its net/http/pprof address, e.g. http://127.0.0.1:6060). Writes\n" +
			"keycast-cpu-<ts>.pprof, keycast-heap-<ts>.pprof, flamegraph-results-<ts>.json and\n" +
			"flamegraph-users.json into --output, prints the top functions (go tool pprof -top, when go is\n" +
			"on PATH) and the command that opens the flame graph (go tool pprof -http). Beside each profile it\n" +
			"writes a self-contained flame graph page (.flame.html: opens in a browser, no Go or graphviz);\n" +
			"--serve ADDR then serves pprof's whole web UI from this binary until Ctrl-C (it answers only a\n" +
			"Host naming it: localhost, loopback or ADDR; --serve-token or LOADPROOF_SERVE_TOKEN requires a\n" +
			"token, printed in the URL on stderr; give one before binding a non-loopback address). The started server\n" +
			"keeps its data in --output/server-data, so --skip-setup reuses users whose tokens it still\n" +
			"accepts; a run in which no request succeeded (every one a 401, say) fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProfile(cmd.Context(), cmd, env, kcLogger(cmd, env), fl)
		},
	}
	f := c.Flags()
	addProfileFlameFlags(f)
	f.IntVar(&fl.users, "users", 50, "number of test users to create")
	f.IntVar(&fl.concurrency, "concurrency", 50, "concurrent requests")
	f.Var(durflag.NewSeconds(&fl.duration, 30), "duration", "test duration, as 30 or 30s")
	f.StringVar(&fl.scenario, "scenario", string(keycast.ScenarioWarmCache), "warm-cache, cold-start or mixed")
	f.StringVar(&fl.method, "method", string(keycast.MethodGetPublicKey), "get-public-key, sign-event or nip44-encrypt")
	f.StringVar(&fl.output, "output", "./keycast-profile", "output directory")
	f.BoolVar(&fl.skipSetup, "skip-setup", false, "reuse the users file in --output when it exists")
	f.StringVar(&fl.url, "url", "", "profile a running server at this base URL instead of starting one (needs --pprof-url)")
	f.StringVar(&fl.pprofURL, "pprof-url", "", "net/http/pprof base URL of the running server, e.g. http://127.0.0.1:6060")
	addTLSFlags(f, &fl.tls)
	return c
}

func runProfile(ctx context.Context, cmd *cobra.Command, env *Env, log *slog.Logger, fl profileFlags) error {
	// Profile's own rules first (a method with users, a duration for the CPU profile, its server
	// flags), then the run's settings, checked by keycastload.
	scenario, method := keycast.Scenario(fl.scenario), keycast.Method(fl.method)
	if _, err := keycast.ParseMethod(fl.method); err != nil || method == keycast.MethodRegister {
		// profile's narrower set (a method with users), named whole whatever the mistake
		return usageError("profile: --method %q: want get-public-key, sign-event or nip44-encrypt", fl.method)
	}
	if fl.users <= 0 || fl.duration == 0 {
		return usageError("profile: --users and --duration must be at least 1")
	}
	if fl.url != "" && fl.pprofURL == "" {
		return usageError("profile: --url names a running server; give its pprof address with --pprof-url too")
	}
	if fl.url == "" && fl.tls != (keycastload.TLSOptions{}) {
		return usageError("profile: --ca-cert and --insecure-skip-verify apply to a running server named with --url")
	}
	runCfg := keycastload.RunConfig{URL: fl.url, Concurrency: fl.concurrency, Duration: time.Duration(fl.duration) * time.Second,
		RampUp: keycastload.DefaultRampUp, Scenario: scenario, Method: method, TLS: fl.tls}
	if err := runCfg.Validate(); err != nil {
		return kcUsage("profile", err)
	}
	if err := checkOutputDir("--output", fl.output); err != nil {
		return err
	}
	ts := time.Now().Format("20060102-150405")
	usersPath := filepath.Join(fl.output, "flamegraph-users.json")
	resultsPath := filepath.Join(fl.output, "flamegraph-results-"+ts+".json")
	cpuPath := filepath.Join(fl.output, "keycast-cpu-"+ts+".pprof")
	heapPath := filepath.Join(fl.output, "keycast-heap-"+ts+".pprof")
	fmt.Fprintf(env.Stderr, "=== Keycast profile ===\nUsers: %d  Concurrency: %d  Duration: %ds  Scenario: %s  Method: %s\nOutput: %s\n",
		fl.users, fl.concurrency, fl.duration, scenario, method, fl.output)

	base, pprofBase := strings.TrimRight(fl.url, "/"), strings.TrimRight(fl.pprofURL, "/")
	started := base == ""
	if started {
		srv, err := startProfiledServer(ctx, cmd, env, fl.output)
		if err != nil {
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		defer srv.stop(log)
		base, pprofBase = srv.url, srv.pprofURL
		log.Info("reference server started", "url", base, "pprof", pprofBase, "log", srv.logPath)
	}
	if err := waitHealthy(ctx, fl.tls, base, 30*time.Second); err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}

	var users []keycast.TestUser
	if uf, err := keycast.ReadUsersFile(usersPath); fl.skipSetup && err == nil {
		users = uf.Users
		log.Info(fmt.Sprintf("Reusing %d users from %s", len(users), usersPath))
	} else {
		scfg := keycastload.SetupConfig{URL: base, Users: fl.users, Progress: env.Stderr, Logger: log, Bar: isTerminal(env.Stderr), TLS: fl.tls}
		if started {
			scfg.Mode = keycastload.ModeHTTP
		} else {
			scfg.DatabaseURL = env.Getenv("DATABASE_URL")
			scfg.MasterKeyPath = envOr(env, "MASTER_KEY_PATH", keycastload.DefaultMasterKeyPath)
		}
		res, err := keycastload.Setup(ctx, scfg)
		if err != nil {
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		if err := keycast.WriteUsersFile(usersPath, res.File); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		users = res.File.Users
	}

	// The CPU profile covers the run: it starts with it and lasts its duration.
	runCfg.URL, runCfg.Users, runCfg.UsersFile, runCfg.Progress, runCfg.Logger = base, users, usersPath, env.Stderr, log
	var res *keycastresult.Results
	capture := profiling.Capture{PprofURL: pprofBase, Duration: runCfg.Duration, CPUPath: cpuPath, HeapPath: heapPath,
		Client: func(url string, timeout time.Duration) (*http.Client, error) {
			return tlsHTTPClient(fl.tls, url, &http.Client{Timeout: timeout})
		}}
	err := capture.Run(ctx, func(ctx context.Context) error {
		var err error
		if res, err = keycastload.Run(ctx, runCfg); err != nil {
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		if err := keycastresult.Write(resultsPath, res); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		return nil
	})
	var ee *ExitError
	var fe *profiling.FetchError
	switch {
	case errors.As(err, &ee):
		return err
	case errors.As(err, &fe):
		return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("profile: %w", err)}
	case err != nil:
		return &ExitError{Code: ExitFailure, Err: err}
	}

	fmt.Fprintf(env.Stdout, "\n=== Results ===\n%s\n", report.Text(res))
	switch top, err := profiling.Top(ctx, cpuPath, 25); {
	case err == nil:
		fmt.Fprintf(env.Stdout, "\n=== Top functions (CPU) ===\n%s", report.SanitizeText(string(top)))
	case !errors.Is(err, profiling.ErrNoGo):
		log.Warn("go tool pprof -top failed; open the profile by hand", "err", err)
	}
	fmt.Fprintf(env.Stdout, "\nOutput files:\n  CPU profile:  %s\n  Heap profile: %s\n  Results:      %s\n  Users:        %s\n",
		cpuPath, heapPath, resultsPath, usersPath)
	fmt.Fprintf(env.Stdout, "\nFlame graph: go tool pprof -http=:8080 %s\n", cpuPath)
	return finishProfile(ctx, cmd, env, cpuPath, heapPath, res)
}

// profiledServer is a reference server child process.
type profiledServer struct {
	proc     *launch.Process
	url      string
	pprofURL string
	logPath  string
	dataDir  string
}

// startProfiledServer starts this binary's `server` command on free local ports with a temporary
// data directory and pprof on, and waits for its startup line.
func startProfiledServer(ctx context.Context, cmd *cobra.Command, env *Env, out string) (*profiledServer, error) {
	addr, err := launch.FreeAddr()
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	paddr, err := launch.FreeAddr()
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	dataDir, err := profileDataDir(cmd, out)
	if err != nil {
		return nil, fmt.Errorf("profile: making a data directory: %w", err)
	}
	// The server command sits beside this one: `keycast-loadtest server` or `loadproof keycast server`.
	args := strings.Fields(cmd.Parent().CommandPath())[1:]
	args = append(args, "server", "--addr", addr, "--data-dir", dataDir, "--pprof-addr", paddr)
	logPath := filepath.Join(out, "server.log")
	// The server must not outlive this command, even when it dies without running its defers; it
	// drains and exits on an interrupt, and is killed if it lingers.
	proc, err := launch.Start(ctx, launch.Options{Args: args, Env: os.Environ(), Log: logPath,
		ReadyLine: "keycast server listening on ", Wait: 30 * time.Second,
		StopSignal: os.Interrupt, Grace: 20 * time.Second, ParentDeath: syscall.SIGTERM})
	var re *launch.ReadyError
	switch {
	case errors.As(err, &re) && re.Err == launch.ErrReadyLine:
		return nil, fmt.Errorf("profile: the reference server said %q instead of its startup line; see %s", re.Line, logPath)
	case errors.As(err, &re) && re.Err == launch.ErrExited:
		return nil, fmt.Errorf("profile: the reference server exited before its startup line (%v); see %s", re.Exit, logPath)
	case errors.Is(err, launch.ErrDeadline):
		return nil, fmt.Errorf("profile: the reference server did not start within 30s; see %s", logPath)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, ctx.Err()
	case err != nil:
		os.RemoveAll(dataDir) // the server did not start
		return nil, fmt.Errorf("profile: starting the reference server: %w", err)
	}
	return &profiledServer{proc: proc, url: "http://" + addr, pprofURL: "http://" + paddr, logPath: logPath, dataDir: dataDir}, nil
}

// stop interrupts the server (it drains and exits), kills it if it lingers.
func (p *profiledServer) stop(log *slog.Logger) {
	if err := p.proc.Stop(); err != nil && log != nil {
		log.Warn("reference server exited with an error", "err", err, "log", p.logPath)
	}
	// The data directory stays: the next --skip-setup run starts the server on it (profileDataDir).
}

func waitHealthy(ctx context.Context, o keycastload.TLSOptions, base string, limit time.Duration) error {
	hc, err := tlsHTTPClient(o, base, &http.Client{Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	if err := profiling.WaitHealthy(ctx, hc, base+keycast.PathHealth, limit); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// kcUsage is exit 2 with keycastload's *UsageError: each problem on its own line after the
// command's name ("run: --concurrency 0 must be at least 1").
func kcUsage(cmd string, err error) error {
	var ue *keycastload.UsageError
	if !errors.As(err, &ue) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %w", cmd, err)}
	}
	lines := make([]string, len(ue.Problems))
	for i, p := range ue.Problems {
		lines[i] = cmd + ": " + p.Error()
	}
	return &ExitError{Code: ExitUsage, Err: errors.New(strings.Join(lines, "\n"))}
}
