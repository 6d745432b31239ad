#!/usr/bin/env bash
# The 200,000-connection ramp against the isolated handshake rate, measured in the same run.
#
#   1. isolated: a fresh one-process scale-profile server, `handshake-bench --duration-secs 15
#      --concurrency 256` (full handshakes, connect + handshake + close, nothing held)
#   2. ramp: a fresh `server --processes $PROCS` (scale profile), `connections --count 200000
#      --concurrency 3000 --hold-secs 5`, its ramp time from the result file
#   3. isolated again, as in 1
#   and the ratio: (200,000 / ramp seconds) / the mean of the two isolated rates; the summary warns
#   when those two differ by more than 10 % (the machine's speed changed during the run).
#
# VARIANTS lists the settings to compare, each a word: "default" runs the binary as built,
# "gomaxprocs=N" sets GOMAXPROCS=N in the environment of the server and the client (and so of
# every server child and client worker), "servergogc=N" sets GOGC=N for the server alone (which
# turns its GC pacer off: a heap goal about 4 MiB above its live heap at rest while a process's live heap is under 64 MiB), "sequential" runs
# the ramp's server with --process-fill sequential and its client with --workers-in-turn (one
# process at a time on each side; what "default" does too since both became the defaults, the
# server's through --process-fill auto), "seqserver" and "seqclient" one of the two alone (the other side spread), "spread"
# the ramp's server with --process-fill spread and its client with --workers-in-turn=false (every
# process busy at once on each side: the defaults before 2026-12-05),
# "norelease" runs the ramp's server with --release-idle-memory=false (no release of freed memory
# when a process goes quiet, and no GC pacer), "hsconc=N" sets the server's TCP_HANDSHAKE_CONCURRENCY (TLS handshakes running at once, per
# process) to N instead of the scale profile's 1024,
# "clientgogc=N" sets GOGC=N for the client alone (its handshake-bench and connections runs,
# replacing the client's own pacing), "madvfree" sets GODEBUG=madvdontneed=0 on both sides (the runtime returns freed pages with
# MADV_FREE instead of MADV_DONTNEED, so a page reused before the kernel reclaims it costs no fault),
# "old" runs the binary $OLD_BIN (say, a build of the tree before a change) on both sides, so a
# change is compared with what it replaces in the same run,
# "thp=MODE" sets /sys/kernel/mm/transparent_hugepage/enabled to MODE (always, madvise, never) for
# that variant's steps (restored afterwards): with "always" the Go heap is backed by 2 MiB pages where
# it can be (Go asks for none under the usual "madvise"), "backlog=N" sets net.core.netdev_max_backlog to N for
# that variant's steps (restored afterwards). Loopback packets dropped at that backlog
# (/proc/net/softnet_stat) are counted during each ramp and printed. Each variant runs both steps; ROUNDS repeats the lot, the
# variants interleaved, so a noisy machine hits them alike.
#
# Usage: bench/linkkeys-ramp.sh                               default only, one round (~3.5 min)
#        VARIANTS="default gomaxprocs=2" ROUNDS=2 bench/linkkeys-ramp.sh
#        VARIANTS="default spread" ROUNDS=2 bench/linkkeys-ramp.sh   one process at a time against spread
#        OLD_BIN=/tmp/old/linkkeys-loadtest VARIANTS="old default" ROUNDS=2 bench/linkkeys-ramp.sh
#        COUNT=50000 bench/linkkeys-ramp.sh                   a smaller ramp
#        COUNT=15000 PROCS=1 CLIENT_ARGS="--workers 11" bench/linkkeys-ramp.sh   extra flags for connections
# Needs: go, python3. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-ramp-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/linkkeys-loadtest"
go build -o "$BIN" ./cmd/linkkeys-loadtest
ulimit -n "$(ulimit -Hn)"

COUNT=${COUNT:-200000} PROCS=${PROCS:-12} ROUNDS=${ROUNDS:-1} VARIANTS=${VARIANTS:-default} HS_SECS=${HS_SECS:-15}
SCALE_ENV=(TCP_MAX_CONNECTIONS=$((COUNT * 11 / 10)) TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000)
CLEAN_ENV=(-u GOMAXPROCS -u GOGC)
. "$ROOT/bench/lib.sh"
unset_server_env

OLD_BACKLOG=$(cat /proc/sys/net/core/netdev_max_backlog)
THP=/sys/kernel/mm/transparent_hugepage/enabled
OLD_THP=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP" 2>/dev/null || true)
restore() {
  echo "$OLD_BACKLOG" >/proc/sys/net/core/netdev_max_backlog 2>/dev/null || true
  [ -z "$OLD_THP" ] || echo "$OLD_THP" >"$THP" 2>/dev/null || true
}
trap 'stop_server; restore' EXIT
drops() { awk '{ s += strtonum("0x" $2) } END { print s }' /proc/net/softnet_stat; }
start_server() { # start_server NAME VARENV... -- FLAGS...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "${SCALE_ENV[@]}" "${envs[@]}" "$RUNBIN" server --info-file "$OUT/$name-info.json" \
    --db-path "$OUT/$name.sqlite3" --metrics-interval-secs 5 "$@" >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    [ -s "$OUT/$name-info.json" ] && grep -q '^METRICS ' "$OUT/$name-server.log" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name-server.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "server $name not ready" >&2; exit 1
}

python3 -c 'import os,platform; print("machine: %s, %d cores, kernel %s, load %s" % ([l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0], os.cpu_count(), platform.release(), open("/proc/loadavg").read().split()[:3]))' | tee "$OUT/machine.txt"
for round in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    venv=() senv=() cenv=() sflags=() cflags=() RUNBIN=$BIN
    restore
    case $v in
      default) ;;
      old) RUNBIN=${OLD_BIN:?the variant old needs OLD_BIN, the path of the old build} ;;
      gomaxprocs=*) venv=(GOMAXPROCS="${v#gomaxprocs=}") ;;
      servergogc=*) senv=(GOGC="${v#servergogc=}") ;;
      hsconc=*) senv=(TCP_HANDSHAKE_CONCURRENCY="${v#hsconc=}") ;;
      norelease) sflags=(--release-idle-memory=false) ;;
      madvfree) venv=(GODEBUG=madvdontneed=0) ;;
      clientgogc=*) cenv=(GOGC="${v#clientgogc=}") ;;
      sequential) sflags=(--process-fill sequential); cflags=(--workers-in-turn) ;;
      spread) sflags=(--process-fill spread); cflags=(--workers-in-turn=false) ;;
      seqserver) sflags=(--process-fill sequential); cflags=(--workers-in-turn=false) ;;
      seqclient) sflags=(--process-fill spread); cflags=(--workers-in-turn) ;;
      thp=*) echo "${v#thp=}" >"$THP" || { echo "cannot set $THP" >&2; exit 2; } ;;
      backlog=*) echo "${v#backlog=}" >/proc/sys/net/core/netdev_max_backlog || { echo "cannot set netdev_max_backlog" >&2; exit 2; } ;;
      *) echo "unknown variant $v" >&2; exit 2 ;;
    esac
    tag="r$round-$v"
    echo "== $tag: isolated handshake-bench"
    start_server "$tag-hs" "${venv[@]}" "${senv[@]}" --
    env "${CLEAN_ENV[@]}" "${venv[@]}" "${cenv[@]}" "$RUNBIN" handshake-bench --info-file "$OUT/$tag-hs-info.json" --duration-secs "$HS_SECS" \
      --concurrency 256 --client-ip-base 127.0.2.0 --client-ip-count 128 --json "$OUT/$tag-hs.json" >"$OUT/$tag-hs.txt"
    stop_server
    echo "== $tag: ramp to $COUNT against $PROCS server processes"
    start_server "$tag-ramp" "${venv[@]}" "${senv[@]}" -- --processes "$PROCS" "${sflags[@]}"
    d0=$(drops)
    env "${CLEAN_ENV[@]}" "${venv[@]}" "${cenv[@]}" "$RUNBIN" connections --info-file "$OUT/$tag-ramp-info.json" --count "$COUNT" --concurrency 3000 \
      --hold-secs 5 --attempt-timeout-secs 20 --client-ip-base 127.0.1.0 --client-ip-count 64 \
      --json "$OUT/$tag-ramp.json" "${cflags[@]}" ${CLIENT_ARGS:-} >"$OUT/$tag-ramp.txt" || true
    echo $(( $(drops) - d0 )) >"$OUT/$tag-ramp.drops"
    stop_server
    echo "== $tag: isolated handshake-bench again"
    start_server "$tag-hs2" "${venv[@]}" "${senv[@]}" --
    env "${CLEAN_ENV[@]}" "${venv[@]}" "${cenv[@]}" "$RUNBIN" handshake-bench --info-file "$OUT/$tag-hs2-info.json" --duration-secs "$HS_SECS" \
      --concurrency 256 --client-ip-base 127.0.2.0 --client-ip-count 128 --json "$OUT/$tag-hs2.json" >"$OUT/$tag-hs2.txt"
    stop_server
  done
done

python3 - "$OUT" "$COUNT" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys, glob, re
out, count = sys.argv[1], int(sys.argv[2])
def ok_of(tag):  # ramp connections per second of run tag
    r = json.load(open(os.path.join(out, tag + "-ramp.json")))
    return r["attempts"]["succeeded"] / (r["hold"]["ramp_time"]["ns"] / 1e9)
print("%-22s %19s %12s %8s %10s %22s %22s %10s" % ("run", "isolated/s (bef/aft)", "ramp/s", "ratio", "ramp", "hs CPU µs (cli+srv)", "ramp CPU µs (cli+srv)", "lo drops"))
warnings = []
for hs in sorted(glob.glob(os.path.join(out, "*-hs.json"))):
    tag = os.path.basename(hs)[:-len("-hs.json")]
    h = json.load(open(hs))
    try: r = json.load(open(os.path.join(out, tag + "-ramp.json")))
    except OSError: continue
    hb = h["handshakes"]
    before = hb["handshakes_per_sec"]
    try: after = json.load(open(os.path.join(out, tag + "-hs2.json")))["handshakes"]["handshakes_per_sec"]
    except OSError: after = before
    rate = (before + after) / 2  # the isolated rate: the mean of the readings before and after the ramp
    if abs(before - after) > 0.1 * min(before, after):
        warnings.append("%s: the isolated readings before and after the ramp differ by %.0f%% (%.1f and %.1f/s): "
                        "the machine's speed changed during the run; the ratio against either is %.1f%% or %.1f%%" % (
                            tag, 100 * abs(before - after) / min(before, after), before, after,
                            100 * ok_of(tag) / before, 100 * ok_of(tag) / after))
    ramp = r["hold"]["ramp_time"]["ns"] / 1e9
    ok = r["attempts"]["succeeded"]
    def cpu(j, n):
        c = (j.get("client_cpu") or {}).get("ns", 0) / 1e3 / max(n, 1)
        s = (j.get("server_cpu") or {}).get("ns", 0) / 1e3 / max(n, 1)
        return "%.0f + %.0f" % (c, s)
    try: drops = open(os.path.join(out, tag + "-ramp.drops")).read().strip()
    except OSError: drops = "?"
    print("%-22s %9.1f/%-9.1f %12.1f %7.1f%% %9.1fs %22s %22s %10s  (%d of %d established)" % (
        tag, before, after, ok / ramp, 100 * ok / ramp / rate, ramp, cpu(h, hb["completed"]), cpu(r, r["attempts"]["attempted"]), drops, ok, count))
print("ratio: ramp connections/s over the mean of the two isolated readings")
for w in warnings:
    print("WARNING: " + w)
PY
