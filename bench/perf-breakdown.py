#!/usr/bin/env python3
"""Where a process's CPU went during a handshake run, from `perf record -g` samples.

Usage: perf script -i FILE.perf -F comm,tid,period,ip,sym | bench/perf-breakdown.py [HANDSHAKES CPU_NS]

Each sample is put in the first category whose rule matches its call stack (rules in order below:
the handshake's public-key crypto first, then the runtime's own work, then the rest of TLS, then
the kernel by system call). With HANDSHAKES and CPU_NS (the process's CPU over the same run, from
the result JSON) it also prints each category as µs per handshake; perf samples only the middle of
the run, so those are the shares applied to the measured CPU, not sample counts.
"""
import re
import sys

# (category, test on the stack's symbols, leaf first). The first rule that matches wins.
def has(*subs):
    return lambda syms: any(any(s in f for s in subs) for f in syms)

def leaf_kernel(syms):
    return bool(syms) and syms[0].startswith("[k]")

RULES = [
    ("crypto: X25519 keygen + shared secret", has("crypto/ecdh.")),
    ("crypto: Ed25519 sign", has("crypto/ed25519.PrivateKey.Sign", "crypto/ed25519.Sign")),
    ("crypto: Ed25519 verify", has("crypto/ed25519.Verify")),
    ("runtime: GC (mark, sweep, assists)", has("runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.gcAssistAlloc",
                                                "runtime.bgsweep", "runtime.sweepone", "runtime.markroot",
                                                "runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination",
                                                "runtime.(*sweepLocked).sweep", "runtime.deductSweepCredit",
                                                "runtime.scavenge", "runtime.bgscavenge")),
    ("runtime: goroutine stack growth", has("runtime.newstack", "runtime.morestack", "runtime.copystack")),
    ("kernel", leaf_kernel),
    ("TLS: session ticket", has("sendSessionTickets", "encryptTicket", "EncryptTicket", "sessionState).Bytes")),
    ("TLS: certificate parsing (x509)", has("crypto/x509.")),
    ("runtime: allocation", has("runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice")),
    ("TLS: key schedule, transcript, records, messages", has("crypto/tls.", "crypto/internal/fips140/sha256",
                                                              "crypto/internal/fips140/hkdf", "crypto/internal/fips140/hmac",
                                                              "crypto/internal/fips140/aes", "crypto/sha256")),
]

SYSCALL = re.compile(r"\[k\] (?:__x64_sys_|__do_sys_|__se_sys_|__sys_|do_sys_)(\w+)")

def kernel(syms):
    for f in syms:
        m = SYSCALL.match(f)
        if m:
            return "kernel: syscall " + m.group(1)
    if any("asm_exc_page_fault" in f for f in syms):
        return "kernel: page faults"
    if any("do_softirq" in f or "net_rx_action" in f for f in syms):
        return "kernel: softirq (network)"
    return "kernel: other (" + syms[0][4:] + ")"

def categorize(stack):
    syms = [s for s in stack]
    for name, rule in RULES:
        if rule(syms):
            return name if name != "kernel" else kernel(syms)
    if has("runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.goready", "runtime.netpoll",
           "runtime.gopark", "runtime.mcall", "runtime.ready", "runtime.wakep", "runtime.runqsteal")(syms):
        return "runtime: scheduler, netpoll"
    if has("runtime.(*timer)", "runtime.modtimer", "runtime.deltimer", "runtime.addtimer", "runtime.(*timers)")(syms):
        return "runtime: timers"
    if has("internal/poll.", "net.(*conn)", "net.(*netFD)", "net.(*sysDialer)", "net.(*TCPListener)", "net.(*Dialer)",
           "syscall.")(syms):
        return "net, poll (user side)"
    if has("linkkeysserver.", "linkkeysload.", "internal/engine.", "internal/admit.")(syms):
        return "loadproof code"
    return "other: " + (syms[0] if syms else "?")

def main():
    hs = int(sys.argv[1]) if len(sys.argv) > 2 else 0
    cpu_ns = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    totals, total = {}, 0.0
    stack, period = [], 0.0
    def flush():
        nonlocal total
        if period:
            c = categorize(stack)
            totals[c] = totals.get(c, 0.0) + period
            total += period
    for line in sys.stdin:
        if not line.strip():
            flush()
            stack, period = [], 0.0
            continue
        if not line.startswith(("\t", " ")) or re.match(r"^\S", line):
            f = line.split()
            period = float(f[-1]) if f and f[-1].isdigit() else 1.0
            continue
        parts = line.split(None, 1)
        if len(parts) == 2:
            sym = parts[1].strip()
            if parts[0].startswith("ffffffff"):
                sym = "[k] " + sym
            stack.append(sym)
    flush()
    if not total:
        print("no samples")
        return
    for c, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        share = v / total
        if share < 0.003:
            continue
        extra = "  %7.1f µs/hs" % (share * cpu_ns / hs / 1e3) if hs else ""
        print("  %5.1f%%  %s%s" % (100 * share, c, extra))
    crypto = sum(v for c, v in totals.items() if c.startswith("crypto:")) / total
    print("  crypto share of the samples: %.1f%%" % (100 * crypto))

if __name__ == "__main__":
    main()
