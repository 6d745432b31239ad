#!/usr/bin/env bash
# Server memory under the default-profile ddos, fat binary against lean, side by side.
#
# Builds (CGO_ENABLED=0) linkkeys-loadtest (every command in one 67 MB binary) and linkkeys-server (the reference
# server alone), then for each round and each binary: starts a fresh one-process server with the
# default profile (no TCP_*/PUBLIC_READ_* variables, whatever the calling shell has) and METRICS
# every second, samples /proc/<pid>/status every 0.1 s (VmRSS, RssAnon, RssFile), runs
#   ddos --sources $SOURCES --concurrency 500 --client-ip-base 127.5.0.0
# (the step 4 of bench/linkkeys-scale.sh; the client is always linkkeys-loadtest), waits for the
# server to go quiet, and stops it. Each round runs fat, lean, and lean with GOGC=100 (which turns
# the server's GC pacer off, so the pacer's share shows), so all see the same machine.
#
# Prints per run: max RSS over the server's METRICS lines with its anon/file split at that line,
# the max of the 0.1 s samples, the idle baseline (the last line before the burst), the client's
# accounting check against the server's counters, and per binary the worst run; then the
# machine record (from the client's result file).
#
# Usage: bench/linkkeys-ddos-rss.sh              (SOURCES=12000 ROUNDS=2)
#        SOURCES=1200 ROUNDS=1 bench/linkkeys-ddos-rss.sh    (a check of the script)
#        OLD_LEAN=path/to/linkkeys-server bench/linkkeys-ddos-rss.sh
#          adds a fourth run per round, "leanold": that lean server binary (say, a build of the tree
#          before a change), so a change to the lean server is compared side by side.
# Needs: go; Linux (/proc).
set -euo pipefail

SOURCES=${SOURCES:-12000}
ROUNDS=${ROUNDS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-ddos-rss-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# Static binaries, as the Dockerfile builds them (with cgo the net package links libc, whose pages
# add about 1.3 MiB of file-backed RSS to either binary).
CGO_ENABLED=0 go build -o "$OUT/linkkeys-loadtest" ./cmd/linkkeys-loadtest
CGO_ENABLED=0 go build -o "$OUT/linkkeys-server" ./cmd/linkkeys-server
ls -l "$OUT/linkkeys-loadtest" "$OUT/linkkeys-server" | awk '{print "binary", $NF, $5, "bytes"}' >"$OUT/binaries.txt"
ulimit -n "$(ulimit -Hn)"

CLEAN_ENV=()
. "$ROOT/bench/lib.sh"
unset_server_env
need_tools go
build_benchsum

SERVER_PID="" SAMPLER_PID=""
stop_all() {
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null && wait "$SAMPLER_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID="" SAMPLER_PID=""
}
trap stop_all EXIT

lines() { grep -c '^METRICS ' "$1" 2>/dev/null || true; }

run_one() { # run_one NAME SERVER-COMMAND...
  local name=$1; shift
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "$@" --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" \
    --metrics-interval-secs 1 >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  ( while kill -0 "$SERVER_PID" 2>/dev/null; do
      awk -v t="$(date +%s.%N)" '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %s ", $1, $2} END {print t}' \
        "/proc/$SERVER_PID/status" 2>/dev/null || true
      sleep 0.1
    done ) >"$OUT/$name-proc.txt" &
  SAMPLER_PID=$!
  for _ in $(seq 1 200); do
    [ -s "$OUT/$name-info.json" ] && [ "$(lines "$OUT/$name-server.log")" -ge 3 ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name-server.err" >&2; exit 1; }
    sleep 0.1
  done
  "$OUT/linkkeys-loadtest" ddos --info-file "$OUT/$name-info.json" --sources "$SOURCES" --concurrency 500 \
    --client-ip-base 127.5.0.0 --server-metrics "$OUT/$name-server.log" --json "$OUT/$name.json" >"$OUT/$name.txt"
  local n; n=$(lines "$OUT/$name-server.log")
  while [ "$(lines "$OUT/$name-server.log")" -lt $((n + 5)) ]; do sleep 0.2; done # 5 s of quiet
  stop_all
}

echo "== results in $OUT"
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: fat (linkkeys-loadtest server)"
  run_one "fat-$r" "$OUT/linkkeys-loadtest" server
  echo "== round $r: lean (linkkeys-server)"
  run_one "lean-$r" "$OUT/linkkeys-server"
  echo "== round $r: lean with GOGC=100 (no GC pacer: the collector as Go sets it)"
  run_one "leangc100-$r" env GOGC=100 "$OUT/linkkeys-server"
  if [ -n "${OLD_LEAN:-}" ]; then
    echo "== round $r: leanold ($OLD_LEAN)"
    run_one "leanold-$r" "$OLD_LEAN"
  fi
done

benchsum ddos-rss "$OUT" "$ROUNDS" "$SOURCES" ${OLD_LEAN:+leanold}
