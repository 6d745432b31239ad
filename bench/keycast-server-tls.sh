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
for tool in taskset curl jq python3; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done
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

CLK_TCK=$(getconf CLK_TCK)
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
  python3 - "$mode" "$total" "$ok" "$rps" "$t0" "$t1" "$CLK_TCK" <<'PY'
import sys
mode, total, ok, rps, t0, t1, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
cpu_us = (t1 - t0) / tck * 1e6 / max(total, 1)
print(f"keycast-tls: transport={mode} requests={total} ok={ok} rps={rps:.0f} server_cpu_us_per_req={cpu_us:.2f}")
PY
}

echo "== get_public_key, warm-cache, $CONN connections, ${DUR}s per run, $ROUNDS rounds (server on core $CPU_SERVER, client on core $CPU_CLIENT)"
for r in $(seq 1 "$ROUNDS"); do
  measure plain | tee -a "$WORK/lines"
  measure tls | tee -a "$WORK/lines"
done
echo "== summary (median over rounds)"
python3 - "$WORK/lines" <<'PY'
import re, statistics, sys
v = {}
for line in open(sys.argv[1]):
    m = dict(re.findall(r"(\w+)=(\S+)", line))
    v.setdefault(m["transport"], []).append((float(m["rps"]), float(m["server_cpu_us_per_req"])))
med = {k: (statistics.median(a for a, _ in x), statistics.median(b for _, b in x)) for k, x in v.items()}
p, t = med["plain"], med["tls"]
print(f"plain: {p[0]:.0f} req/s, {p[1]:.2f} µs server CPU/req")
print(f"tls:   {t[0]:.0f} req/s, {t[1]:.2f} µs server CPU/req")
print(f"tls/plain: throughput {t[0]/p[0]:.2f}x, server CPU per request {t[1]/p[1]:.2f}x (+{t[1]-p[1]:.2f} µs)")
PY
