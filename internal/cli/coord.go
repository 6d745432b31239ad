package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/cost"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/procexec"
	"github.com/loadproof/loadproof/internal/result"
)

// ExitWorkerLost is the exit status of a distributed run that lost a worker (or, on a worker, its
// coordinator): partial results and the coordination manifest were written.
const ExitWorkerLost = 4

// parseSegment reads --segment I/N (result.ParseSegment); a bad value is a usage error.
func parseSegment(s string) (result.Segment, error) {
	seg, err := result.ParseSegment(s)
	if err != nil {
		return result.Segment{}, usageError("--segment %v", err)
	}
	return seg, nil
}

// natsFlags are the flags that say how to reach NATS, shared by coordinate, worker and kube.
type natsFlags struct {
	url, token, creds, nkey, ca, cert, key, secret, prefix string
	tokenFile, secretFile                                  string
	insecure                                               bool
}

// resolve reads the token and secret files: secrets come from the environment or from files, so
// they never show in a process listing.
func (n *natsFlags) resolve() error {
	for _, f := range []struct {
		flag, path string
		dst        *string
	}{{"--nats-token-file", n.tokenFile, &n.token}, {"--secret-file", n.secretFile, &n.secret}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return usageError("%s: %v", f.flag, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" || len(v) > 4096 || strings.ContainsAny(v, "\r\n") {
			return usageError("%s %s: want one line holding the value", f.flag, f.path)
		}
		*f.dst = v
	}
	return nil
}

// warnArgvSecrets warns, once, when the token or the run secret was given on the command line,
// where any user of the machine can read it (ps, /proc/PID/cmdline). It names the flags, never the
// values.
func warnArgvSecrets(cmd *cobra.Command, env *Env) {
	var given []string
	for _, name := range []string{"nats-token", "secret"} {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 && env.Logger != nil {
		env.Logger.Warn("a secret was given on the command line, where any user of this machine can read it (ps); use LOADPROOF_NATS_TOKEN / LOADPROOF_SECRET or --nats-token-file / --secret-file",
			"flags", strings.Join(given, " "))
	}
}

func (n *natsFlags) bind(f *pflag.FlagSet, env *Env) {
	f.StringVar(&n.url, "nats", env.Getenv("LOADPROOF_NATS"), "NATS server or cluster URL(s), comma-separated (env LOADPROOF_NATS)")
	f.StringVar(&n.token, "nats-token", env.Getenv("LOADPROOF_NATS_TOKEN"), "NATS authorization token (env LOADPROOF_NATS_TOKEN; on the command line it shows in ps: prefer the env or --nats-token-file)")
	f.StringVar(&n.tokenFile, "nats-token-file", "", "file holding the NATS authorization token")
	f.StringVar(&n.secretFile, "secret-file", "", "file holding the run secret")
	f.BoolVar(&n.insecure, "insecure-unsigned", false, "run without a run secret on a NATS this process does not embed: anyone who can publish there can forge tasks, results and stops")
	f.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (JWT and nkey seed)")
	f.StringVar(&n.nkey, "nats-nkey", "", "NATS nkey seed file")
	f.StringVar(&n.ca, "nats-ca", "", "CA certificate (PEM) that signs the NATS server's TLS certificate")
	f.StringVar(&n.cert, "nats-cert", "", "client certificate (PEM) for NATS TLS")
	f.StringVar(&n.key, "nats-key", "", "client key (PEM) for NATS TLS")
	f.StringVar(&n.secret, "secret", env.Getenv("LOADPROOF_SECRET"), "run secret: every control message is signed with it (HMAC-SHA256) (env LOADPROOF_SECRET; on the command line it shows in ps: prefer the env or --secret-file)")
	f.StringVar(&n.prefix, "prefix", coord.DefaultPrefix, "subject prefix (one coordinator per prefix at a time)")
}

func (n *natsFlags) conn(name string) coord.ConnConfig {
	return coord.ConnConfig{URL: n.url, Name: name, Token: n.token, CredsFile: n.creds, NkeyFile: n.nkey, CAFile: n.ca, CertFile: n.cert, KeyFile: n.key}
}

func newCoordinateCmd(env *Env) *cobra.Command {
	var (
		nf                     natsFlags
		workers                int
		listen, embToken, man  string
		spawn                  bool
		joinTimeout, startLead time.Duration
		allowHost              string
		refuseHosts            []string
		price                  cost.Price
	)
	c := &cobra.Command{
		Use:   "coordinate --workers N [--nats URL] -- <client command>",
		Short: "Spread one client run over N workers (NATS) and merge their results exactly",
		Long: "Runs a client command (written as under loadproof, e.g. `keycast run …` or `keycast capacity …`)\n" +
			"over N workers: worker i runs segment i/N, all start at one instant, their one-second snapshots\n" +
			"are merged live (progress on stderr, stop conditions judged on the merged window, an abort every\n" +
			"worker obeys), and their results merge into the command's own output (--output, --json): one\n" +
			"result file or evidence bundle, as if one very large machine had run it. A coordination manifest\n" +
			"(--manifest) records every worker's machine, clock offset and state.\n\n" +
			"Without --nats the coordinator embeds a NATS server on 127.0.0.1 (token-protected) and starts\n" +
			"the N workers itself as local processes, so nothing needs installing. With --nats it uses that\n" +
			"server or cluster and waits for `loadproof worker --nats URL` processes (or a Kubernetes Job,\n" +
			"see `loadproof kube manifests`). See docs/distributed.md.\n\n" +
			"Exit status: that of the client command, or 4 when a worker was lost (partial results kept).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return usageError("coordinate: put the client command after --, e.g. loadproof coordinate --workers 4 -- keycast run …")
			}
			if workers < 1 {
				return usageError("coordinate: --workers %d must be at least 1", workers)
			}
			if err := coord.CheckCoordinated(args); err != nil {
				return usageError("%v", err)
			}
			if !cmd.Flags().Changed("spawn") {
				spawn = nf.url == "" && listen == ""
			}
			warnArgvSecrets(cmd, env)
			if err := nf.resolve(); err != nil {
				return err
			}
			if nf.secret == "" && (nf.url == "" || spawn) {
				// A run whose workers this coordinator starts, or whose NATS it embeds, is always
				// signed: workers get the secret from the environment (spawned) or from the join
				// files (--listen).
				nf.secret = coord.RandomSecret()
			}
			return runCoordinate(cmd.Context(), env, cmd, coordinateOpts{nf: nf, workers: workers, listen: listen, token: embToken,
				manifest: man, spawn: spawn, join: joinTimeout, lead: startLead, allowHost: allowHost, refuse: refuseHosts, price: price}, args)
		},
	}
	f := c.Flags()
	nf.bind(f, env)
	f.IntVar(&workers, "workers", 0, "number of workers (segments) to spread the run over (required)")
	f.StringVar(&listen, "listen", "", "embedded NATS: listen on host:port instead of 127.0.0.1 on a free port (workers on other machines)")
	f.StringVar(&embToken, "token", env.Getenv("LOADPROOF_NATS_TOKEN"), "embedded NATS: the token clients must present (default: random, printed for --listen)")
	f.BoolVar(&spawn, "spawn", false, "start the N workers as local processes of this binary (default: when NATS is embedded on loopback)")
	f.StringVar(&man, "manifest", "", "coordination manifest to write (default: the command's output path + .coordination.json)")
	f.DurationVar(&joinTimeout, "join-timeout", 2*time.Minute, "how long to wait for the N workers to join")
	f.DurationVar(&startLead, "start-lead", 2*time.Second, "how far ahead the coordinated start instant is set")
	f.StringVar(&allowHost, "allow-host", "", "spawned workers: authorize this non-local target host (workers apply the capacity host rules)")
	f.StringArrayVar(&refuseHosts, "refuse-host", nil, "spawned workers: refuse this target host too (repeatable)")
	f.Var(&price, "cost-per-hour", "this (the coordinator's) machine's price per hour, as 1.53 or 1.53USD; each worker gives its own (worker --cost-per-hour) and the run's cost adds them up (docs/cost.md)")
	return c
}

type coordinateOpts struct {
	nf                      natsFlags
	workers                 int
	listen, token, manifest string
	spawn                   bool
	join, lead              time.Duration
	allowHost               string
	refuse                  []string
	price                   cost.Price // --cost-per-hour: the coordinator machine's
}

func runCoordinate(ctx context.Context, env *Env, cmd *cobra.Command, o coordinateOpts, args []string) error {
	log := env.Logger
	started := time.Now()
	co, err := coord.NewCoordinator(ctx, coord.CoordinatorConfig{
		Conn:     o.nf.conn("loadproof-coordinator"),
		Embedded: coord.EmbeddedConfig{Listen: o.listen, Token: o.token},
		Prefix:   o.nf.prefix, Secret: o.nf.secret, InsecureUnsigned: o.nf.insecure, Workers: o.workers,
		JoinTimeout: o.join, StartLead: o.lead, Progress: env.Stderr, Logger: log,
	})
	if err != nil {
		return &ExitError{Code: ExitCouldNotRun, Err: err}
	}
	defer co.Close()
	path := o.manifest
	if path == "" {
		path = outputOf(args) + ".coordination.json"
	}
	if o.listen != "" {
		// The token and the secret go to files (mode 0600), never to the terminal or the log.
		tf, sf := path+".nats-token", path+".secret"
		for _, f := range []struct{ path, v string }{{tf, co.Token()}, {sf, o.nf.secret}} {
			if err := atomicfile.Write(f.path, []byte(f.v+"\n"), 0o600); err != nil {
				return &ExitError{Code: ExitCouldNotRun, Err: fmt.Errorf("coordinate: writing the join file: %w", err)}
			}
		}
		fmt.Fprintf(env.Stderr, "coordinate: embedded NATS at %s; copy %s and %s to the load machines (they hold the token and the run secret), then: loadproof worker --nats %s --nats-token-file %s --secret-file %s\n",
			co.URL(), tf, sf, co.URL(), filepath.Base(tf), filepath.Base(sf))
	}
	var spawned *localWorkers
	if o.spawn {
		if spawned, err = spawnWorkers(env, co, o); err != nil {
			return &ExitError{Code: ExitCouldNotRun, Err: err}
		}
		// Deferred after co.Close, so it runs first: say goodbye, then wait for the processes.
		defer func() { co.Close(); spawned.wait() }()
	}
	fmt.Fprintf(env.Stderr, "coordinate: run %s waiting for %d workers on %s\n", co.Run(), o.workers, co.URL())
	code := ExitOK
	var runErr error
	if err := co.WaitReady(ctx); err != nil {
		code, runErr = ExitCouldNotRun, err // printed once, by the caller
	} else {
		// Spawned workers run on this machine: its one price counts once.
		fleet := &cost.Fleet{Coordinator: o.price, Local: o.spawn}
		for _, w := range co.Workers() {
			if !o.spawn {
				fleet.Workers = append(fleet.Workers, w.Machine.CostPerHour)
			}
		}
		// The client command's tree spreads its run over the workers (coord.Runner.Spread).
		root := newRoot(Loadproof, env, treeOpts{runner: coord.Runner{Spread: co}, fleet: fleet})
		code = runRoot(ctx, root, args, env)
	}
	lost := co.Lost()
	if lost != nil {
		code, runErr = ExitWorkerLost, lost
	}
	partial := co.Partial()
	if partial != nil && (code == ExitOK || runErr == nil) {
		// A merged result without every worker is partial: never exit 0.
		code, runErr = ExitWorkerLost, partial
	}
	m := co.Manifest(args, started, code, runErr)
	m.Flags = lkFlags(cmd)
	for _, k := range []string{"token", "nats-token", "secret", "nats-token-file", "secret-file"} {
		delete(m.Flags, k)
	}
	if err := coord.WriteManifest(path, m); err != nil {
		log.Error("could not write the coordination manifest", "path", path, "err", err)
	} else {
		log.Info("coordination manifest saved to " + path)
	}
	switch {
	case code == ExitOK:
		return nil
	case runErr != nil:
		return &ExitError{Code: code, Err: runErr}
	default:
		// The client command printed its own error.
		return &ExitError{Code: code, Err: errors.New("coordinate: the distributed client command failed (see above)")}
	}
}

// outputOf finds the client command's output path (--output/-o or --json), for the manifest's
// default name.
func outputOf(args []string) string {
	out := ""
	for i, a := range args {
		for _, name := range []string{"--output", "-o", "--json"} {
			if a == name && i+1 < len(args) {
				out = args[i+1]
			} else if v, ok := strings.CutPrefix(a, name+"="); ok {
				out = v
			}
		}
	}
	if out == "" {
		switch {
		case len(args) >= 2 && args[1] == "capacity":
			return "./capacity-evidence"
		case len(args) >= 1 && args[0] == "linkkeys":
			return "./linkkeys-" + args[min(1, len(args)-1)]
		}
		return "./loadtest-results.json"
	}
	return strings.TrimSuffix(out, "/")
}

// localWorkers are worker processes the coordinator started on this machine.
type localWorkers struct {
	cmds []*exec.Cmd
	wg   sync.WaitGroup
}

func (l *localWorkers) wait() {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, c := range l.cmds {
			_ = c.Process.Kill()
		}
		<-done
	}
}

// spawnWorkers starts o.workers worker processes of this binary on this machine, tied to this
// process (procexec) as every child loadproof starts is. (A worker also ends when its NATS
// connection does, which the coordinator's death ends at once: measured, they exit with status 4
// within a millisecond; the tie covers a worker blocked where it does not watch the connection.)
func spawnWorkers(env *Env, co *coord.Coordinator, o coordinateOpts) (*localWorkers, error) {
	l := &localWorkers{}
	for i := range o.workers {
		args := []string{"worker", "--nats", co.URL(), "--index", strconv.Itoa(i), "--name", fmt.Sprintf("local-%d", i), "--prefix", o.nf.prefix,
			"--allow-metrics-file", "--task-files", "*"}
		if o.allowHost != "" {
			args = append(args, "--allow-host", o.allowHost)
		}
		for _, h := range o.refuse {
			args = append(args, "--refuse-host", h)
		}
		c, err := procexec.Command("", args...)
		if err != nil {
			return l, fmt.Errorf("coordinate: starting local workers: %w", err)
		}
		c.Env = append(os.Environ(), "LOADPROOF_NATS_TOKEN="+cmp.Or(co.Token(), o.nf.token), "LOADPROOF_SECRET="+o.nf.secret)
		// Stdout to the null device (exec's nil), not through a pipe this process drains: a worker
		// writing into a pipe whose reader has died is killed by SIGPIPE, an end by accident.
		c.Stdout, c.Stderr = nil, env.Stderr
		if err := procexec.Start(c, procexec.Options{}); err != nil { // SIGKILL: without the coordinator the run is lost
			return l, fmt.Errorf("coordinate: starting local worker %d: %w", i, err)
		}
		l.cmds = append(l.cmds, c)
		l.wg.Add(1)
		go func() { defer l.wg.Done(); _ = c.Wait() }()
	}
	return l, nil
}

func newWorkerCmd(env *Env) *cobra.Command {
	var (
		nf          natsFlags
		index       int
		name        string
		joinTimeout time.Duration
		allowHost   string
		refuseHosts []string
		metricsFile bool
		taskFiles   []string
		ipBase      string
		ipCount     int
		price       cost.Price
	)
	c := &cobra.Command{
		Use:   "worker --nats URL",
		Short: "Join a coordinator and run the segments of client runs it sends",
		Long: "Connects to NATS, joins the coordinator of --prefix and runs its tasks: segment --index of a\n" +
			"Keycast run (a typed spec with an allow-listed set of fields) or of a LinkKeys client's worker spec\n" +
			"(never a shell command or another flag), started at the coordinated instant,\n" +
			"with one-second snapshots sent back and the result delivered over NATS. The target must pass\n" +
			"this worker's own host rules: local hosts, the exact --allow-host, never a production host.\n" +
			"--index defaults to JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), else any free segment.\n" +
			"The worker stops its load when the coordinator is silent for 3 s.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nf.url == "" {
				return usageError("worker: --nats is required: the URL of the coordinator's NATS")
			}
			warnArgvSecrets(cmd, env)
			if err := nf.resolve(); err != nil {
				return err
			}
			if ipBase != "" {
				if _, err := lkBase("--client-ip-base", ipBase); err != nil {
					return err
				}
				if ipCount < 1 {
					return usageError("worker: --client-ip-count %d: give the number of addresses from --client-ip-base (at least 1)", ipCount)
				}
			}
			if !cmd.Flags().Changed("index") {
				if v := env.Getenv("JOB_COMPLETION_INDEX"); v != "" {
					i, err := strconv.Atoi(v)
					if err != nil || i < 0 {
						return usageError("worker: JOB_COMPLETION_INDEX %q is not an index", v)
					}
					index = i
				}
			}
			for _, h := range append([]string{allowHost}, refuseHosts...) {
				if h == "" {
					continue
				}
				if _, err := hostrule.CanonicalHostFlag(h); err != nil {
					return usageError("worker: host %q: %v", h, err)
				}
			}
			err := coord.RunWorker(cmd.Context(), coord.WorkerConfig{
				Conn: nf.conn(""), Prefix: nf.prefix, Secret: nf.secret, InsecureUnsigned: nf.insecure, Name: name, Index: index, JoinTimeout: joinTimeout,
				MetricsFiles: metricsFile, TaskFiles: taskFiles, ClientIPBase: ipBase, ClientIPCount: ipCount,
				Exec: func(ctx context.Context, args []string, share *coord.Share) error {
					return execClient(ctx, env, args, share)
				},
				Hosts:    hostrule.Rules{AllowHost: allowHost, RefuseHosts: refuseHosts},
				Progress: env.Stderr, Logger: env.Logger, CostPerHour: price,
			})
			if errors.Is(err, coord.ErrCoordinatorLost) {
				return &ExitError{Code: ExitWorkerLost, Err: err}
			}
			if err != nil {
				return &ExitError{Code: ExitCouldNotRun, Err: err}
			}
			return nil
		},
	}
	f := c.Flags()
	nf.bind(f, env)
	f.IntVar(&index, "index", -1, "segment index to ask for, 0-based (default: JOB_COMPLETION_INDEX, else any free one)")
	f.StringVar(&name, "name", env.Getenv("HOSTNAME"), "worker name in the coordinator's records (default: host name and pid)")
	f.DurationVar(&joinTimeout, "join-timeout", 10*time.Minute, "how long to keep trying to join a coordinator")
	f.StringVar(&allowHost, "allow-host", "", "authorize this exact non-local target host")
	f.StringArrayVar(&refuseHosts, "refuse-host", nil, "refuse this target host in addition to the production Keycast hosts (repeatable)")
	f.StringArrayVar(&taskFiles, "task-files", splitList(env.Getenv("LOADPROOF_TASK_FILES")),
		"a directory a task may name files in (--users-file, --ca-cert; repeatable; env LOADPROOF_TASK_FILES, colon-separated); without it a task names no file")
	f.BoolVar(&metricsFile, "allow-metrics-file", false, "let a LinkKeys task name a server METRICS log file on this machine (workers beside the server; others take only URLs)")
	f.Var(&price, "cost-per-hour", "this machine's price per hour, as 1.53 or 1.53USD: sent in its machine record, so the coordinator prices the run over every machine (docs/cost.md)")
	f.StringVar(&ipBase, "client-ip-base", env.Getenv("LOADPROOF_CLIENT_IP_BASE"), "LinkKeys tasks: take source addresses from here instead of the task's range (this machine's own; env LOADPROOF_CLIENT_IP_BASE)")
	f.IntVar(&ipCount, "client-ip-count", envInt(env, "LOADPROOF_CLIENT_IP_COUNT"), "LinkKeys tasks: how many source addresses from --client-ip-base (env LOADPROOF_CLIENT_IP_COUNT)")
	return c
}

// splitList splits a colon-separated list, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ":") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// envInt reads an integer environment variable; unset or malformed is 0 (the flag's check then
// says what is wrong).
func envInt(env *Env, k string) int {
	n, _ := strconv.Atoi(env.Getenv(k))
	return n
}

// execClient runs a worker task's client command through a loadproof tree built with the task's
// share (coord.Runner.Share) in this process: the command runs its segment from the start instant
// and delivers its result. The command's own error is returned as it is: nothing is scraped from
// its output.
func execClient(ctx context.Context, env *Env, args []string, share *coord.Share) error {
	wenv := *env
	wenv.Stdout = io.Discard
	root := newRoot(Loadproof, &wenv, treeOpts{runner: coord.Runner{Share: share}})
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(env.Stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args[:min(2, len(args))], " "), err)
	}
	return nil
}
