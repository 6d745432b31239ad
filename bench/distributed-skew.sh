#!/usr/bin/env bash
# Start skew of a coordinated start across N local workers (docs/benchmarks.md, Distributed runs):
# starts the reference Keycast server, creates users, runs `loadproof coordinate --workers N` RUNS
# times with a small count-bound run, and prints each run's spread of the workers' measured engine
# starts (coordinator clock) and their largest distance from the intended instant.
#   bench/distributed-skew.sh [N=16] [RUNS=5]
set -euo pipefail
N=${1:-16}
RUNS=${2:-5}
. "$(dirname "$0")/lib.sh"
need_tools go curl
build_benchsum
dir=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/loadproof" ./cmd/loadproof
port=$((20000 + RANDOM % 20000))
"$dir/loadproof" keycast server --addr 127.0.0.1:$port --data-dir "$dir/data" >"$dir/server.log" 2>&1 &
srv=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:$port/health >/dev/null && break; sleep 0.2; done
"$dir/loadproof" keycast setup --url http://127.0.0.1:$port --users 4 -c 2 -o "$dir/users.json" 2>/dev/null
for r in $(seq "$RUNS"); do
  "$dir/loadproof" coordinate --workers "$N" --manifest "$dir/m$r.json" -- keycast run --url http://127.0.0.1:$port \
    --users-file "$dir/users.json" -d 0 -n $((N * 20)) -c "$N" -m get-public-key --ramp-up 0 -o "$dir/r$r.json" 2>/dev/null >/dev/null
  benchsum skew "$dir/m$r.json"
done
