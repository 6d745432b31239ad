#!/usr/bin/env bash
# Full TLS 1.3 handshakes against the crypto bound, with server and client pinned to one core each
# (docs/benchmarks.md, "LinkKeys handshakes against the crypto bound"):
#
#   server   scale profile (bench/linkkeys-scale.sh's TCP_*/PUBLIC_READ_* overrides), one process,
#            `taskset -c $SERVER_CORE`, GOMAXPROCS=1
#   client   handshake-bench --duration-secs $SECS --concurrency $CONCURRENCY (256) --client-ip-base 127.0.2.0
#            --client-ip-count 128, `taskset -c $CLIENT_CORE`, GOMAXPROCS=1
#   crypto   the per-operation benchmarks of internal/linkkeys (handshake_bench_test.go), pinned to
#            one core with -test.cpu 1, before and after the end-to-end runs (a warning when a side's
#            two readings differ by more than 5 %: the machine's speed changed); the faster reading of
#            each is kept, so the bound is the higher one the run saw
#
# It prints, per run: full handshakes/s, server and client CPU per handshake (the result JSON's
# server_cpu and client_cpu over completed handshakes), handshakes per server and per client
# core-second, and the share of the crypto bound reached: with one core per side, handshakes/s
# cannot exceed 1 / max(server crypto, client crypto), and each side alone 1 / its own crypto per
# core-second. Then the machine record of the client's result.
#
# Usage: bench/linkkeys-handshake-pinned.sh [OLD_BINARY]
#   With OLD_BINARY, both builds run alternately, $ROUNDS rounds (server and client of the same
#   build each time), and the summary adds new/old ratios per round: the side-by-side comparison of
#   a change. NEW defaults to a build of this tree.
#   SECS=15 ROUNDS=1 (2 with OLD_BINARY) SERVER_CORE=0 CLIENT_CORE=1 BENCHTIME=1s
#   PERF=1 records both processes with `perf record -g` during each run (reports under $OUT; the
#   figures of such a run include perf's own cost and are not the ones to quote).
#   CLIENT_GOGC, SERVER_GOGC set GOGC for that side (unset: each side's own default);
#   OLD_SERVER_ENV, NEW_SERVER_ENV, OLD_CLIENT_ENV, NEW_CLIENT_ENV ("VAR=value ...") add variables
#   to one build's side, so one binary can be compared with itself under two settings.
#   NEW_SERVER_BIN, OLD_SERVER_BIN run that build's server from a `linkkeys-server` binary (the
#   server alone; the same flags without the subcommand) instead of `BINARY server`; LEAN=1 builds
#   one from this tree for the new build's server.
#   GCTRACE=1 runs the servers with GODEBUG=gctrace=1 and prints, per run, the server's collections
#   per handshake, their CPU (as gctrace accounts it: the phases, not the write barrier or sweeping
#   during allocation) per handshake, and the mean live heap after a collection.
# Needs: go, jq, taskset; perf for PERF=1. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:-}
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-handshake-pinned-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
NEW=${NEW:-$OUT/linkkeys-loadtest-new}
[ -x "$NEW" ] || (cd "$ROOT" && go build -o "$NEW" ./cmd/linkkeys-loadtest)
if [ "${LEAN:-}" = 1 ] && [ -z "${NEW_SERVER_BIN:-}" ]; then
  NEW_SERVER_BIN=$OUT/linkkeys-server-new
  (cd "$ROOT" && go build -o "$NEW_SERVER_BIN" ./cmd/linkkeys-server)
fi
(cd "$ROOT" && go test -c -o "$OUT/linkkeys.test" ./internal/linkkeys)
SECS=${SECS:-15} SERVER_CORE=${SERVER_CORE:-0} CLIENT_CORE=${CLIENT_CORE:-1} BENCHTIME=${BENCHTIME:-1s} CONCURRENCY=${CONCURRENCY:-256}
BUILDS=(new)
[ -n "$OLD" ] && BUILDS=(old new)
ROUNDS=${ROUNDS:-${#BUILDS[@]}}
ulimit -n "$(ulimit -Hn)"

SCALE_ENV=(TCP_MAX_CONNECTIONS=220000 TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000
  PUBLIC_READ_RATE_PER_MINUTE=6000000 PUBLIC_READ_BURST=1000000
  PUBLIC_READ_GLOBAL_RATE_PER_SECOND=100000 PUBLIC_READ_GLOBAL_BURST=200000)
CLEAN_ENV=(-u GOGC -u GOMAXPROCS)
. "$ROOT/bench/lib.sh"
unset_server_env
need_tools go jq taskset
[ "${PERF:-}" = 1 ] && need_tools perf
build_benchsum
SERVER_ENV=(GOMAXPROCS=1)
[ -n "${SERVER_GOGC:-}" ] && SERVER_ENV+=(GOGC="$SERVER_GOGC")
[ "${GCTRACE:-}" = 1 ] && SERVER_ENV+=(GODEBUG=gctrace=1)
CLIENT_ENV=(GOMAXPROCS=1)
[ -n "${CLIENT_GOGC:-}" ] && CLIENT_ENV+=(GOGC="$CLIENT_GOGC")

trap stop_server EXIT

start_server() { # start_server "BINARY server"|LEAN_BINARY NAME EXTRA_ENV...: the pinned one-process scale-profile server
  local cmd name=$2
  read -r -a cmd <<<"$1"
  shift 2
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "${SCALE_ENV[@]}" "${SERVER_ENV[@]}" "$@" taskset -c "$SERVER_CORE" "${cmd[@]}" \
    --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" --metrics-interval-secs 5 \
    >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  linkkeys_ready "$name" "$OUT/$name-info.json" "$OUT/$name-server.log" "$OUT/$name-server.err"
}

crypto() { # crypto NAME: the per-operation benchmarks on one core
  echo "== crypto benchmarks ($1), core $SERVER_CORE, -test.cpu 1, -test.benchtime $BENCHTIME"
  taskset -c "$SERVER_CORE" "$OUT/linkkeys.test" -test.run '^$' -test.cpu 1 -test.benchtime "$BENCHTIME" \
    -test.bench 'X25519|Ed25519|HandshakeCrypto' | tee "$OUT/crypto-$1.txt" | grep '^Benchmark'
}

run() { # run BUILD ROUND: one pinned server and one pinned handshake-bench
  local build=$1 r=$2 bin=$NEW srv=${NEW_SERVER_BIN:-} name senv=() cenv=()
  read -r -a senv <<<"${NEW_SERVER_ENV:-}"
  read -r -a cenv <<<"${NEW_CLIENT_ENV:-}"
  if [ "$build" = old ]; then
    bin=$OLD srv=${OLD_SERVER_BIN:-}
    read -r -a senv <<<"${OLD_SERVER_ENV:-}"
    read -r -a cenv <<<"${OLD_CLIENT_ENV:-}"
  fi
  name=$build-$r
  start_server "${srv:-$bin server}" "$name" "${senv[@]}"
  echo "== $name: server pid $SERVER_PID ($(taskset -pc "$SERVER_PID" | sed 's/.*: //')), client on core $CLIENT_CORE"
  env "${CLEAN_ENV[@]}" "${CLIENT_ENV[@]}" "${cenv[@]}" taskset -c "$CLIENT_CORE" "$bin" handshake-bench \
    --info-file "$OUT/$name-info.json" --duration-secs "$SECS" --concurrency "$CONCURRENCY" \
    --client-ip-base 127.0.2.0 --client-ip-count 128 --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err" &
  local cpid=$! perfs=()
  if [ "${PERF:-}" = 1 ]; then
    # Attached once the client's threads exist, for the middle of the run.
    sleep 1
    perf record -g -o "$OUT/$name-server.perf" -p "$SERVER_PID" -- sleep $((SECS - 2)) >/dev/null 2>&1 &
    perfs+=($!)
    perf record -g -o "$OUT/$name-client.perf" -p "$cpid" -- sleep $((SECS - 2)) >/dev/null 2>&1 &
    perfs+=($!)
  fi
  wait "$cpid" || { cat "$OUT/$name.err" >&2; echo "handshake-bench $name failed" >&2; exit 1; }
  for p in "${perfs[@]}"; do wait "$p" || true; done
  grep -E 'DONE|cpu:' "$OUT/$name.txt" | sed 's/^ */  /' | cut -c1-200 || true
  stop_server
  if [ "${PERF:-}" = 1 ]; then
    local hs cpu
    for side in server client; do
      read -r hs cpu < <(jq -r --arg side "$side" '"\(.handshakes.completed) \(.[$side + "_cpu"].ns // 0)"' "$OUT/$name.json")
      echo "  $side profile (perf, middle $((SECS - 2))s; µs per handshake scaled to the run's $side CPU):"
      perf script -i "$OUT/$name-$side.perf" -F comm,tid,period,ip,sym 2>/dev/null \
        | benchsum perf-breakdown "$hs" "$cpu" | tee "$OUT/$name-$side.breakdown.txt"
    done
  fi
}

echo "== results in $OUT; new $NEW${OLD:+, old $OLD}; $ROUNDS round(s), ${SECS}s each"
crypto before
for r in $(seq 1 "$ROUNDS"); do
  order=("${BUILDS[@]}")
  [ ${#BUILDS[@]} = 2 ] && [ $((r % 2)) = 0 ] && order=(new old)
  for b in "${order[@]}"; do run "$b" "$r"; done
done
crypto after

benchsum handshake-pinned "$OUT" "$ROUNDS" "${BUILDS[@]}"
