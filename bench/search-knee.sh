#!/usr/bin/env bash
# The knee of the Keycast reference server on one core for sign_event (docs/benchmarks.md, Knee
# search): `loadproof search --vary rate` against `keycast server` with KEYCAST_CPU_SLOTS=1 pinned to
# core 1 (GOMAXPROCS=1), the load generator pinned to core 0, repeated REPS times. Prints each
# search's knee, bracket, confidence, trials and minutes, then whether the knees agree within the
# bracket each search states.
#   bench/search-knee.sh                        3 searches, 3 trials a step, 2 s trials
#   REPS=1 TRIALS=1 DUR=1 bench/search-knee.sh  a quick check of the script
# Shortened for a figure run of minutes: 2 s trials (--duration 2, --ramp-up 0), 3 trials a step,
# --resolution 5%, the SLO p99<50ms,errors<1%,shed<1%,throughput>95%.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go taskset
build_benchsum
REPS=${REPS:-3} TRIALS=${TRIALS:-3} DUR=${DUR:-2} FROM=${FROM:-250} TO=${TO:-32000} RES=${RES:-5%}
SLO=${SLO:-'p99<50ms,errors<1%,shed<1%,throughput>95%'}
OUT=${OUT:-${TMPDIR:-/tmp}/search-knee-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/loadproof"
go build -o "$BIN" ./cmd/loadproof
"$BIN" machine >"$OUT/machine.txt" 2>&1 || true
PORT=${PORT:-$((20000 + RANDOM % 20000))}
URL="http://127.0.0.1:$PORT"
env KEYCAST_CPU_SLOTS=1 GOMAXPROCS=1 taskset -c 1 "$BIN" keycast server --addr "127.0.0.1:$PORT" --data-dir "$OUT/data" \
  >"$OUT/server.log" 2>"$OUT/server.err" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q 'listening on' "$OUT/server.log" && break; sleep 0.1; done
"$BIN" keycast setup --url "$URL" --users 50 -c 4 -o "$OUT/users.json" >"$OUT/setup.log" 2>&1
for i in $(seq "$REPS"); do
  t0=$(date +%s.%N)
  taskset -c 0 "$BIN" search --vary rate --from "$FROM" --to "$TO" --trials "$TRIALS" --resolution "$RES" --slo "$SLO" -o "$OUT/search$i.json" \
    -- keycast run --url "$URL" --users-file "$OUT/users.json" -d "$DUR" --ramp-up 0 -m sign-event -c 512 \
    >"$OUT/search$i.txt" 2>"$OUT/search$i.err" || echo "search $i exit $?"
  t1=$(date +%s.%N)
  echo "$t0 $t1" >"$OUT/search$i.time"
  "$BIN" verify "$OUT/search$i-bundle" >"$OUT/verify$i.txt" 2>&1 || echo "verify $i exit $?"
done
benchsum search-knee "$OUT" "$REPS"
echo "results in $OUT"
