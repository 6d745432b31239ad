#!/usr/bin/env bash
# Throughput of the Keycast reference server's POST /api/nostr, measured with an independent
# generator (wrk + bench/keycast-rpc.lua), next to the raw BIP-340 signing bound measured with
# a Go benchmark on the same core(s) in the same run.
#
# Usage: bench/keycast-server-rpc.sh [duration_seconds] [connections]
#   default 10 s, 50 connections. Needs taskset, curl, python3 and wrk (installed with apt-get
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
for tool in taskset curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done

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
  for _ in $(seq 1 100); do
    curl -fsS "$URL/health" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "server did not come up" >&2
  exit 1
}
stop_server() {
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
}

# One user through register → authorize (PKCE S256) → token; sets TOKEN and PUBKEY.
make_user() {
  local reg code verifier challenge
  reg=$(curl -fsS -i -X POST "$URL/api/auth/register" -H 'Content-Type: application/json' -H "Origin: $URL" \
    -d "{\"email\":\"bench-$RANDOM@test.local\",\"password\":\"bench-password\"}")
  PUBKEY=$(printf '%s' "$reg" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["pubkey"])')
  local session
  session=$(printf '%s' "$reg" | tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: keycast_session=\([^;]*\);.*/\1/p')
  verifier=$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode())')
  challenge=$(python3 -c 'import base64,hashlib,sys; print(base64.urlsafe_b64encode(hashlib.sha256(sys.argv[1].encode()).digest()).rstrip(b"=").decode())' "$verifier")
  code=$(curl -fsS -X POST "$URL/api/oauth/authorize" -H 'Content-Type: application/json' -H "Cookie: keycast_session=$session" \
    -d "{\"approved\":true,\"client_id\":\"loadtest\",\"redirect_uri\":\"$URL/callback\",\"scope\":\"policy:social\",\"code_challenge\":\"$challenge\",\"code_challenge_method\":\"S256\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
  TOKEN=$(curl -fsS -X POST "$URL/api/oauth/token" -H 'Content-Type: application/json' \
    -d "{\"grant_type\":\"authorization_code\",\"code\":\"$code\",\"client_id\":\"loadtest\",\"redirect_uri\":\"$URL/callback\",\"code_verifier\":\"$verifier\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
}

CLK_TCK=$(getconf CLK_TCK)
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
  CPU_US=$(python3 -c "print(round(($t1 - $t0) / $CLK_TCK * 1e6 / max($reqs, 1), 2))")
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
  make_user
  run_wrk "$wcpu" "$threads" get_public_key; R[$layout.gpk]=$RPS; R[$layout.gpkcpu]=$CPU_US
  # The bound right before and right after the sign_event run, on the server's (idle) core: the
  # host's speed can change within minutes (a bare signature has read 30-50 µs on one guest in one
  # day), and a bound read under other conditions than the run makes the share meaningless.
  sign_bound "$scpu" "$procs"; R[$layout.signns0]=$SIGN_CPU_NS; R[$layout.bound0]=$(python3 -c "print(round(1e9/$SIGN_NS))")
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
  sign_bound "$scpu" "$procs"; R[$layout.signns]=$SIGN_CPU_NS; R[$layout.bound]=$(python3 -c "print(round(1e9/$SIGN_NS))")
  run_wrk "$wcpu" "$threads" nip44_encrypt; R[$layout.nip44]=$RPS; R[$layout.nip44cpu]=$CPU_US
  curl -fsS "$URL/api/metrics" | grep -E '^keycast_(http_rpc_(requests|success|auth_errors|cache_hits|cache_misses)_total|expensive_resource_rejections_total)' || true
  stop_server
done

echo "== summary"
for layout in $LAYOUTS; do
  python3 - "$layout" "${R[$layout.gpk]}" "${R[$layout.sign]}" "${R[$layout.nip44]}" "${R[$layout.bound]}" \
    "${R[$layout.gpkcpu]}" "${R[$layout.signcpu]}" "${R[$layout.nip44cpu]}" "${R[$layout.signns]}" \
    "${R[$layout.bound0]}" "${R[$layout.signns0]}" <<'EOF'
import sys
layout = sys.argv[1]
gpk, sign, nip44, bound, gpkcpu, signcpu, nip44cpu, signns, bound0, signns0 = map(float, sys.argv[2:])
print(f"{layout}: get_public_key {gpk:.0f} req/s ({gpkcpu:.1f} server CPU-us/req = {1e6/gpkcpu:.0f} req per server CPU-second); "
      f"nip44_encrypt {nip44:.0f} req/s ({nip44cpu:.1f} CPU-us/req)")
print(f"{layout}: sign_event {sign:.0f} req/s = {100*sign/bound:.1f}% of the Schnorr bound {bound:.0f} signatures/s measured "
      f"after it (wall clock); per CPU: {signcpu:.1f} server CPU-us/req vs {signns/1000:.1f} CPU-us per bare signature "
      f"= {100*signns/1000/signcpu:.1f}% of the signing bound on the CPU the server got")
print(f"{layout}: the bound before the sign_event run: {signns0/1000:.1f} CPU-us per bare signature "
      f"({100*signns0/1000/signcpu:.1f}%), {bound0:.0f} signatures/s ({100*sign/bound0:.1f}% by wall clock)")
drift = abs(signns - signns0) / min(signns, signns0)
if drift > 0.05:
    print(f"{layout}: WARNING: the two bound readings differ by {100*drift:.0f}%: the host's speed changed "
          f"during the run, so neither share is a measurement; run it again")
EOF
done
