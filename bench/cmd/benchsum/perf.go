package main

import (
	"bufio"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// perf-breakdown: where a process's CPU went during a handshake run, from `perf record -g`
// samples (`perf script -F comm,tid,period,ip,sym` on stdin). Each sample goes to the first
// category whose rule matches its call stack (the rules in order: the handshake's public-key crypto
// first, then the runtime's own work, then the rest of TLS, then the kernel by system call). With
// HANDSHAKES and CPU_NS (the process's CPU over the same run, from the result JSON) each category
// is also given as µs per handshake; perf samples only the middle of the run, so those are the
// shares applied to the measured CPU, not sample counts.

// stackRule is one category and the test on a sample's symbols (leaf first).
type stackRule struct {
	name string
	test func(syms []string) bool
}

// has matches a stack where any frame contains any of subs.
func has(subs ...string) func([]string) bool {
	return func(syms []string) bool {
		for _, f := range syms {
			for _, s := range subs {
				if strings.Contains(f, s) {
					return true
				}
			}
		}
		return false
	}
}

func leafKernel(syms []string) bool { return len(syms) > 0 && strings.HasPrefix(syms[0], "[k]") }

var perfRules = []stackRule{
	{"crypto: X25519 keygen + shared secret", has("crypto/ecdh.")},
	{"crypto: Ed25519 sign", has("crypto/ed25519.PrivateKey.Sign", "crypto/ed25519.Sign")},
	{"crypto: Ed25519 verify", has("crypto/ed25519.Verify")},
	{"runtime: GC (mark, sweep, assists)", has("runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.gcAssistAlloc",
		"runtime.bgsweep", "runtime.sweepone", "runtime.markroot",
		"runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination",
		"runtime.(*sweepLocked).sweep", "runtime.deductSweepCredit",
		"runtime.scavenge", "runtime.bgscavenge")},
	{"runtime: goroutine stack growth", has("runtime.newstack", "runtime.morestack", "runtime.copystack")},
	{"kernel", leafKernel},
	{"TLS: session ticket", has("sendSessionTickets", "encryptTicket", "EncryptTicket", "sessionState).Bytes")},
	{"TLS: certificate parsing (x509)", has("crypto/x509.")},
	{"runtime: allocation", has("runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice")},
	{"TLS: key schedule, transcript, records, messages", has("crypto/tls.", "crypto/internal/fips140/sha256",
		"crypto/internal/fips140/hkdf", "crypto/internal/fips140/hmac",
		"crypto/internal/fips140/aes", "crypto/sha256")},
}

// The rules for stacks no category above took.
var (
	schedulerRule = has("runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.goready", "runtime.netpoll",
		"runtime.gopark", "runtime.mcall", "runtime.ready", "runtime.wakep", "runtime.runqsteal")
	timerRule = has("runtime.(*timer)", "runtime.modtimer", "runtime.deltimer", "runtime.addtimer", "runtime.(*timers)")
	netRule   = has("internal/poll.", "net.(*conn)", "net.(*netFD)", "net.(*sysDialer)", "net.(*TCPListener)", "net.(*Dialer)",
		"syscall.")
	oursRule  = has("linkkeysserver.", "linkkeysload.", "internal/engine.", "internal/admit.")
	syscallRe = regexp.MustCompile(`^\[k\] (?:__x64_sys_|__do_sys_|__se_sys_|__sys_|do_sys_)(\w+)`)
)

// kernelCategory splits the kernel's share by system call, page faults and network softirqs.
func kernelCategory(syms []string) string {
	for _, f := range syms {
		if m := syscallRe.FindStringSubmatch(f); m != nil {
			return "kernel: syscall " + m[1]
		}
	}
	if has("asm_exc_page_fault")(syms) {
		return "kernel: page faults"
	}
	if has("do_softirq", "net_rx_action")(syms) {
		return "kernel: softirq (network)"
	}
	return "kernel: other (" + strings.TrimPrefix(syms[0], "[k] ") + ")"
}

// categorize names the category of one sample's stack.
func categorize(syms []string) string {
	for _, r := range perfRules {
		if r.test(syms) {
			if r.name == "kernel" {
				return kernelCategory(syms)
			}
			return r.name
		}
	}
	switch {
	case schedulerRule(syms):
		return "runtime: scheduler, netpoll"
	case timerRule(syms):
		return "runtime: timers"
	case netRule(syms):
		return "net, poll (user side)"
	case oursRule(syms):
		return "loadproof code"
	}
	if len(syms) == 0 {
		return "other: ?"
	}
	return "other: " + syms[0]
}

func runPerfBreakdown(e *env, args []string) error {
	if err := wantArgs(args, 0, 2); err != nil {
		return err
	}
	var hs, cpuNs float64
	if len(args) == 2 {
		var err error
		if hs, err = floatArg("HANDSHAKES", args[0]); err != nil {
			return err
		}
		if cpuNs, err = floatArg("CPU_NS", args[1]); err != nil {
			return err
		}
	}
	totals := map[string]float64{}
	var order []string // categories in the order first seen, so equal shares print in a stable order
	var total, period float64
	var stack []string
	flush := func() {
		if period != 0 {
			c := categorize(stack)
			if _, ok := totals[c]; !ok {
				order = append(order, c)
			}
			totals[c] += period
			total += period
		}
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			stack, period = nil, 0
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			// A sample's head: comm tid period; the period is its last field.
			f := strings.Fields(line)
			period = 1
			if len(f) > 0 && isDigits(f[len(f)-1]) {
				period, _ = strconv.ParseFloat(f[len(f)-1], 64)
			}
			continue
		}
		// A frame: address, then the symbol (with its offset and module).
		frame := strings.TrimSpace(line)
		if i := strings.IndexAny(frame, " \t"); i > 0 {
			sym := strings.TrimSpace(frame[i:])
			if strings.HasPrefix(frame, "ffffffff") {
				sym = "[k] " + sym
			}
			stack = append(stack, sym)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading perf script output: %w", err)
	}
	flush()
	if total == 0 {
		e.printf("no samples\n")
		return nil
	}
	sort.SliceStable(order, func(i, j int) bool { return totals[order[i]] > totals[order[j]] })
	var crypto float64
	for _, c := range order {
		v := totals[c]
		if strings.HasPrefix(c, "crypto:") {
			crypto += v
		}
		share := v / total
		if share < 0.003 {
			continue
		}
		extra := ""
		if hs != 0 {
			extra = fmt.Sprintf("  %7.1f µs/hs", share*cpuNs/hs/1e3)
		}
		e.printf("  %5.1f%%  %s%s\n", 100*share, c, extra)
	}
	e.printf("  crypto share of the samples: %.1f%%\n", 100*crypto/total)
	return nil
}

// isDigits reports whether s is all ASCII digits (and not empty).
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
