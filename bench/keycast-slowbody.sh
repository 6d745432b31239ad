#!/usr/bin/env bash
# The slow-body attack on the Keycast reference server (docs/reliability.md, Keycast server,
# 10): a server on 127.0.0.1 with KEYCAST_MAX_CONNECTIONS=$CAP and the default 30 s body
# timeout; an attacker holding $CONNS connections (more than the cap) that each send a
# "POST /api/auth/register" head with Content-Length: 10000 and never the body, dialing a new
# one whenever the server closes one; two normal clients sending get_public_key every 100 ms
# (one on a new connection each time, one keep-alive). Prints the machine, evictions per second
# and the normal clients' latency (bench/keycast-slowbody.go).
#
# Usage: bench/keycast-slowbody.sh [duration_seconds] [cap] [attack_connections]
#   default 30 s, cap 10000 (the server's default), 12000 attack connections. RATE=N limits
#   the attacker to N new connections a second (default 0: no limit), MAX_DIALS bounds them in
#   all (default 400000). The attacker's and the server's open-file limits must exceed the
#   attack connections and the cap (the script says so when they do not). Needs curl, jq, openssl.
set -euo pipefail

DUR=${1:-30}
CAP=${2:-10000}
CONNS=${3:-12000}
RATE=${RATE:-0}
MAX_DIALS=${MAX_DIALS:-400000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go curl jq openssl
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && { [ "$NOFILE" -le $((CONNS + 100)) ] || [ "$NOFILE" -le $((CAP + 200)) ]; }; then
  echo "the open-file limit ($NOFILE) is below the attack connections ($CONNS) or the cap ($CAP); lower them or raise ulimit -n" >&2
  exit 1
fi

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== machine"
echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); kernel $(uname -r); open files $NOFILE"
echo "== attack: ${DUR}s, KEYCAST_MAX_CONNECTIONS=$CAP, $CONNS attack connections, rate ${RATE}/s (0 = no limit), at most $MAX_DIALS"

go build -o "$WORK/kl" ./cmd/keycast-loadtest
go build -o "$WORK/slowbody" bench/keycast-slowbody.go

PORT=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$PORT"
KEYCAST_BCRYPT_COST=4 KEYCAST_MAX_CONNECTIONS=$CAP KEYCAST_BODY_TIMEOUT_MS=30000 PORT=$PORT \
  "$WORK/kl" server --data-dir "$WORK/data" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
keycast_ready "$URL" "$WORK/server.err"

# One user through register → authorize (PKCE S256) → token (bench/lib.sh).
keycast_user "$URL" slowbody

status=0
"$WORK/slowbody" -addr "127.0.0.1:$PORT" -token "$TOKEN" -conns "$CONNS" -duration "${DUR}s" -rate "$RATE" -max-dials "$MAX_DIALS" || status=$?
echo "== server counters after the attack"
curl -fsS "$URL/api/metrics" | grep -E '^keycast_http_connections_(open|shed_total|evicted_total)' || true
exit $status
