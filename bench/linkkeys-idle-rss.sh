#!/usr/bin/env bash
# Idle TLS connection memory of the LinkKeys reference server.
#
# Builds linkkeys-loadtest, starts `server` (scale profile for the handshake
# limiter, so the ramp is not throttled), records the server's RSS from its
# METRICS lines at 0 connections, opens COUNT idle TLS connections with the
# `connections` client (holding them idle), waits until the server reports them all
# established (and parked) and RSS has settled, and prints KiB of server RSS
# per idle connection plus frame_buffer_bytes.
#
# Usage: bench/linkkeys-idle-rss.sh            (COUNT=15000 by default)
#        COUNT=5000 SETTLE_LINES=5 bench/linkkeys-idle-rss.sh
# Needs `ulimit -n` >= COUNT+300 for the server and for the client.
set -euo pipefail

COUNT=${COUNT:-15000}
INTERVAL=${INTERVAL:-2}          # seconds between METRICS lines
BASELINE_LINES=${BASELINE_LINES:-6}  # the first lines include start-up garbage not yet returned
SETTLE_LINES=${SETTLE_LINES:-10} # METRICS lines to wait after the last connection is up
EXTRA_SERVER_ARGS=${EXTRA_SERVER_ARGS:-}

cd "$(dirname "$0")/.."
work=$(mktemp -d)
server_pid=""
client_pid=""
cleanup() {
	[[ -n "$client_pid" ]] && kill "$client_pid" 2>/dev/null && wait "$client_pid" 2>/dev/null || true
	[[ -n "$server_pid" ]] && kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)"
if (( $(ulimit -n) < COUNT + 300 )); then
	echo "ulimit -n is $(ulimit -n); need at least $((COUNT + 300)) for $COUNT connections" >&2
	exit 1
fi

go build -o "$work/linkkeys-loadtest" ./cmd/linkkeys-loadtest
bin="$work/linkkeys-loadtest"

export TCP_MAX_CONNECTIONS=$((COUNT + 1000)) TCP_HANDSHAKE_CONCURRENCY=512 \
	TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000 \
	TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000

# shellcheck disable=SC2086
"$bin" server --db-path "$work/db.sqlite3" --info-file "$work/info.json" \
	--metrics-interval-secs "$INTERVAL" $EXTRA_SERVER_ARGS >"$work/server.out" 2>"$work/server.err" &
server_pid=$!

field() { # field NAME LINE
	sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2"
}
metrics_count() { grep -c '^METRICS ' "$work/server.out" || true; }
wait_lines() { # wait until at least $1 METRICS lines exist
	local want=$1 i
	for ((i = 0; i < 3000; i++)); do
		(( $(metrics_count) >= want )) && return 0
		kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
		sleep 0.1
	done
	echo "server printed no METRICS line for too long" >&2
	exit 1
}

wait_lines "$BASELINE_LINES"
base_line=$(grep '^METRICS ' "$work/server.out" | tail -1)
baseline=$(field process_rss_bytes "$base_line")
echo "baseline: process_rss_bytes=$baseline at 0 connections"

start=$(date +%s)
"$bin" connections --info-file "$work/info.json" --count "$COUNT" --concurrency 256 --hold-secs 3600 \
	--client-ip-base 127.0.9.0 --client-ip-count 16 --progress-every 1000000 >"$work/client.out" 2>&1 &
client_pid=$!

# Wait for every connection to be established (and parked, if parking is on).
for ((i = 0; ; i++)); do
	line=$(grep '^METRICS ' "$work/server.out" | tail -1)
	est=$(field established_connections "$line")
	if [[ "$est" == "$COUNT" ]]; then break; fi
	if ! kill -0 "$client_pid" 2>/dev/null; then
		echo "the connections client exited before the server reported $COUNT established" >&2
		cat "$work/client.out" >&2
		exit 1
	fi
	if (( i > 6000 )); then
		echo "after 10 minutes the server reports established=$est of $COUNT" >&2
		cat "$work/client.out" >&2
		exit 1
	fi
	sleep 0.1
done
ramp=$(( $(date +%s) - start ))
n=$(metrics_count)
wait_lines $((n + SETTLE_LINES))
steady=$(grep '^METRICS ' "$work/server.out" | tail -1)
rss=$(field process_rss_bytes "$steady")
fbb=$(field frame_buffer_bytes "$steady")
parked=$(field parked_connections "$steady")
cat "$work/client.out"
echo "steady:   $steady"
echo "connections=$COUNT established in ~${ramp}s; parked_connections=$parked; frame_buffer_bytes=$fbb"
echo "process_rss_bytes: baseline=$baseline steady=$rss"
awk -v r="$rss" -v b="$baseline" -v n="$COUNT" 'BEGIN { printf "server RSS per idle connection: %.1f KiB\n", (r - b) / n / 1024 }'
echo "machine:  $(go run ./cmd/loadproof machine --settings TCP_,PUBLIC_READ_ | tr -d '\n')"
