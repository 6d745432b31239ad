package capacity

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/capacity/plan"
	"github.com/loadproof/loadproof/internal/hostrule"
	"github.com/loadproof/loadproof/internal/launch"
	"github.com/loadproof/loadproof/internal/linkkeysload"
)

// The LinkKeys server of a phase is verified, not trusted: whether the capacity command started it
// or it was already running, its config: line (the limits it parsed, as it printed them at start)
// must be the line the phase's environment profile gives, and its process's TCP_* and PUBLIC_READ_*
// variables (read from /proc/<pid>/environ where the system allows) must be exactly the profile's.
// A phase whose server runs other limits is not run: it is a phase error, and its evidence records
// what the server runs next to what the plan declared.

// ServerRecord is what the evidence records of a phase's server.
type ServerRecord struct {
	// Mode is "started" (this command started it with the declared profile) or "running".
	Mode string `json:"mode"`
	// EnvironmentProfile is the profile the phase declares.
	EnvironmentProfile string `json:"environment_profile"`
	// Declared are the profile's variables; Processes its server processes.
	Declared  map[string]string `json:"declared_variables"`
	Processes int               `json:"processes"`
	// ExpectedConfigLine is the config: line a reference server prints for the declared variables.
	ExpectedConfigLine string `json:"expected_config_line"`
	// ConfigLine is the config: line the server printed.
	ConfigLine string `json:"config_line"`
	// Limits are ConfigLine's fields, by name.
	Limits map[string]string `json:"limits,omitempty"`
	// Environment are the server process's TCP_* and PUBLIC_READ_* variables, when they could be
	// read (EnvironmentVerified).
	Environment         map[string]string `json:"environment,omitempty"`
	EnvironmentVerified bool              `json:"environment_verified"`
	// EnvironmentNote says why the environment could not be read.
	EnvironmentNote string `json:"environment_note,omitempty"`
	// PID is the server's process id (from its info file).
	PID uint32 `json:"pid"`
	// Mismatches lists every difference between what was declared and what the server runs;
	// empty when the server runs the declared limits.
	Mismatches []string `json:"mismatches"`
	// Log is the server log's file in the bundle, when it was kept.
	Log string `json:"log,omitempty"`
	// SourcePrefixes is the TCP_SOURCE_PREFIXES value naming every stream's source range: what a
	// started server runs with (it is in Declared and in the expected config: line), and what a
	// running server would need to count each stream apart.
	SourcePrefixes string `json:"source_prefixes,omitempty"`
	// SourcePrefixesNote says, for a running server, how the prefixes it counts compare with the
	// phase's streams (the streams it does not count are attributed by elimination, where exact).
	SourcePrefixesNote string `json:"source_prefixes_note,omitempty"`
	// Target is the server's address as the load reached it (a remote server's HOST:PORT).
	Target string `json:"target,omitempty"`
	// ServerVerified says the limits the server runs were read and compared with the profile (its
	// config: line). A remote server without a metrics URL, or whose metrics endpoint does not
	// serve its config: line, is not verified: the evidence is then not certification-ready.
	ServerVerified bool `json:"server_verified"`
	// VerificationNote says what was and was not verified of a remote server.
	VerificationNote string `json:"verification_note,omitempty"`
}

// ServerLauncher starts the reference server of a phase: Executable (empty: this program) with
// Args (the server subcommand: ["server"] for linkkeys-loadtest, ["linkkeys", "server"] for
// loadproof) and the server's own flags, in an environment that is Env (nil: this process's)
// without any TCP_* or PUBLIC_READ_* variable, plus the profile's.
type ServerLauncher struct {
	Executable string
	Args       []string
	Env        []string
	// Ready bounds the wait for the server's info file; 0 means 60 s.
	Ready time.Duration
}

// phaseServer is a phase's server, started or running.
type phaseServer struct {
	target  linkkeysload.Target
	logPath string
	// logFrom is where the phase's part of the log starts (a running server's earlier lines are
	// not the phase's).
	logFrom int64
	stop    func()
}

func serverEnv(base []string, vars map[string]string) []string {
	if base == nil {
		base = os.Environ()
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TCP_") || strings.HasPrefix(k, "PUBLIC_READ_") {
			continue
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// start starts a fresh server for a profile in dir.
func (l ServerLauncher) start(ctx context.Context, prof plan.EnvironmentProfile, dir string) (*phaseServer, error) {
	info := filepath.Join(dir, "info.json")
	logPath := filepath.Join(dir, "server.log")
	args := append(slices.Clone(l.Args), "--info-file", info, "--db-path", filepath.Join(dir, "server.sqlite3"),
		"--metrics-interval-secs", "1", "--processes", strconv.Itoa(max(prof.Processes, 1)))
	ready := l.Ready
	if ready <= 0 {
		ready = 60 * time.Second
	}
	srv, err := launch.Start(ctx, launch.Options{Executable: l.Executable, Args: args, Env: serverEnv(l.Env, prof.Variables), Log: logPath,
		InfoFile: info, Wait: ready, Poll: 100 * time.Millisecond, Grace: 15 * time.Second})
	var re *launch.ReadyError
	switch {
	case errors.As(err, &re) && re.Err == launch.ErrExited:
		return nil, &SafeError{Msg: "the reference server exited before it was ready (its log is in the bundle)", Err: re.Exit}
	case errors.Is(err, launch.ErrDeadline):
		return nil, &SafeError{Msg: fmt.Sprintf("the reference server did not write its info file within %s", ready)}
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, err
	case err != nil:
		return nil, &SafeError{Msg: "starting the reference server", Err: err}
	}
	stop := func() { _ = srv.Stop() }
	target, _, err := linkkeysload.LoadTarget(info)
	if err != nil {
		stop()
		return nil, &SafeError{Msg: "reading the started server's info file", Err: err}
	}
	return &phaseServer{target: target, logPath: logPath, stop: stop}, nil
}

// running reaches the server the plan's target names.
func running(t plan.LinkKeysTarget) (*phaseServer, error) {
	target, _, err := linkkeysload.LoadTarget(t.InfoFile)
	if err != nil {
		return nil, &SafeError{Msg: fmt.Sprintf("reading the running server's info file %q", t.InfoFile), Err: err}
	}
	fi, err := os.Stat(t.ServerLog)
	if err != nil {
		return nil, &SafeError{Msg: fmt.Sprintf("reading the running server's log %q", t.ServerLog), Err: err}
	}
	return &phaseServer{target: target, logPath: t.ServerLog, logFrom: fi.Size(), stop: func() {}}, nil
}

// remote reaches the server a remote target names: the target resolved and authorized by the
// host rules (linkkeysload.TargetOptions, with no info file), and its metrics URL as the source of
// its METRICS (nil without one).
func remote(ctx context.Context, t plan.LinkKeysTarget, rules hostrule.Rules) (*phaseServer, *linkkeysload.MetricsSource, error) {
	rt, err := linkkeysload.TargetOptions{Addr: t.Addr, Fingerprint: t.Fingerprint, Domain: t.Domain, ServerMetrics: t.MetricsURL,
		Rules: rules}.Resolve(ctx)
	if err != nil {
		return nil, nil, &SafeError{Msg: fmt.Sprintf("reaching the remote server %s", t.Addr), Err: err}
	}
	var m *linkkeysload.MetricsSource
	if t.MetricsURL != "" {
		m = rt.Metrics
	}
	return &phaseServer{target: rt.Target, stop: func() {}}, m, nil
}

// configURL is where a reference server serves its config: line: /config beside its metrics path.
func configURL(metricsURL string) (string, error) {
	u, err := url.Parse(metricsURL)
	if err != nil {
		return "", err
	}
	u.Path = path.Join(path.Dir(u.Path), "config")
	return u.String(), nil
}

// fetchConfigLine reads a remote server's config: line from its metrics endpoint's /config.
func fetchConfigLine(ctx context.Context, metricsURL string) (string, error) {
	cu, err := configURL(metricsURL)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cu, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", cu, resp.Status)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, ConfigLinePrefix) {
		return "", fmt.Errorf("GET %s: the answer is not a config: line", cu)
	}
	return line, nil
}

// verifyRemote verifies a remote server as far as it can be from here: without a metrics URL not
// at all; with one, its METRICS must be readable, and its config: line (from /config) must be the
// profile's, compared as for a running server. Its process environment is on its machine and is
// never read. rec.ServerVerified says whether the limits were verified.
func verifyRemote(ctx context.Context, srv *phaseServer, m *linkkeysload.MetricsSource, rec *ServerRecord) error {
	rec.Target = srv.target.Addr.String()
	rec.Mismatches = []string{}
	rec.EnvironmentNote = "a remote server's process environment is on its own machine and is not read"
	if m == nil {
		rec.VerificationNote = "the target names no metrics_url: the server side was not verified (its limits were not read and its accounting was not checked)"
		return nil
	}
	if _, err := m.Latest(ctx); err != nil {
		return &SafeError{Msg: fmt.Sprintf("reading the remote server's METRICS from %s", m.Location), Err: err}
	}
	line, err := fetchConfigLine(ctx, m.Location)
	if err != nil {
		rec.VerificationNote = "the server's METRICS were read from " + m.Location + ", but its config: line could not be (" + ScrubError(err) +
			"), so the limits it runs were not verified"
		return nil
	}
	rec.ConfigLine = line
	rec.Limits = configFields(line)
	if err := compareConfig(rec, line, true); err != nil {
		return err
	}
	rec.ServerVerified = true
	rec.VerificationNote = "the config: line and METRICS were read from the server's metrics endpoint " + m.Location
	return nil
}

// ConfigLinePrefix starts the server's config: line.
const ConfigLinePrefix = "config: "

// lastConfigLine returns the last config: line of a server log (the server prints one as it
// starts), waiting up to wait for it to appear.
func lastConfigLine(ctx context.Context, path string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := os.Open(path)
		if err != nil {
			return "", &SafeError{Msg: fmt.Sprintf("reading the server log %q", path), Err: err}
		}
		var last string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), ConfigLinePrefix) {
				last = sc.Text()
			}
		}
		f.Close()
		if last != "" {
			return last, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", &SafeError{Msg: fmt.Sprintf("the server log %q holds no config: line (a reference server prints one as it starts; give the log of its stdout)", path)}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// configFields splits a config: line into its name=value fields.
func configFields(line string) map[string]string {
	out := map[string]string{}
	for f := range strings.FieldsSeq(strings.TrimPrefix(line, ConfigLinePrefix)) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

// processEnvironment reads a process's TCP_* and PUBLIC_READ_* variables from
// /proc/<pid>/environ (Linux; another user's process is unreadable).
func processEnvironment(pid uint32) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if ok && (strings.HasPrefix(k, "TCP_") || strings.HasPrefix(k, "PUBLIC_READ_")) && k != "TCP_PORT" {
			out[k] = v
		}
	}
	return out, nil
}

// sourcePrefixesField is the config: line's field of the source prefixes (the reference server
// prints it after the seed's fields when TCP_SOURCE_PREFIXES is set).
const sourcePrefixesField = "source_prefixes"

// withoutSourcePrefixes returns a config: line without its source_prefixes field.
func withoutSourcePrefixes(line string) string {
	fields := strings.Fields(line)
	fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, sourcePrefixesField+"=") })
	return strings.Join(fields, " ")
}

// verify compares what the server runs with the profile and fills rec. A started server must run
// the phase's source prefixes too (they are declared); a running server is measured with whatever
// prefixes it counts, which rec.SourcePrefixesNote compares with the phase's streams.
func verify(ctx context.Context, srv *phaseServer, rec *ServerRecord, environ func(uint32) (map[string]string, error)) error {
	rec.PID = srv.target.PID
	line, err := lastConfigLine(ctx, srv.logPath, 10*time.Second)
	if err != nil {
		return err
	}
	rec.ConfigLine = line
	rec.Limits = configFields(line)
	rec.Mismatches = []string{}
	running := rec.Mode == "running"
	_ = compareConfig(rec, line, running)
	if environ == nil {
		environ = processEnvironment
	}
	env, err := environ(srv.target.PID)
	if err != nil {
		rec.EnvironmentNote = "the server process's environment could not be read (" + ScrubError(err) + "); only its config: line was verified"
	} else {
		rec.Environment, rec.EnvironmentVerified = env, true
		keys := map[string]bool{}
		for k := range env {
			if k == plan.SourcePrefixesVariable && running {
				continue // read with whatever prefixes it counts (SourcePrefixesNote)
			}
			keys[k] = true
		}
		for k := range rec.Declared {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			got, have := env[k]
			want, declared := rec.Declared[k]
			switch {
			case have && !declared:
				rec.Mismatches = append(rec.Mismatches, fmt.Sprintf("environment: %s=%s is set, but the profile leaves it at its default", k, got))
			case !have && declared:
				rec.Mismatches = append(rec.Mismatches, fmt.Sprintf("environment: %s is unset, but the profile declares %s", k, want))
			case got != want:
				rec.Mismatches = append(rec.Mismatches, fmt.Sprintf("environment: %s=%s, declared %s", k, got, want))
			}
		}
	}
	if len(rec.Mismatches) > 0 {
		return &SafeError{Msg: fmt.Sprintf("the server runs other limits than profile %q declares: %s", rec.EnvironmentProfile, strings.Join(rec.Mismatches, "; "))}
	}
	rec.ServerVerified = true
	return nil
}

// compareConfig compares a server's config: line with the declared one into rec.Mismatches; a
// server that was not started here (running, remote) is read with whatever source prefixes it
// counts (rec.SourcePrefixesNote). The error names the mismatches.
func compareConfig(rec *ServerRecord, line string, running bool) error {
	if running {
		got := rec.Limits[sourcePrefixesField]
		switch {
		case got == rec.SourcePrefixes:
		case got == "":
			rec.SourcePrefixesNote = "the server counts no source prefix, so the streams' server figures come from the whole run's by elimination where that is exact; " +
				"start it with " + plan.SourcePrefixesVariable + "=" + rec.SourcePrefixes + " to count each stream apart"
		default:
			rec.SourcePrefixesNote = "the server counts source prefixes " + got + "; this phase's streams are " + rec.SourcePrefixes +
				" (a stream the server counts under its own name gets its own server figures)"
		}
	}
	expected := rec.ExpectedConfigLine
	if running {
		line, expected = withoutSourcePrefixes(line), withoutSourcePrefixes(expected)
	}
	if line != expected {
		want := configFields(expected)
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		got := configFields(line)
		for k := range got {
			if _, ok := want[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if got[k] != want[k] {
				rec.Mismatches = append(rec.Mismatches, fmt.Sprintf("config: %s=%s, declared %s=%s", k, orNone(got[k]), k, orNone(want[k])))
			}
		}
		if len(rec.Mismatches) == 0 {
			rec.Mismatches = append(rec.Mismatches, "config: line differs from the declared one")
		}
	}
	if len(rec.Mismatches) > 0 {
		return &SafeError{Msg: fmt.Sprintf("the server runs other limits than profile %q declares: %s", rec.EnvironmentProfile, strings.Join(rec.Mismatches, "; "))}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// readFrom returns a file's bytes from offset (a running server's log: the phase's part).
func readFrom(path string, offset int64, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
