#!/usr/bin/env bash
# Before/after A/B of the Keycast generator: requests per client CPU-second of `keycast-loadtest run`
# built at two revisions (BEFORE, AFTER), against one reference server, interleaved round by round
# so the machine's noise hits both alike. This is how a change to the run loop (the engine, interval
# snapshots) is shown to cost nothing measurable.
#
# Usage: bench/keycast-engine-ab.sh BEFORE_REV [AFTER_REV] [rounds] [duration_seconds] [connections]
#   defaults: AFTER_REV = the working tree, 5 rounds, 8 s, 50 connections, get-public-key warm-cache.
# Layout as bench/keycast-generator.sh: the server on core 1 (GOMAXPROCS=1), the client on core 0.
# AFTER_ARGS adds `run` flags to the after binary only: `AFTER_ARGS="--http-client std"
# bench/keycast-engine-ab.sh HEAD` compares the net/http client with the fast one at one revision.
set -euo pipefail

BEFORE=${1:?usage: bench/keycast-engine-ab.sh BEFORE_REV [AFTER_REV] [rounds] [duration] [connections]}
AFTER=${2:-}
ROUNDS=${3:-5}
DUR=${4:-8}
CONN=${5:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go git taskset curl jq

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  git worktree remove --force "$WORK/before-src" >/dev/null 2>&1 || true
  [ -n "$AFTER" ] && git worktree remove --force "$WORK/after-src" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

build_at() { # build_at REV OUT
  git worktree add -q --detach "$WORK/$2-src" "$1"
  (cd "$WORK/$2-src" && go build -buildvcs=false -o "$WORK/$2" ./cmd/keycast-loadtest)
}
build_at "$BEFORE" before
if [ -n "$AFTER" ]; then build_at "$AFTER" after; else go build -buildvcs=false -o "$WORK/after" ./cmd/keycast-loadtest; fi

echo "== machine"
go run ./cmd/loadproof machine --settings KEYCAST_,HANDLER_CACHE_SIZE,GOMAXPROCS
echo "== before $(git rev-parse --short "$BEFORE"), after ${AFTER:-working tree at $(git rev-parse --short HEAD)}${AFTER_ARGS:+ with $AFTER_ARGS}"

PORT=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$PORT"
GOMAXPROCS=1 KEYCAST_BCRYPT_COST=4 PORT=$PORT taskset -c 1 "$WORK/after" server --data-dir "$WORK/data" \
  >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS "$URL/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.err" >&2; exit 1; }
  sleep 0.1
done
"$WORK/after" setup --url "$URL" --users 4 --concurrency 2 --output "$WORK/users.json" >/dev/null 2>"$WORK/setup.err" \
  || { cat "$WORK/setup.err" >&2; exit 1; }

measure() { # measure BIN -> "requests cpu_seconds"
  local t="$WORK/time.$1" extra=()
  if [ "$1" = after ] && [ -n "${AFTER_ARGS:-}" ]; then read -r -a extra <<<"$AFTER_ARGS"; fi
  { TIMEFORMAT='%R %U %S'; time taskset -c 0 "$WORK/$1" run --url "$URL" --users-file "$WORK/users.json" \
      -c "$CONN" -d "$DUR" --ramp-up 0 -s warm-cache -m get-public-key -o "$WORK/$1.json" "${extra[@]}" >/dev/null 2>"$WORK/$1.err"; } 2>"$t"
  echo "$(jq -r '.summary.total_requests' "$WORK/$1.json") $(awk '{printf "%.3f", $2 + $3}' "$t")"
}
measure after >/dev/null # warm-up

echo "== round binary requests client_cpu_s req_per_client_cpu_s"
: >"$WORK/all.txt"
for round in $(seq 1 "$ROUNDS"); do
  for bin in before after; do
    set -- $(measure "$bin")
    echo "$round $bin $1 $2 $(awk -v r="$1" -v c="$2" 'BEGIN {printf "%.0f", (c > 0 ? r / c : 0)}')" | tee -a "$WORK/all.txt"
  done
done
median() { sort -n | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.0f", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
B=$(awk '$2 == "before" {print $5}' "$WORK/all.txt" | median)
A=$(awk '$2 == "after" {print $5}' "$WORK/all.txt" | median)
echo "== medians: before $B, after $A req/client-CPU-s; after/before $(awk -v a="$A" -v b="$B" 'BEGIN {printf "%.3f", a / b}')"
echo "per-round after/before: $(awk '$2 == "before" {b[$1] = $5} $2 == "after" {a[$1] = $5} END {for (r in a) if (b[r] > 0) printf "%.3f ", a[r] / b[r]; print ""}' "$WORK/all.txt")"
