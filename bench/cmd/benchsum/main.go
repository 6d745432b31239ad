// Command benchsum prints the summaries of the bench scripts (bench/*.sh): the figures of several
// runs side by side, their ratios and medians, read from the result files a script left in its
// output folder. The scripts keep what needs the operating system (servers, pinning, perf, /proc
// sampling loops) and call one summary each:
//
//	benchsum side-by-side OUT ROUNDS
//	benchsum perf-breakdown [HANDSHAKES CPU_NS] <perf-script-output
//
// `benchsum help` lists them all. Every summary reads files and writes text to stdout; a file that
// is missing or does not parse stops it with exit status 1 and a message naming the file. Usage
// errors exit 2. bench/lib.sh builds it once per script run (build_benchsum).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// summary is one subcommand: its argument synopsis, what it prints, and the function.
type summary struct {
	args, what string
	run        func(env *env, args []string) error
}

// env is what a summary reads and writes besides its files.
type env struct {
	stdin   io.Reader
	stdout  io.Writer
	loadavg string // the load average file (/proc/loadavg; a fixture in tests)
}

func (e *env) printf(format string, a ...any) { fmt.Fprintf(e.stdout, format, a...) }

var summaries = map[string]summary{
	"calibration":      {"OUT REPS REPS_B RUNS RUNS_B", "bench/compare-calibration.sh: the comparisons of (a), (b), (c)", runCalibration},
	"combined-procs":   {"OUT ROUNDS", "bench/linkkeys-combined-procs.sh: the request stream beside handshakes, one process or apart", runCombinedProcs},
	"ddos-rss":         {"OUT ROUNDS SOURCES [leanold]", "bench/linkkeys-ddos-rss.sh: server RSS per run and per binary", runDDoSRSS},
	"handshake-pinned": {"OUT ROUNDS BUILD...", "bench/linkkeys-handshake-pinned.sh: handshakes against the crypto bound", runHandshakePinned},
	"keycast-rpc":      {"LAYOUT GPK SIGN NIP44 BOUND GPKCPU SIGNCPU NIP44CPU SIGNNS BOUND0 SIGNNS0", "bench/keycast-server-rpc.sh: one layout's summary", runKeycastRPC},
	"keycast-tls":      {"LINES", "bench/keycast-server-tls.sh: medians of the keycast-tls: lines, tls/plain", runKeycastTLS},
	"million":          {"OUT", "bench/linkkeys-million.sh: cost per held connection at every plateau", runMillion},
	"million-machine":  {"", "bench/linkkeys-million.sh: this machine's record, one line", runMillionMachine},
	"million-sample":   {"LABEL SERVER_PID OUT CLIENT_BINARY", "bench/linkkeys-million.sh: one JSON line of server, client and kernel figures", runMillionSample},
	"perf-breakdown":   {"[HANDSHAKES CPU_NS]", "perf script -F comm,tid,period,ip,sym on stdin: CPU by category", runPerfBreakdown},
	"search-knee":      {"OUT REPS", "bench/search-knee.sh: each search's knee and whether they agree", runSearchKnee},
	"side-by-side":     {"OUT ROUNDS", "bench/linkkeys-side-by-side.sh: old and new clients, ratios per round", runSideBySide},
	"skew":             {"MANIFEST", "bench/distributed-skew.sh: one coordinated start's skew", runSkew},
	"testbed-bridge":   {"OUT ROUNDS", "bench/testbed-bridge.sh: bridge against loopback per round", runTestbedBridge},
	"testbed-held":     {"OUT PER_HOST", "bench/testbed-held.sh: held per load host, server and kernel counters", runTestbedHeld},
}

// errUsage marks an error in the command line (exit status 2).
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, loadavg: "/proc/loadavg"}, os.Stderr))
}

func run(args []string, e *env, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	s, ok := summaries[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "benchsum: unknown summary %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := s.run(e, args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "benchsum: %v\nusage: benchsum %s %s\n", err, args[0], s.args)
			return 2
		}
		fmt.Fprintf(stderr, "benchsum %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	names := make([]string, 0, len(summaries))
	for n := range summaries {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: benchsum SUMMARY ARGS...; the summaries:")
	for _, n := range names {
		s := summaries[n]
		fmt.Fprintf(w, "  %s %s\n      %s\n", n, s.args, s.what)
	}
}

// wantArgs checks the count of a summary's arguments (between min and max; max < 0: no bound).
func wantArgs(args []string, min, max int) error {
	if len(args) < min || (max >= 0 && len(args) > max) {
		return fmt.Errorf("%w: %d arguments (%s)", errUsage, len(args), strings.Join(args, " "))
	}
	return nil
}
