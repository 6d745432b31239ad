#!/usr/bin/env bash
# The 200,000-connection LinkKeys run two ways (docs/benchmarks.md, Distributed runs): today's local
# fan-out (`linkkeys connections --workers 11`) and the same run through `loadproof coordinate
# --workers 11` (embedded NATS, 11 local worker processes), against one multi-process reference
# server with the scale profile. Prints each run's wall time, ramp time and counts, and the ratio.
#   bench/distributed-fanout.sh                 200,000 connections, hold 20 s
#   COUNT=20000 HOLD=3 bench/distributed-fanout.sh   a quick check of the script
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
COUNT=${COUNT:-200000} HOLD=${HOLD:-20} WORKERS=${WORKERS:-11} PROCS=${PROCS:-12}
OUT=${OUT:-${TMPDIR:-/tmp}/distributed-fanout-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/loadproof"
go build -o "$BIN" ./cmd/loadproof
ulimit -n "$(ulimit -Hn)"
"$BIN" machine
env TCP_MAX_CONNECTIONS=$((COUNT + 20000)) TCP_HANDSHAKE_CONCURRENCY=1024 TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 \
  TCP_HANDSHAKE_BURST=1000000 TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=400000 \
  "$BIN" linkkeys server --info-file "$OUT/info.json" --db-path "$OUT/s.sqlite3" --metrics-interval-secs 2 \
  --processes "$PROCS" >"$OUT/server.log" 2>"$OUT/server.err" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 200); do [ -s "$OUT/info.json" ] && grep -q '^METRICS ' "$OUT/server.log" && break; sleep 0.1; done
ARGS=(linkkeys connections --info-file "$OUT/info.json" --count "$COUNT" --concurrency 3000 --hold-secs "$HOLD"
  --attempt-timeout-secs 20 --client-ip-base 127.0.1.0 --client-ip-count 64)
run() { # run NAME CMD...: time one run
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err"
  t1=$(date +%s.%N)
  jq -r --arg name "$name" --arg wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')" \
    '"\($name): wall \($wall) s  attempted \(.attempts.attempted)  succeeded \(.attempts.succeeded)  held \(.hold.held)  ramp \(.hold.ramp_time.text)"' \
    "$OUT/$name.json"
}
run fanout "$BIN" "${ARGS[@]}" --workers "$WORKERS"
sleep 5
run coordinate "$BIN" coordinate --workers "$WORKERS" -- "${ARGS[@]}"
echo "results in $OUT"
