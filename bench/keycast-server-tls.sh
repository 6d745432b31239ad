#!/usr/bin/env bash
# get_public_key over TLS against plain HTTP, side by side in one run: requests per second and the
# reference server's CPU time per request (from /proc, so it stays meaningful when other work shares
# the machine), with our own generator (`keycast-loadtest run`, its fast client: HTTP/1.1 over a
# kept-alive connection, TLS with --ca-cert).
#
# Usage: bench/keycast-server-tls.sh [rounds] [duration_seconds] [connections]
#   defaults: 2 rounds of 5 s, 50 connections; each round runs plain then TLS, so the machine's
#   noise hits both alike. Under a minute with the defaults.
# Layout as bench/keycast-server-rpc.sh "pinned": the server on core 1 (GOMAXPROCS=1), the client
# on core 0. The TLS server is `server --tls-self-signed 127.0.0.1 --tls-cert-out ca.pem` (ECDSA
# P-256; Go's client and server settle on TLS 1.3). Each run opens its connections anew, so their
# handshakes (one per connection, some 0.1 ms of server CPU each) fall inside the measured window:
# against the tens of thousands of requests a run makes they are noise, and the figure is the cost
# of encrypting and decrypting the requests and answers.
set -euo pipefail

ROUNDS=${1:-2}
DUR=${2:-5}
CONN=${3:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go taskset curl jq
build_benchsum
CPU_SERVER=${CPU_SERVER:-1}
CPU_CLIENT=${CPU_CLIENT:-0}

WORK=$(mktemp -d)
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; fi
}
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT

echo "== machine"
go run ./cmd/loadproof machine --settings KEYCAST_,HANDLER_CACHE_SIZE,GOMAXPROCS
go build -o "$WORK/kl" ./cmd/keycast-loadtest

server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

# start_server plain|tls: starts the server on a fresh data directory, waits for /health, sets
# SERVER_PID, URL and CA (the --ca-cert flag for the clients, empty for plain).
start_server() {
  local mode=$1 port scheme=http
  port=$((20000 + RANDOM % 20000))
  local args=(server --addr "127.0.0.1:$port" --data-dir "$WORK/data-$mode")
  CA=() CURL_CA=()
  if [ "$mode" = tls ]; then
    args+=(--tls-self-signed 127.0.0.1 --tls-cert-out "$WORK/ca.pem")
    scheme=https
  fi
  GOMAXPROCS=1 KEYCAST_BCRYPT_COST=4 taskset -c "$CPU_SERVER" "$WORK/kl" "${args[@]}" >"$WORK/server.out" 2>"$WORK/server.err" &
  SERVER_PID=$!
  URL="$scheme://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    if [ "$mode" = tls ] && [ -s "$WORK/ca.pem" ]; then CA=(--ca-cert "$WORK/ca.pem") CURL_CA=(--cacert "$WORK/ca.pem"); fi
    curl -fsS "${CURL_CA[@]}" "$URL/health" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "server did not come up" >&2
  exit 1
}

# measure plain|tls: setup (10 users over HTTP), then a run of DUR seconds; prints one line.
measure() {
  local mode=$1 t0 t1
  start_server "$mode"
  "$WORK/kl" setup --url "$URL" "${CA[@]}" --mode http -n 10 -c 10 -o "$WORK/users.json" >/dev/null 2>"$WORK/setup.err" ||
    { cat "$WORK/setup.err" >&2; exit 1; }
  t0=$(server_cpu_ticks)
  taskset -c "$CPU_CLIENT" "$WORK/kl" run --url "$URL" "${CA[@]}" --users-file "$WORK/users.json" -m get-public-key \
    -s warm-cache -c "$CONN" -d "$DUR" --ramp-up 0 -o "$WORK/r.json" >/dev/null 2>"$WORK/run.err" || { cat "$WORK/run.err" >&2; exit 1; }
  t1=$(server_cpu_ticks)
  stop_server
  local total ok rps
  total=$(jq .summary.total_requests "$WORK/r.json")
  ok=$(jq .summary.successful_requests "$WORK/r.json")
  rps=$(jq .summary.requests_per_second "$WORK/r.json")
  echo "keycast-tls: transport=$mode requests=$total ok=$ok rps=$(awk -v r="$rps" 'BEGIN {printf "%.0f", r}') server_cpu_us_per_req=$(cpu_us_per_op "$t0" "$t1" "$total")"
}

echo "== get_public_key, warm-cache, $CONN connections, ${DUR}s per run, $ROUNDS rounds (server on core $CPU_SERVER, client on core $CPU_CLIENT)"
for r in $(seq 1 "$ROUNDS"); do
  measure plain | tee -a "$WORK/lines"
  measure tls | tee -a "$WORK/lines"
done
echo "== summary (median over rounds)"
benchsum keycast-tls "$WORK/lines"
