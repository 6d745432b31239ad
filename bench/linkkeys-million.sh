#!/usr/bin/env bash
# Held TLS connections as a staircase up to $TOP (default 1,000,000), client and server on this
# machine, with the cost of each held connection split between the server, the client and the kernel.
#
#   server:  one `server --processes $PROCS` on the scale profile (TCP_MAX_CONNECTIONS raised to
#            1.1 × $TOP), enough processes that each stays under the 20,000 open-file limit
#   clients: one `connections` run per step ("layer"), each from its own source range, holding until
#            the end; a layer is started when the previous one holds all it established
#   at every plateau, after the layer's ramp has settled:
#     server   RSS, anonymous and file-backed, summed over the server's processes (/proc/PID/status),
#              and its own accounting (METRICS: established, accepted, handshake failures, sheds)
#     client   the same over every client process (layer parents and their workers)
#     kernel   /proc/meminfo (Slab, SUnreclaim, SReclaimable, KernelStack, PageTables, MemAvailable),
#              /proc/net/sockstat (TCP sockets in use, TCP buffer pages) and the slab caches a socket
#              lives in (TCP, sock_inode_cache, filp, dentry, eventpoll_epi)
#   and the summary prints, per plateau, the cost per held connection from the start and between
#   plateaus (marginal), so a cost that grows with the count shows.
#
# A watchdog interrupts the clients if MemAvailable falls below $FLOOR_MB (default 600): the run then
# ends with what it held rather than letting the kernel's OOM killer pick a process.
#
# Usage: bench/linkkeys-million.sh                       the full staircase to 1,000,000 (~15 min)
#        TOP=200000 STEPS="10000 100000 200000" bench/linkkeys-million.sh
#        SMALL=1 bench/linkkeys-million.sh                a check of the script itself (30,000)
#        KEEP_TLS=1 ...                                   clients hold the whole TLS state (--keep-tls-state)
# Needs: go, python3, root for /proc/slabinfo (the slab figures are left out without it). Run it on an
# otherwise quiet machine with at least ~20 GiB available for the full staircase.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-million-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/linkkeys-loadtest"
go build -o "$BIN" ./cmd/linkkeys-loadtest
ulimit -n "$(ulimit -Hn)"

TOP=${TOP:-1000000}
STEPS=${STEPS:-"10000 100000 250000 500000 750000 1000000"}
# 1,000 attempts in flight, not the seed's 3,000: with the spread fill the server's 1,024 handshake
# slots are divided among its processes (18 each at 56), and a deeper queue only waits out the
# server's 5 s handshake timeout on a CPU-bound machine (measured: 0.4 % of the attempts timed out at
# 3,000; 2026-12-03, before the sequential fill became the default, which gives the one process
# filling all 1,024 slots). With the sequential fill, 1,000 in flight held all 1,000,000 with no
# timeout (2026-12-05, docs/load-testing.md).
CONC=${CONC:-1000}
SETTLE=${SETTLE:-15}
FLOOR_MB=${FLOOR_MB:-600}
if [ "${SMALL:-}" = 1 ]; then TOP=30000 STEPS="5000 15000 30000" CONC=500 SETTLE=5; fi
NOFILE=$(ulimit -n)
PROCS=${PROCS:-$(( (TOP * 21 / 20) / (NOFILE - 1000) + 1 ))}
KEEP=()
[ "${KEEP_TLS:-}" = 1 ] && KEEP=(--keep-tls-state)

echo "== results in $OUT; top $TOP, steps $STEPS, $PROCS server processes, clients ${KEEP[*]:-socket-only}"
"$BIN" connections --help >/dev/null # the binary runs
python3 - <<'PY' >"$OUT/machine.txt"
import os, platform
mem = {l.split(':')[0]: l.split()[1] for l in open('/proc/meminfo')}
cpu = [l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')]
def sysctl(p):
    try: return open('/proc/sys/' + p.replace('.', '/')).read().split()
    except OSError: return ['?']
print("machine: %s, %d cores, %.1f GiB, kernel %s, nofile %s, fs.file-max %s, somaxconn %s, ports %s, tcp_mem %s" % (
    cpu[0] if cpu else '?', os.cpu_count(), int(mem['MemTotal']) / 2**20, platform.release(), os.popen('ulimit -n').read().strip(),
    sysctl('fs.file-max')[0], sysctl('net.core.somaxconn')[0], '-'.join(sysctl('net.ipv4.ip_local_port_range')), '/'.join(sysctl('net.ipv4.tcp_mem'))))
PY
cat "$OUT/machine.txt"

# The scale profile with room for $TOP: the distinct-source threshold (10,000 per window by default)
# is divided among the server processes like every budget, and 56 processes would leave each fewer
# distinct sources than the layers use, so it is raised with the rest.
SCALE_ENV=(TCP_MAX_CONNECTIONS=$((TOP * 11 / 10)) TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=60000000 TCP_HANDSHAKE_BURST=10000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=1000000 TCP_HANDSHAKE_GLOBAL_BURST=2000000
  TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD=1000000)
CLEAN_ENV=()
for v in $(env | sed -n 's/^\(TCP_[A-Z_]*\|PUBLIC_READ_[A-Z_]*\)=.*/\1/p'); do CLEAN_ENV+=(-u "$v"); done

# The loopback device queues received packets per CPU up to net.core.netdev_max_backlog (1,000 by
# default) and drops the rest (/proc/net/softnet_stat). A saturated 2-core machine ramping to a
# million connections overflows it, and every drop is a retransmission later. Raise it for the run
# (BACKLOG=keep leaves it alone); the drops are counted at every plateau either way.
OLD_BACKLOG=$(cat /proc/sys/net/core/netdev_max_backlog)
if [ "${BACKLOG:-65536}" != keep ] && [ "$OLD_BACKLOG" -lt "${BACKLOG:-65536}" ]; then
  if echo "${BACKLOG:-65536}" >/proc/sys/net/core/netdev_max_backlog 2>/dev/null; then
    echo "== net.core.netdev_max_backlog $OLD_BACKLOG -> ${BACKLOG:-65536} for the run"
  else
    echo "== net.core.netdev_max_backlog stays $OLD_BACKLOG (not writable here)"
  fi
fi
restore_backlog() { echo "$OLD_BACKLOG" >/proc/sys/net/core/netdev_max_backlog 2>/dev/null || true; }

SERVER_PID="" CLIENT_PIDS=() WATCHDOG_PID=""
cleanup() {
  [ -n "$WATCHDOG_PID" ] && kill "$WATCHDOG_PID" 2>/dev/null || true
  for p in "${CLIENT_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${CLIENT_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  restore_backlog
}
trap cleanup EXIT

env "${CLEAN_ENV[@]}" "${SCALE_ENV[@]}" "$BIN" server --info-file "$OUT/info.json" --db-path "$OUT/server.sqlite3" \
  --metrics-interval-secs 2 --processes "$PROCS" >"$OUT/server.log" 2>"$OUT/server.err" &
SERVER_PID=$!
for _ in $(seq 1 600); do
  [ -s "$OUT/info.json" ] && grep -q '^METRICS ' "$OUT/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server.err" >&2; exit 1; }
  sleep 0.1
done

# The watchdog: interrupt every client when memory runs short.
(
  while sleep 1; do
    avail=$(awk '/^MemAvailable:/ {print int($2/1024)}' /proc/meminfo)
    if [ "$avail" -lt "$FLOOR_MB" ]; then
      echo "WATCHDOG: MemAvailable ${avail} MiB < ${FLOOR_MB} MiB at $(date -u +%T); interrupting the clients" | tee -a "$OUT/watchdog.txt" >&2
      pkill -INT -f "^$BIN connections" || true
      break
    fi
  done
) &
WATCHDOG_PID=$!

# sample LABEL: one line of JSON with the server, client and kernel figures.
sample() {
  python3 - "$1" "$SERVER_PID" "$OUT" "$BIN" <<'PY' >>"$OUT/samples.jsonl"
import json, os, sys, time
label, spid, out, binpath = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def children(pid):
    # A Go process forks from any of its threads, and each thread lists only its own children.
    kids = []
    try:
        for tid in os.listdir('/proc/%d/task' % pid):
            try: kids += [int(x) for x in open('/proc/%d/task/%s/children' % (pid, tid)).read().split()]
            except OSError: pass
    except OSError: return []
    return kids + [g for k in kids for g in children(k)]
def status(pid):
    d = {}
    try:
        for l in open('/proc/%d/status' % pid):
            k, _, v = l.partition(':')
            if k in ('VmRSS', 'RssAnon', 'RssFile', 'RssShmem'): d[k] = int(v.split()[0]) * 1024
    except OSError: pass
    return d
def total(pids):
    t = {'procs': 0, 'VmRSS': 0, 'RssAnon': 0, 'RssFile': 0}
    for p in pids:
        s = status(p)
        if s:
            t['procs'] += 1
            for k in ('VmRSS', 'RssAnon', 'RssFile'): t[k] += s.get(k, 0)
    return t
server_pids = [spid] + children(spid)
client_pids = []
for d in os.listdir('/proc'):
    if not d.isdigit(): continue
    try: cmd = open('/proc/%s/cmdline' % d, 'rb').read().split(b'\0')
    except OSError: continue
    if cmd and cmd[0] == binpath.encode() and len(cmd) > 1 and cmd[1] in (b'connections', b'worker'):
        client_pids.append(int(d))
mem = {l.split(':')[0]: int(l.split()[1]) * 1024 for l in open('/proc/meminfo')}
sock = {}
for l in open('/proc/net/sockstat'):
    k, _, rest = l.partition(':')
    f = rest.split()
    sock[k] = {f[i]: int(f[i + 1]) for i in range(0, len(f) - 1, 2)}
slabs = {}
try:
    for l in open('/proc/slabinfo'):
        f = l.split()
        if f[0] in ('TCP', 'sock_inode_cache', 'filp', 'dentry', 'eventpoll_epi', 'eventpoll_pwq', 'skbuff_head_cache', 'tcp_bind_bucket', 'tcp_bind2_bucket'):
            slabs[f[0]] = {'objects': int(f[2]), 'size': int(f[3])}
except OSError: pass
drops = sum(int(l.split()[1], 16) for l in open('/proc/net/softnet_stat'))
def snmp(path):
    d, lines = {}, open(path).read().splitlines()
    for h, v in zip(lines[0::2], lines[1::2]):
        p = h.split(':')[0]
        for k, x in zip(h.split()[1:], v.split()[1:]):
            d[p + '.' + k] = int(x)
    return d
net = {**snmp('/proc/net/snmp'), **snmp('/proc/net/netstat')}
net = {k: net.get(k, 0) for k in ('Tcp.RetransSegs', 'Tcp.EstabResets', 'TcpExt.TCPAbortOnTimeout', 'TcpExt.ListenOverflows', 'TcpExt.TCPSynRetrans')}
net['softnet_dropped'] = drops
m = None
for l in open(os.path.join(out, 'server.log')):
    if l.startswith('METRICS '): m = l
m = json.loads(m[len('METRICS '):]) if m else {}
keys = ('established_connections', 'open_connections', 'accepted_connections', 'established_total', 'handshake_timeouts',
        'handshake_rejections', 'shed_connection_limit', 'shed_handshake_per_source', 'shed_handshake_overflow',
        'shed_handshake_global', 'frame_buffer_bytes', 'process_rss_bytes')
print(json.dumps({'label': label, 'time': time.time(), 'server': total(server_pids), 'client': total(client_pids),
    'meminfo': {k: mem[k] for k in ('MemAvailable', 'Slab', 'SReclaimable', 'SUnreclaim', 'KernelStack', 'PageTables', 'AnonPages')},
    'sockstat': sock.get('TCP', {}), 'slabs': slabs, 'net': net, 'metrics': {k: m.get(k) for k in keys}}))
PY
}

# run_layer N: start layer $layer's connections run of N from its own source range, wait until it
# holds everything it established, let it settle. Fails when the layer ended early or the watchdog
# fired (the staircase then stops where it is).
run_layer() {
  "$BIN" connections --info-file "$OUT/info.json" --count "$1" --concurrency "$CONC" --hold-secs 86400 \
    --attempt-timeout-secs 30 --client-ip-base "127.$((layer * 8)).0.0" --client-ip-count 256 --progress-every 50000 \
    "${KEEP[@]}" --json "$OUT/layer$layer.json" >"$OUT/layer$layer.txt" 2>"$OUT/layer$layer.err" &
  CLIENT_PIDS+=($!)
  local t0
  t0=$(date +%s)
  until grep -q 'holding' "$OUT/layer$layer.err" 2>/dev/null; do
    if ! kill -0 "${CLIENT_PIDS[-1]}" 2>/dev/null; then echo "layer $layer ended early:"; tail -5 "$OUT/layer$layer.err" "$OUT/layer$layer.txt"; return 1; fi
    [ -s "$OUT/watchdog.txt" ] && return 1
    sleep 1
  done
  echo "   held after $(( $(date +%s) - t0 )) s; settling ${SETTLE} s"
  sleep "$SETTLE"
}

sleep 6
sample "0"
prev=0 layer=0
for step in $STEPS; do
  n=$((step - prev))
  layer=$((layer + 1))
  echo "== layer $layer: $n more connections (to $step) from 127.$((layer * 8)).0.0"
  run_layer "$n" || break
  sample "$step"
  prev=$step
done

# Top up: attempts that failed (server handshake timeouts on a saturated machine) leave the top
# plateau short of $TOP; one more layer makes up the difference, so the count held is the count
# asked for. Its attempts are counted like every other layer's.
held_now=$(python3 -c "import json; print(json.loads([l for l in open('$OUT/server.log') if l.startswith('METRICS ')][-1][8:])['established_connections'])")
if [ "$prev" = "$TOP" ] && [ ! -s "$OUT/watchdog.txt" ] && [ "$held_now" -lt "$TOP" ]; then
  n=$((TOP - held_now))
  layer=$((layer + 1))
  echo "== layer $layer (top-up): $n more connections (to $TOP) from 127.$((layer * 8)).0.0"
  run_layer "$n" && sample "$TOP+"
fi

echo "== interrupting the layers one at a time, newest first (each closes what it holds and writes its result)"
for ((i = ${#CLIENT_PIDS[@]} - 1; i >= 0; i--)); do
  kill -INT "${CLIENT_PIDS[$i]}" 2>/dev/null || true
  wait "${CLIENT_PIDS[$i]}" 2>/dev/null || true
done
CLIENT_PIDS=()
sleep 4
sample "closed"

python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys, glob
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, 'samples.jsonl'))]
print(open(os.path.join(out, 'machine.txt')).read().strip())
KiB = 1024.0
def kern(r):
    m = r['meminfo']
    return {'slab': m['Slab'], 'sunreclaim': m['SUnreclaim'], 'sreclaimable': m['SReclaimable'], 'stack': m['KernelStack'],
            'pagetables': m['PageTables'], 'tcpmem': r['sockstat'].get('mem', 0) * 4096}
base = rows[0]
print("%9s %9s %7s | %-27s | %-27s | %-33s | %6s %6s | %s" % ("held", "server", "avail", "server KiB/conn (anon file)", "client KiB/conn (anon file)",
      "kernel KiB/conn (slab unrecl tcp)", "+srv", "+cli", "server accounting"))
prev = base
for r in rows[1:]:
    if r['label'] == 'closed': continue
    est = r['metrics'].get('established_connections') or 0
    held = int(r['label'].rstrip('+'))
    def per(a, b, n):
        return (a - b) / KiB / max(n, 1)
    s, c, k, bk = r['server'], r['client'], kern(r), kern(base)
    ps, pc, pk = prev['server'], prev['client'], kern(prev)
    dn = est - (prev['metrics'].get('established_connections') or 0)
    print("%9d %9d %5.1fG | %6.2f (%5.2f %5.2f)       | %6.2f (%5.2f %5.2f)       | %6.2f (%5.2f %5.2f %5.2f)        | %6.2f %6.2f | accepted %s, estab_total %s, timeouts %s, rejections %s, shed %s" % (
        held, est, r['meminfo']['MemAvailable'] / 2**30,
        per(s['VmRSS'], base['server']['VmRSS'], est), per(s['RssAnon'], base['server']['RssAnon'], est), per(s['RssFile'], base['server']['RssFile'], est),
        per(c['VmRSS'], 0, est), per(c['RssAnon'], 0, est), per(c['RssFile'], 0, est),
        per(k['slab'] + k['stack'] + k['pagetables'] + k['tcpmem'], bk['slab'] + bk['stack'] + bk['pagetables'] + bk['tcpmem'], est),
        per(k['slab'], bk['slab'], est), per(k['sunreclaim'], bk['sunreclaim'], est), per(k['tcpmem'], bk['tcpmem'], est),
        per(s['VmRSS'], ps['VmRSS'], dn), per(c['VmRSS'], pc['VmRSS'], dn),
        r['metrics'].get('accepted_connections'), r['metrics'].get('established_total'), r['metrics'].get('handshake_timeouts'),
        r['metrics'].get('handshake_rejections'),
        sum((r['metrics'].get(x) or 0) for x in ('shed_connection_limit', 'shed_handshake_per_source', 'shed_handshake_overflow', 'shed_handshake_global'))))
    prev = r
print("network counters since the start (loopback backlog drops, retransmissions, resets, aborts):")
for r in rows[1:]:
    print("   %-8s %s" % (r['label'], ", ".join("%s %d" % (k, r['net'][k] - base['net'][k]) for k in sorted(r['net']))))
top = [r for r in rows if r['label'] not in ('0', 'closed')]
if top:
    t = top[-1]
    print("top plateau: %d established (server METRICS), sockets in use (TCP, both ends) %d, TCP buffer pages %d; slab objects per held connection:" % (
        t['metrics'].get('established_connections') or 0, t['sockstat'].get('inuse', 0), t['sockstat'].get('mem', 0)))
    est = max(t['metrics'].get('established_connections') or 1, 1)
    print("   " + ", ".join("%s %.2f × %d B" % (k, (v['objects'] - base['slabs'].get(k, {'objects': 0})['objects']) / est, v['size'])
                          for k, v in sorted(t['slabs'].items())))
held = still = 0
for f in sorted(glob.glob(os.path.join(out, 'layer*.json'))):
    try: j = json.load(open(f))
    except Exception as e:
        print("%s: unreadable (%s)" % (os.path.basename(f), e)); continue
    a, h = j.get('attempts', {}), j.get('hold') or {}
    held += h.get('held', 0)
    still += h.get('still_open_at_end', 0)
    print("%s: %d attempted, %d established, %d failed %s; ramp %s, held %d, still open at the end %s; client CPU per attempt %.0f µs" % (
        os.path.basename(f), a.get('attempted', 0), a.get('succeeded', 0), a.get('failed', 0), a.get('failure_reasons', {}),
        (h.get('ramp_time') or {}).get('text'), h.get('held', 0), h.get('still_open_at_end'),
        (j.get('client_cpu') or {}).get('ns', 0) / 1e3 / max(a.get('attempted', 1), 1)))
# A handshake the client completed can still time out on the server (its 5 s handshake timeout
# covers the wait for a handshake slot, and the server may not have read the client's Finished in
# time on a saturated machine): the server closes it, and the client's socket leaves ESTABLISHED.
# So the server's count is compared with the client sockets still established at the end.
srv = top[-1]['metrics'].get('established_connections') if top else None
print("clients: %d handshakes completed and held, %d of them still established (TCP state) at the end of the hold; "
      "server: %s established at the top plateau; accounting %s" % (held, still, srv, "exact" if srv == still else "MISMATCH"))
PY
