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
# Needs: go, jq, root for /proc/slabinfo (the slab figures are left out without it). Run it on an
# otherwise quiet machine with at least ~20 GiB available for the full staircase.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-million-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/linkkeys-loadtest"
go build -o "$BIN" ./cmd/linkkeys-loadtest
build_benchsum
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
benchsum million-machine >"$OUT/machine.txt"
cat "$OUT/machine.txt"

# The scale profile with room for $TOP: the distinct-source threshold (10,000 per window by default)
# is divided among the server processes like every budget, and 56 processes would leave each fewer
# distinct sources than the layers use, so it is raised with the rest.
SCALE_ENV=(TCP_MAX_CONNECTIONS=$((TOP * 11 / 10)) TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=60000000 TCP_HANDSHAKE_BURST=10000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=1000000 TCP_HANDSHAKE_GLOBAL_BURST=2000000
  TCP_HANDSHAKE_DISTINCT_SOURCE_THRESHOLD=1000000)
CLEAN_ENV=()
unset_server_env

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
linkkeys_ready server "$OUT/info.json" "$OUT/server.log" "$OUT/server.err" 60

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
  benchsum million-sample "$1" "$SERVER_PID" "$OUT" "$BIN" >>"$OUT/samples.jsonl"
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
held_now=$(last_metrics "$OUT/server.log" | jq '.established_connections // 0')
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

benchsum million "$OUT" | tee "$OUT/summary.txt"
