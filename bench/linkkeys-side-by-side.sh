#!/usr/bin/env bash
# The LinkKeys clients of two builds side by side, on one machine in one run, alternating, for the
# figures docs/benchmarks.md tracks across a change of the clients:
#
#   handshake-bench --duration-secs $SECS --concurrency 64            full handshakes per second
#   request-bench   --connections 64 --duration-secs $SECS --pipeline 8  the pipelined request rate
#   ddos            --sources $SOURCES --concurrency 500                 exact accounting (every check ok)
#
# handshake-bench and request-bench run against one server (the scale profile with public reads
# unbounded, so nothing is shed and the client is what differs); each ddos run gets a fresh server
# with the default profile, so both builds meet the same limiter state. Every server runs with its
# Prometheus endpoint on, which the info file advertises: the new clients sample it once a second
# into their interval snapshots, so their figures include that cost. The order of the two builds
# alternates from round to round. The machine is shared and noisy: compare the ratios of a round,
# and the client CPU per operation, which moves less than the rates.
#
# Usage: bench/linkkeys-side-by-side.sh OLD_BINARY [NEW_BINARY]
#        ROUNDS=3 SECS=5 SOURCES=5000 (defaults); NEW_BINARY defaults to a build of this tree.
# The servers are NEW_BINARY's (the server is not what is compared). Needs: go.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?usage: $0 OLD_BINARY [NEW_BINARY]}
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-side-by-side-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
NEW=${2:-}
if [ -z "$NEW" ]; then
  NEW="$OUT/linkkeys-loadtest-new"
  (cd "$ROOT" && go build -o "$NEW" ./cmd/linkkeys-loadtest)
fi
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} SOURCES=${SOURCES:-5000}
ulimit -n "$(ulimit -Hn)"

CLEAN_ENV=()
. "$ROOT/bench/lib.sh"
SCALE_ENV=("${SCALE_UNBOUNDED_ENV[@]}")
unset_server_env
need_tools go
build_benchsum
trap stop_server EXIT

start_server() { # start_server NAME ENV...: start NEW's server, wait for its info file
  local name=$1; shift
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "$@" "$NEW" server --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" \
    --metrics-interval-secs 5 --metrics-addr 127.0.0.1:0 >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  linkkeys_ready "$name" "$OUT/$name-info.json" "$OUT/$name-server.log" "$OUT/$name-server.err"
}

run() { # run BUILD NAME ARGS...: one client run, its output and JSON result kept
  local build=$1 name=$2; shift 2
  local bin=$OLD
  [ "$build" = new ] && bin=$NEW
  "$bin" "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err"
  grep -E 'DONE|client vs server' "$OUT/$name.txt" | sed "s/^/  $build $name: /" | cut -c1-200
}

echo "== results in $OUT; old $OLD, new $NEW; $ROUNDS rounds, ${SECS}s runs, ddos $SOURCES sources"
for r in $(seq 1 "$ROUNDS"); do
  order="old new"
  [ $((r % 2)) = 0 ] && order="new old"
  echo "== round $r ($order)"
  start_server bench-$r "${SCALE_ENV[@]}"
  for b in $order; do
    run "$b" "hs-$b-$r" handshake-bench --info-file "$OUT/bench-$r-info.json" --duration-secs "$SECS" --concurrency 64 \
      --client-ip-base 127.0.2.0 --client-ip-count 128
  done
  for b in $order; do
    run "$b" "rq-$b-$r" request-bench --info-file "$OUT/bench-$r-info.json" --connections 64 --duration-secs "$SECS" --pipeline 8
  done
  stop_server
  for b in $order; do
    start_server ddos-$b-$r
    run "$b" "ddos-$b-$r" ddos --info-file "$OUT/ddos-$b-$r-info.json" --sources "$SOURCES" --concurrency 500 \
      --client-ip-base 127.5.0.0
    stop_server
  done
done

benchsum side-by-side "$OUT" "$ROUNDS"
