#!/usr/bin/env bash
# Handshakes/s and requests/s across the test bed's bridge against the same over loopback, side by
# side in one run (docs/field.md, docs/benchmarks.md "Across hosts"). One LinkKeys server in host 1
# listens on 0.0.0.0:7443 of its namespace; the loopback client runs in host 1 itself and dials
# 127.0.0.1, the bridge client runs in host 2 and dials 198.18.0.1 from host 2's source prefix
# 198.19.2.0/24. The two alternate, ROUNDS times, against the same server process, so the ratio
# bridge/loopback is the cost of crossing a second network stack (veth pair + bridge) on this box.
# The server's rate limits are lifted (nothing is shed: the client and the path are what differ).
#
# Usage: bench/testbed-bridge.sh        ROUNDS=2 SECS=4 CONC=32 (defaults); needs root, ip, go, jq.
# Namespaces lp-bb<pid>-* are deleted at the end, also on failure; only the server this script
# started is stopped, by its PID. Raw JSON results stay in $OUT (small; nothing is archived).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
need_tools go ip jq
ROUNDS=${ROUNDS:-2}; SECS=${SECS:-4}; CONC=${CONC:-32}
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] && [ "$SECS" -ge 1 ] && [ "$SECS" -le 30 ] || { echo "ROUNDS 1-10, SECS 1-30" >&2; exit 2; }
OUT=${OUT:-${TMPDIR:-/tmp}/testbed-bridge-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
export LP_TESTBED="lp-bb$$"
TB="$ROOT/scripts/testbed.sh"
(cd "$ROOT" && go build -o "$OUT/" ./cmd/linkkeys-server ./cmd/linkkeys-loadtest)
build_benchsum

SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  "$TB" down || true
}
trap cleanup EXIT
"$TB" up 2 --sources 2 >/dev/null

env TCP_HANDSHAKE_RATE_PER_MINUTE=60000000 TCP_HANDSHAKE_BURST=1000000 \
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=10000000 TCP_HANDSHAKE_GLOBAL_BURST=1000000 \
  PUBLIC_READ_RATE_PER_MINUTE=600000000 PUBLIC_READ_BURST=10000000 \
  PUBLIC_READ_GLOBAL_RATE_PER_SECOND=10000000 PUBLIC_READ_GLOBAL_BURST=10000000 \
  "$TB" exec 1 "$OUT/linkkeys-server" --listen 0.0.0.0:7443 --info-file "$OUT/info.json" \
  --db-path "$OUT/lk.sqlite3" --duration-secs 600 >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 200); do [ -s "$OUT/info.json" ] && break; sleep 0.1; done
[ -s "$OUT/info.json" ] || { echo "the server wrote no info file:" >&2; cat "$OUT/server.log" >&2; exit 1; }
read -r FP DOMAIN < <(jq -r '"\(.fingerprint) \(.domain)"' "$OUT/info.json")

client() { # PATH(loop|bridge) CMD ROUND ARGS…
  local path=$1 cmd=$2 round=$3; shift 3
  local json="$OUT/$cmd-$path-$round.json"
  if [ "$path" = loop ]; then
    "$TB" exec 1 "$OUT/linkkeys-loadtest" "$cmd" --target 127.0.0.1:7443 --fingerprint "$FP" --domain "$DOMAIN" \
      --client-ip-base 127.0.2.1 --client-ip-count 64 --json "$json" "$@" >"$json.log" 2>&1
  else
    "$TB" exec 2 "$OUT/linkkeys-loadtest" "$cmd" --target 198.18.0.1:7443 --fingerprint "$FP" --domain "$DOMAIN" \
      --allow-host 198.18.0.1 --client-ip-base 198.19.2.1 --client-ip-count 64 --json "$json" "$@" >"$json.log" 2>&1
  fi
}

for r in $(seq 1 "$ROUNDS"); do
  order="loop bridge"; [ $((r % 2)) = 0 ] && order="bridge loop"
  for p in $order; do
    client "$p" handshake-bench "$r" --duration-secs "$SECS" --concurrency "$CONC"
    client "$p" request-bench "$r" --duration-secs "$SECS" --connections "$CONC" --pipeline 8
  done
done

benchsum testbed-bridge "$OUT" "$ROUNDS"
echo "raw results: $OUT"
