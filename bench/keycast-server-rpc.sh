#!/usr/bin/env bash
# Throughput of the Keycast reference server's POST /api/nostr, measured with an independent
# generator (wrk + bench/keycast-rpc.lua), next to the raw BIP-340 signing bound measured with
# a Go benchmark on the same core(s) in the same run.
#
# Usage: bench/keycast-server-rpc.sh [duration_seconds] [connections]
#   default 10 s, 50 connections. Needs taskset, curl, jq, openssl and wrk (installed with apt-get
#   when missing and running as root). Output: the machine record, then one line per
#   measurement, then a summary with the ratios docs/benchmarks.md quotes.
#
# Two layouts are measured:
#   pinned:   server on core 1 (GOMAXPROCS=1), wrk on core 0 (1 thread). The signing bound is
#             BenchmarkSchnorrSign with -cpu 1 pinned to core 1, read right before and right after
#             the sign_event run; the summary gives both and warns when they differ by over 5 %.
#   shared:   server and wrk both on cores 0-1 (GOMAXPROCS=2, wrk 2 threads), as a user would run
#             them on this 2-core machine. The bound is BenchmarkSchnorrSign with -cpu 2.
#   pinned-nethttp: as pinned, with the HTTP/1.1 fast path off (KEYCAST_FAST_PATH=off), so every
#             request goes through net/http; for comparison.
#   pinned-pipelined: as pinned, with wrk writing $PIPELINE requests (default 8) back to back on
#             each connection before reading their answers (HTTP/1.1 pipelining, KC_PIPELINE in
#             bench/keycast-rpc.lua), so the server reads a batch and writes its answers in one
#             write: what the server costs per request when the loopback wake-up of the client is
#             paid once per batch instead of once per answer. Not in the default LAYOUTS.
# LAYOUTS (default "pinned shared pinned-nethttp") picks the layouts and their order.
# PERF=1 records the server with `perf record -g` during each sign_event run (the middle of it) and
# prints its top symbols; the figures of such a run include perf's own cost and are not the ones to
# quote. PERF_DIR keeps the perf.data files (default: the run's temporary folder, removed at the end).
# Wall-clock ratios suffer when other work shares the machine; the per-CPU ratio (server CPU
# time per request from /proc, against CPU time per bare signature) does not.
set -euo pipefail

DUR=${1:-10}
CONN=${2:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; }
  fi
  command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
fi
. "$ROOT/bench/lib.sh"
need_tools go taskset curl jq openssl
build_benchsum

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Machine record (internal/machine), printed first.
echo "== machine"
go run ./cmd/loadproof machine --settings KEYCAST_,HANDLER_CACHE_SIZE,GOMAXPROCS
echo "== wrk $(wrk --version 2>&1 | head -1)"

go build -o "$WORK/kl" ./cmd/keycast-loadtest

# start_server <cpu list> <gomaxprocs> <fast path on|off>: starts the server, waits for /health,
# sets SERVER_PID.
PORT=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$PORT"
start_server() {
  local cpus=$1 procs=$2 fast=$3
  GOMAXPROCS=$procs KEYCAST_BCRYPT_COST=4 KEYCAST_FAST_PATH=$fast PORT=$PORT taskset -c "$cpus" "$WORK/kl" server --data-dir "$WORK/data" \
    >"$WORK/server.out" 2>"$WORK/server.err" &
  SERVER_PID=$!
  keycast_ready "$URL" "$WORK/server.err"
}
stop_server() {
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
}

# server_cpu_ticks: user+system CPU of the server process so far, in clock ticks.
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

# run_wrk <cpus> <threads> <method>: prints wrk's summary line; sets RPS and CPU_US (server CPU
# microseconds per request during the run, which stays meaningful when other work shares the
# cores).
run_wrk() {
  local cpus=$1 threads=$2 method=$3 out t0 t1 reqs
  # Warm the handler cache (one miss) before measuring.
  KC_TOKEN=$TOKEN KC_METHOD=$method KC_PUBKEY=$PUBKEY KC_PEER=$PUBKEY KC_PIPELINE=$WRK_PIPELINE \
    taskset -c "$cpus" wrk -t1 -c1 -d1s -s bench/keycast-rpc.lua "$URL" >/dev/null
  t0=$(server_cpu_ticks)
  out=$(KC_TOKEN=$TOKEN KC_METHOD=$method KC_PUBKEY=$PUBKEY KC_PEER=$PUBKEY KC_PIPELINE=$WRK_PIPELINE \
    taskset -c "$cpus" wrk -t"$threads" -c"$CONN" -d"${DUR}s" -s bench/keycast-rpc.lua "$URL")
  t1=$(server_cpu_ticks)
  RPS=$(printf '%s\n' "$out" | sed -n 's/.* rps=\([0-9]*\) .*/\1/p')
  reqs=$(printf '%s\n' "$out" | sed -n 's/.* requests=\([0-9]*\) .*/\1/p')
  CPU_US=$(cpu_us_per_op "$t0" "$t1" "$reqs")
  printf '%s server_cpu_us_per_req=%s\n' "$(printf '%s\n' "$out" | grep -E 'keycast-rpc:')" "$CPU_US"
  printf '%s\n' "$out" | grep -E 'Non-2xx|Socket errors' || true
  local non2xx
  non2xx=$(printf '%s\n' "$out" | sed -n 's/.* non2xx=\([0-9]*\) .*/\1/p')
  if [ "${non2xx:-0}" != 0 ]; then echo "WARNING: $non2xx non-2xx answers in $method" >&2; fi
}

# sign_bound <cpus> <gomaxprocs>: sets SIGN_NS (wall ns per signature with that many
# goroutines, so 1e9/SIGN_NS is signatures per second on those cores) and SIGN_CPU_NS (CPU ns
# per signature).
sign_bound() {
  local out
  out=$(taskset -c "$1" go test -run XXX -bench '^BenchmarkSchnorrSign$' -benchtime 3s -cpu "$2" ./internal/keycastserver/)
  printf '%s\n' "$out" | grep Benchmark
  SIGN_NS=$(printf '%s\n' "$out" | awk '/^BenchmarkSchnorrSign/ {print $3}')
  SIGN_CPU_NS=$(printf '%s\n' "$out" | awk '/^BenchmarkSchnorrSign/ {print $5}')
}

declare -A R
LAYOUTS=${LAYOUTS:-pinned shared pinned-nethttp}
PIPELINE=${PIPELINE:-8}
for layout in $LAYOUTS; do
  fast=on WRK_PIPELINE=1
  case $layout in
    pinned) scpu=1; procs=1; wcpu=0; threads=1 ;;
    shared) scpu=0-1; procs=2; wcpu=0-1; threads=2 ;;
    pinned-nethttp) scpu=1; procs=1; wcpu=0; threads=1; fast=off ;;
    pinned-pipelined) scpu=1; procs=1; wcpu=0; threads=1; WRK_PIPELINE=$PIPELINE ;;
    *) echo "unknown layout $layout" >&2; exit 2 ;;
  esac
  echo "== $layout: server cpus $scpu (GOMAXPROCS=$procs, fast path $fast), wrk cpus $wcpu ($threads threads, $CONN connections, ${DUR}s, $WRK_PIPELINE request(s) per write)"
  rm -rf "$WORK/data"
  start_server "$scpu" "$procs" "$fast"
  keycast_user "$URL" bench
  run_wrk "$wcpu" "$threads" get_public_key; R[$layout.gpk]=$RPS; R[$layout.gpkcpu]=$CPU_US
  # The bound right before and right after the sign_event run, on the server's (idle) core: the
  # host's speed can change within minutes (a bare signature has read 30-50 µs on one guest in one
  # day), and a bound read under other conditions than the run makes the share meaningless.
  sign_bound "$scpu" "$procs"; R[$layout.signns0]=$SIGN_CPU_NS; R[$layout.bound0]=$(awk -v ns="$SIGN_NS" 'BEGIN {printf "%.0f", 1e9 / ns}')
  local_perf=""
  if [ "${PERF:-}" = 1 ]; then
    ( sleep 2; perf record -g -o "${PERF_DIR:-$WORK}/$layout-sign.perf" -p "$SERVER_PID" -- sleep $((DUR > 4 ? DUR - 3 : 1)) >/dev/null 2>&1 ) &
    local_perf=$!
  fi
  run_wrk "$wcpu" "$threads" sign_event; R[$layout.sign]=$RPS; R[$layout.signcpu]=$CPU_US
  if [ -n "$local_perf" ]; then
    wait "$local_perf" || true
    echo "== $layout: sign_event server profile (perf, self time, top 25)"
    { perf report -i "${PERF_DIR:-$WORK}/$layout-sign.perf" --no-children --sort sym --stdio 2>/dev/null || true; } |
      grep -E '^ +[0-9]' | head -25 || true
  fi
  sign_bound "$scpu" "$procs"; R[$layout.signns]=$SIGN_CPU_NS; R[$layout.bound]=$(awk -v ns="$SIGN_NS" 'BEGIN {printf "%.0f", 1e9 / ns}')
  run_wrk "$wcpu" "$threads" nip44_encrypt; R[$layout.nip44]=$RPS; R[$layout.nip44cpu]=$CPU_US
  curl -fsS "$URL/api/metrics" | grep -E '^keycast_(http_rpc_(requests|success|auth_errors|cache_hits|cache_misses)_total|expensive_resource_rejections_total)' || true
  stop_server
done

echo "== summary"
for layout in $LAYOUTS; do
  benchsum keycast-rpc "$layout" "${R[$layout.gpk]}" "${R[$layout.sign]}" "${R[$layout.nip44]}" "${R[$layout.bound]}" \
    "${R[$layout.gpkcpu]}" "${R[$layout.signcpu]}" "${R[$layout.nip44cpu]}" "${R[$layout.signns]}" \
    "${R[$layout.bound0]}" "${R[$layout.signns0]}"
done
