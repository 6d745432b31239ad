package linkkeysload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loadproof/loadproof/internal/launch"
)

// Defaults of the seed's client commands (docs/protocol-linkkeys.md, The seed's commands).
const (
	DefaultInfoFile           = "loadtest-data/loadtest-info.json"
	DefaultProgressEvery      = 5000
	DefaultClientIPCount      = 32
	DefaultConnectionsBase    = "127.0.1.0"
	DefaultHandshakeBase      = "127.0.2.0"
	DefaultRequestBase        = "127.0.3.0"
	DefaultDDoSBase           = "127.5.0.0"
	DefaultAttemptTimeoutSecs = 10
	DefaultDDoSTimeoutSecs    = 5
)

// SmokeOptions configures the smoke run.
type SmokeOptions struct {
	// Executable is the binary whose server subcommand is started; empty means this process's own.
	Executable string
	// ServerArgs is the command line before the server's flags: ["server"] for linkkeys-loadtest,
	// ["linkkeys", "server"] for loadproof.
	ServerArgs []string
	// Env, when non-nil, replaces the server's environment.
	Env    []string
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
}

// SmokeStep is one client command of the smoke run.
type SmokeStep struct {
	Name   string  `json:"name"`
	OK     bool    `json:"ok"`
	Detail string  `json:"detail"`
	Result *Result `json:"result,omitempty"`
}

// Summary is the outcome of a smoke run.
type Summary struct {
	OK        bool        `json:"ok"`
	ServerPID int         `json:"server_pid"`
	Elapsed   Duration    `json:"elapsed"`
	Steps     []SmokeStep `json:"steps"`
}

// smokeReadyPolls and smokeReadyEvery are tools.sh's wait for the info file: 100 polls, 0.2 s apart
// (the launcher's deadline and poll).
const (
	smokeReadyPolls = 100
	smokeReadyEvery = 200 * time.Millisecond
)

// ErrSmokeFailed is returned (wrapped) when the smoke run ran but a step failed.
var ErrSmokeFailed = errors.New("linkkeysload: smoke run failed")

// Smoke is upstream's smoke run, tools.sh load-test (docs/protocol-linkkeys.md, Smoke run): it
// starts the server subcommand of this binary on a temporary directory (METRICS every 3 s,
// auto-exit after 60 s), waits for its info file, runs connections (500 at 250 in flight, held
// 5 s), handshake-bench (5 s, 32 loops), request-bench (16 connections, 5 s) and ddos (500
// sources, 200 in flight) against it with the server's default limits, prints their lines and a
// summary, then stops the server by its PID and removes the directory.
//
// What counts as failure: a client command returning an error (tools.sh runs under set -e); a
// client that succeeds zero times (no connection established, no handshake completed, no request
// answered with status 0, no ddos source admitted); or, for connections and ddos, the server's own
// METRICS not accounting for every attempt exactly (or not being readable). Client-side failures
// that the default limits cause by design are not failures: handshake-bench exhausts each source's
// handshake bucket (20 burst, 1/s) within a second, and request-bench's requests beyond the
// public-read budget (100 burst and 100/min per source) are answered with status 7.
func Smoke(ctx context.Context, opt SmokeOptions) (Summary, error) {
	out, errOut := opt.Stdout, opt.Stderr
	if out == nil {
		out = io.Discard
	}
	if errOut == nil {
		errOut = io.Discard
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	began := time.Now()
	var sum Summary
	dir, err := os.MkdirTemp("", "linkkeys-smoke-*")
	if err != nil {
		return sum, errorf("smoke: making the work directory: %w", err)
	}
	defer os.RemoveAll(dir)
	info := filepath.Join(dir, "loadtest-info.json")
	logPath := filepath.Join(dir, "server.log")
	dumpLog := func() {
		b, _ := os.ReadFile(logPath)
		fmt.Fprintf(errOut, "---- server log (%s)\n%s---- end of server log\n", logPath, b)
	}
	args := append(append([]string(nil), opt.ServerArgs...),
		"--info-file", info, "--db-path", filepath.Join(dir, "loadtest.sqlite3"),
		"--metrics-interval-secs", "3", "--duration-secs", "60")
	srv, err := launch.Start(ctx, launch.Options{Executable: opt.Executable, Args: args, Env: opt.Env, Log: logPath,
		InfoFile: info, Wait: smokeReadyPolls * smokeReadyEvery, Poll: smokeReadyEvery, Grace: 5 * time.Second})
	var re *launch.ReadyError
	switch {
	case errors.As(err, &re) && re.Err == launch.ErrExited:
		dumpLog()
		return sum, errorf("smoke: the server exited before it was ready (%v); its log follows on stderr", re.Exit)
	case errors.Is(err, launch.ErrDeadline):
		dumpLog()
		return sum, errors.New("load-test server did not become ready within 20s")
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		dumpLog()
		return sum, err
	case err != nil:
		return sum, errorf("smoke: %w", err)
	}
	sum.ServerPID = srv.PID()
	stop := func() { _ = srv.Stop() }
	defer stop()

	target, _, err := LoadTarget(info)
	if err != nil {
		dumpLog()
		return sum, err
	}
	log.Info("smoke: server ready", "pid", sum.ServerPID, "port", target.Addr.Port(), "dir", dir)
	metrics := &MetricsSource{Location: logPath}
	// Each step records the flags it would have on the command line, so its result redraws from
	// the file alone (loadproof report) with the same header line.
	run := func(m *MetricsSource, flags map[string]string) Run {
		return Run{Stdout: out, Stderr: errOut, Metrics: m, SettleWait: 10 * time.Second, Log: log, Flags: flags}
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	timeout := func(s int) time.Duration { return time.Duration(s) * time.Second }

	step := func(name string, res Result, err error, ok bool, detail string) {
		s := SmokeStep{Name: name, OK: ok && err == nil, Detail: detail}
		if err != nil {
			s.Detail = "error: " + err.Error()
		} else {
			r := res
			s.Result = &r
		}
		sum.Steps = append(sum.Steps, s)
	}
	accountingOK := func(r Result) (bool, string) {
		switch {
		case r.Server == nil:
			return false, "server accounting missing"
		case r.Server.Note != "" && len(r.Server.Checks) == 0:
			return false, "server accounting unavailable: " + r.Server.Note
		case r.Server.Mismatch():
			return false, "server accounting does not match the client's attempts"
		}
		return true, "server accounting matches every attempt"
	}

	// 1. connections --count 500 --concurrency 250 --hold-secs 5
	cc := ConnectionsConfig{Target: target, Count: 500, Concurrency: 250, HoldSecs: 5, AttemptTimeout: timeout(DefaultAttemptTimeoutSecs),
		Sources: SourceAddrs{Base: mustParse(DefaultConnectionsBase), Count: DefaultClientIPCount}, ProgressEvery: DefaultProgressEvery}
	res, err := Connections(ctx, cc, run(metrics, map[string]string{"count": u(uint64(cc.Count)), "concurrency": u(uint64(cc.Concurrency)),
		"hold-secs": u(cc.HoldSecs), "client-ip-base": DefaultConnectionsBase, "client-ip-count": u(DefaultClientIPCount)}))
	if err == nil {
		ok, acct := accountingOK(res)
		n := res.Attempts.Succeeded
		step("connections", res, nil, ok && n > 0, fmt.Sprintf("established=%d/%d; %s", n, cc.Count, acct))
	} else {
		step("connections", res, err, false, "")
	}

	// 2. handshake-bench --duration-secs 5 --concurrency 32
	hc := HandshakeConfig{Target: target, DurationSecs: 5, Concurrency: 32, AttemptTimeout: timeout(DefaultAttemptTimeoutSecs),
		Sources: SourceAddrs{Base: mustParse(DefaultHandshakeBase), Count: DefaultClientIPCount}}
	res, err = HandshakeBench(ctx, hc, run(nil, map[string]string{"duration-secs": u(hc.DurationSecs), "concurrency": u(uint64(hc.Concurrency)),
		"client-ip-base": DefaultHandshakeBase, "client-ip-count": u(DefaultClientIPCount)}))
	if err == nil {
		h := res.Handshakes
		step("handshake-bench", res, nil, h.Completed > 0,
			fmt.Sprintf("completed=%d failed=%d (failures are the default per-source handshake limit at work)", h.Completed, h.Failed))
	} else {
		step("handshake-bench", res, err, false, "")
	}

	// 3. request-bench --connections 16 --duration-secs 5
	rc := RequestConfig{Target: target, Connections: 16, DurationSecs: 5, Op: OpDomainKeys, AttemptTimeout: timeout(DefaultAttemptTimeoutSecs),
		Sources: SourceAddrs{Base: mustParse(DefaultRequestBase), Count: DefaultClientIPCount}}
	res, err = RequestBench(ctx, rc, run(nil, map[string]string{"connections": u(uint64(rc.Connections)), "duration-secs": u(rc.DurationSecs),
		"op": rc.Op, "client-ip-base": DefaultRequestBase, "client-ip-count": u(DefaultClientIPCount)}))
	if err == nil {
		q := res.Requests
		step("request-bench", res, nil, q.Completed > 0,
			fmt.Sprintf("completed=%d errors=%d (status-7 answers are the default public-read limit at work)", q.Completed, q.Errors))
	} else {
		step("request-bench", res, err, false, "")
	}

	// 4. ddos --sources 500 --concurrency 200
	dc := DDoSConfig{Target: target, Sources: 500, Concurrency: 200, AttemptTimeout: timeout(DefaultDDoSTimeoutSecs),
		Base: mustParse(DefaultDDoSBase), ProgressEvery: DefaultProgressEvery}
	res, err = DDoS(ctx, dc, run(metrics, map[string]string{"sources": u(uint64(dc.Sources)), "concurrency": u(uint64(dc.Concurrency)),
		"client-ip-base": DefaultDDoSBase}))
	if err == nil {
		ok, acct := accountingOK(res)
		a := res.Attempts
		step("ddos", res, nil, ok && a.Succeeded > 0, fmt.Sprintf("allowed=%d denied=%d; %s", a.Succeeded, a.Failed, acct))
	} else {
		step("ddos", res, err, false, "")
	}

	stop()
	sum.OK = ctx.Err() == nil
	for _, s := range sum.Steps {
		sum.OK = sum.OK && s.OK
	}
	sum.Elapsed = Duration(time.Since(began))
	WriteSmokeSummary(out, sum)
	if !sum.OK {
		dumpLog()
		var failed []string
		for _, s := range sum.Steps {
			if !s.OK {
				failed = append(failed, s.Name)
			}
		}
		if ctx.Err() != nil {
			return sum, fmt.Errorf("%w: interrupted", ErrSmokeFailed)
		}
		return sum, fmt.Errorf("%w: %s (see the summary above and the server log on stderr)", ErrSmokeFailed, strings.Join(failed, ", "))
	}
	return sum, nil
}

// WriteSmokeSummary prints the smoke run's summary: one line per client, then tools.sh's closing
// line when every step passed.
func WriteSmokeSummary(w io.Writer, sum Summary) {
	fmt.Fprintln(w, "smoke summary:")
	for _, s := range sum.Steps {
		verdict := "ok    "
		if !s.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "  %-16s %s %s\n", s.Name, verdict, s.Detail)
	}
	if sum.OK {
		fmt.Fprintln(w, "load-test smoke run complete \u2014 see docs/load-testing.md for the full-scale profile")
	}
}

func mustParse(s string) IPv4 {
	a, ok := parseIPv4(s)
	if !ok {
		panic("linkkeysload: bad built-in address " + s)
	}
	return a
}
