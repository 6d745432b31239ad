#!/usr/bin/env bash
# A combined run's request stream beside handshake loops, with the streams sharing one client
# process (--stream-processes=false, what every combined run did before) and with the request stream
# in a process of its own (the default), side by side on one machine in one run, alternating:
#
#   combined --handshake-concurrency $LOOPS --request-connections $CONNS --duration-secs $SECS
#
# against one server (the scale profile with public reads unbounded, so nothing is shed and the
# client is what differs), started separately so neither layout shares a process with it. The
# server's load (handshakes per second) is printed beside the request rate: the split must not buy
# its requests by making fewer handshakes. The order of the two layouts alternates from round to
# round. The machine is shared and noisy: compare the ratios of a round.
#
# Usage: bench/linkkeys-combined-procs.sh   ROUNDS=3 SECS=5 LOOPS=4 CONNS=2 (defaults). Needs: go.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-combined-procs-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} LOOPS=${LOOPS:-4} CONNS=${CONNS:-2}
BIN="$OUT/linkkeys-loadtest"
(cd "$ROOT" && go build -o "$BIN" ./cmd/linkkeys-loadtest)
ulimit -n "$(ulimit -Hn)"

CLEAN_ENV=()
. "$ROOT/bench/lib.sh"
SCALE_ENV=("${SCALE_UNBOUNDED_ENV[@]}")
unset_server_env
need_tools go
build_benchsum
trap stop_server EXIT

rm -f "$OUT/server-info.json"
env "${CLEAN_ENV[@]}" "${SCALE_ENV[@]}" "$BIN" server --info-file "$OUT/server-info.json" --db-path "$OUT/server.sqlite3" \
  --metrics-interval-secs 1 >"$OUT/server.log" 2>"$OUT/server.err" &
SERVER_PID=$!
linkkeys_ready server "$OUT/server-info.json" "$OUT/server.log" "$OUT/server.err"

echo "== results in $OUT; $ROUNDS rounds, ${SECS}s runs, $LOOPS handshake loops, $CONNS request connections"
for r in $(seq 1 "$ROUNDS"); do
  order="shared split"
  [ $((r % 2)) = 0 ] && order="split shared"
  echo "== round $r ($order)"
  for l in $order; do
    procs=true
    [ "$l" = shared ] && procs=false
    "$BIN" combined --info-file "$OUT/server-info.json" --server-metrics "$OUT/server.log" --stream-processes="$procs" \
      --handshake-concurrency "$LOOPS" --request-connections "$CONNS" --duration-secs "$SECS" \
      --json "$OUT/$l-$r.json" >"$OUT/$l-$r.txt" 2>"$OUT/$l-$r.err"
    grep -E 'DONE' "$OUT/$l-$r.txt" | sed "s/^/  $l: /" | cut -c1-160
  done
done

benchsum combined-procs "$OUT" "$ROUNDS"
