#!/usr/bin/env bash
# Before/after A/B of the Keycast reference server's /api/nostr: server CPU microseconds per
# request of `keycast-loadtest server` built at two revisions (BEFORE, AFTER), under the same wrk
# load (bench/keycast-rpc.lua), interleaved round by round with the bare signing bound
# (BenchmarkSchnorrSign) measured on the same core in the same round, so the machine's noise hits
# both builds and the bound alike. This is how a change to the server's request path is kept or
# dropped: it must lower the server CPU per request next to the build before it.
#
# Usage: bench/keycast-server-ab.sh BEFORE_REV [AFTER_REV] [rounds] [duration_seconds] [connections] [method]
#   defaults: AFTER_REV = the working tree, 5 rounds, 8 s, 50 connections, sign_event.
#   method: get_public_key | sign_event | nip44_encrypt (bench/keycast-rpc.lua's KC_METHOD).
#   PIPELINE=N (environment, default 1): wrk writes N requests back to back on each connection
#   before reading their answers (HTTP/1.1 pipelining, bench/keycast-rpc.lua's KC_PIPELINE).
# Layout as bench/keycast-server-rpc.sh "pinned": the server on core 1 (GOMAXPROCS=1), wrk on core
# 0 (1 thread). Server CPU is user+system time from /proc/<pid>/stat around each run.
#
# Output: the machine record, one line per measurement (with perf: the server's reads and writes
# per request), then per build the median server CPU-µs per request and the share of the signing
# bound it reaches (CPU per bare signature ÷ server CPU
# per request), and the per-round after/before ratios of server CPU per request.
set -euo pipefail

BEFORE=${1:?usage: bench/keycast-server-ab.sh BEFORE_REV [AFTER_REV] [rounds] [duration] [connections] [method]}
AFTER=${2:-}
ROUNDS=${3:-5}
DUR=${4:-8}
CONN=${5:-50}
METHOD=${6:-sign_event}
PIPELINE=${PIPELINE:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go git taskset curl jq wrk

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
# The bound's test binary, built once so no compiler runs between measurements.
go test -c -o "$WORK/bound.test" ./internal/keycastserver/

echo "== machine"
go run ./cmd/loadproof machine --settings KEYCAST_,HANDLER_CACHE_SIZE,GOMAXPROCS
echo "== before $(git rev-parse --short "$BEFORE"), after ${AFTER:-working tree at $(git rev-parse --short HEAD)}; method $METHOD, $CONN connections, ${DUR}s"
echo "== wrk $(wrk --version 2>&1 | head -1), $PIPELINE request(s) per write"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

PORT=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$PORT"

start_server() { # start_server BIN
  rm -rf "$WORK/data"
  GOMAXPROCS=1 KEYCAST_BCRYPT_COST=4 PORT=$PORT taskset -c 1 "$WORK/$1" server --data-dir "$WORK/data" \
    >"$WORK/server.out" 2>"$WORK/server.err" &
  SERVER_PID=$!
  keycast_ready "$URL" "$WORK/server.err"
  "$WORK/$1" setup --url "$URL" --users 1 --concurrency 1 --output "$WORK/users.json" >/dev/null 2>"$WORK/setup.err" \
    || { cat "$WORK/setup.err" >&2; exit 1; }
  TOKEN=$(jq -r '.users[0].ucan_token' "$WORK/users.json")
  PUBKEY=$(jq -r '.users[0].pubkey' "$WORK/users.json")
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

measure() { # measure BIN -> "requests rps cpu_us_per_req non2xx"
  local out t0 t1 reqs rps non2xx
  start_server "$1"
  KC_TOKEN=$TOKEN KC_METHOD=$METHOD KC_PUBKEY=$PUBKEY KC_PEER=$PUBKEY KC_PIPELINE=$PIPELINE \
    taskset -c 0 wrk -t1 -c1 -d1s -s bench/keycast-rpc.lua "$URL" >/dev/null
  local perf_pid=""
  if [ "$HAVE_PERF" = 1 ]; then
    perf stat -x, -e syscalls:sys_enter_read,syscalls:sys_enter_write -p "$SERVER_PID" -o "$WORK/perf.txt" \
      -- sleep "$DUR" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  t0=$(server_cpu_ticks)
  out=$(KC_TOKEN=$TOKEN KC_METHOD=$METHOD KC_PUBKEY=$PUBKEY KC_PEER=$PUBKEY KC_PIPELINE=$PIPELINE \
    taskset -c 0 wrk -t1 -c"$CONN" -d"${DUR}s" -s bench/keycast-rpc.lua "$URL")
  t1=$(server_cpu_ticks)
  local sys="- -"
  if [ -n "$perf_pid" ]; then
    wait "$perf_pid" || true
    sys=$(awk -F, '/sys_enter_read/ {r = $1} /sys_enter_write/ {w = $1} END {print r + 0, w + 0}' "$WORK/perf.txt")
  fi
  stop_server
  reqs=$(printf '%s\n' "$out" | sed -n 's/.* requests=\([0-9]*\) .*/\1/p')
  rps=$(printf '%s\n' "$out" | sed -n 's/.* rps=\([0-9]*\) .*/\1/p')
  non2xx=$(printf '%s\n' "$out" | sed -n 's/.* non2xx=\([0-9]*\) .*/\1/p')
  set -- $sys
  local per="- -"
  [ "$1" != - ] && per=$(awk -v r="$1" -v w="$2" -v n="$reqs" 'BEGIN {printf "%.2f %.2f", r / n, w / n}')
  echo "$reqs $rps $(cpu_us_per_op "$t0" "$t1" "$reqs") ${non2xx:-0} $per"
}
bound() { # CPU-µs per bare signature on core 1
  taskset -c 1 "$WORK/bound.test" -test.run XXX -test.bench '^BenchmarkSchnorrSign$' -test.benchtime 2s -test.cpu 1 |
    awk '/^BenchmarkSchnorrSign/ {printf "%.2f", $5 / 1000}'
}

# With perf (and tracepoints readable), the server's read(2) and write(2) calls are counted over
# the run: system calls per request do not depend on the machine's noise. They are counted over
# the wrk run's duration and divided by all its requests, so they read slightly low.
HAVE_PERF=0
if command -v perf >/dev/null && perf stat -e syscalls:sys_enter_read -- true >/dev/null 2>&1; then HAVE_PERF=1; fi
echo "== round binary requests rps server_cpu_us_per_req non2xx reads_per_req writes_per_req | bound_cpu_us pct_of_bound"
: >"$WORK/all.txt"
for round in $(seq 1 "$ROUNDS"); do
  order="before after"
  [ $((round % 2)) = 0 ] && order="after before"
  declare -A line=()
  for bin in $order; do line[$bin]=$(measure "$bin"); done
  b=$(bound)
  for bin in before after; do
    set -- ${line[$bin]}
    [ "$4" != 0 ] && echo "WARNING: $4 non-2xx answers ($bin, round $round)" >&2
    echo "$round $bin $1 $2 $3 $4 $5 $6 | $b $(awk -v b="$b" -v c="$3" 'BEGIN {printf "%.1f", 100 * b / c}')" | tee -a "$WORK/all.txt"
  done
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for bin in before after; do
  echo "== $bin: median server CPU-us/req $(awk -v b="$bin" '$2 == b {print $5}' "$WORK/all.txt" | median), median % of bound $(awk -v b="$bin" '$2 == b {print $11}' "$WORK/all.txt" | median), median reads/req $(awk -v b="$bin" '$2 == b {print $7}' "$WORK/all.txt" | median)"
done
echo "per-round after/before server CPU per request: $(awk '$2 == "before" {b[$1] = $5} $2 == "after" {a[$1] = $5} END {for (r = 1; r in a; r++) if (b[r] > 0) printf "%.3f ", a[r] / b[r]; print ""}' "$WORK/all.txt")"
