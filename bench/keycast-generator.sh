#!/usr/bin/env bash
# Cost of the Keycast load generator: requests per client CPU-second of `keycast-loadtest run`
# next to wrk, bombardier, hey and vegeta, against the same reference server, method and
# connection count, in one run, interleaved round by round so that the machine's noise hits every
# tool alike.
#
# Usage: bench/keycast-generator.sh [rounds] [duration_seconds] [connections] [method]
#   defaults: 3 rounds, 10 s, 50 connections, get-public-key (warm-cache: one user, so every tool
#   sends the same request). Needs go, taskset, curl and jq. hey (github.com/rakyll/hey), vegeta
#   (github.com/tsenart/vegeta/v12) and bombardier (github.com/codesenberg/bombardier) are
#   installed with `go install` into a temporary GOBIN (GOBIN_CACHE names a directory that already
#   holds them, to skip the install); wrk comes from Debian (installed with apt-get when missing
#   and running as root) and sends bench/keycast-rpc.lua's static request (no Lua per request).
#   A tool that cannot be had is printed and left out.
#
# Layout, as docs/benchmarks.md and the machine baseline use it: the server on core 1 with
# GOMAXPROCS=1, every client on core 0. Client CPU is user+system time of the client process
# (bash's `time`), so requests per client CPU-second = completed requests / (user+sys).
#
# Output: the machine record, one line per measurement, then medians and the ratios
# docs/benchmarks.md quotes ("ours/wrk", "ours/bombardier", "ours/hey", "ours/vegeta"), per round
# and of the medians.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-10}
CONN=${3:-50}
METHOD=${4:-get-public-key}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

. "$ROOT/bench/lib.sh"
need_tools go taskset curl jq
case "$METHOD" in
  get-public-key) RPC='{"method":"get_public_key","params":[]}' ;;
  *) echo "only get-public-key sends the same bytes from every tool; got $METHOD" >&2; exit 2 ;;
esac

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== machine"
go run ./cmd/loadproof machine --settings KEYCAST_,HANDLER_CACHE_SIZE,GOMAXPROCS
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

go build -o "$WORK/kl" ./cmd/keycast-loadtest
mkdir -p "$WORK/gobin"
HAVE_HEY=0 HAVE_VEGETA=0 HAVE_BOMBARDIER=0 HAVE_WRK=0
# go_tool NAME MODULE: installs MODULE@latest as $WORK/gobin/NAME, or copies it from GOBIN_CACHE.
go_tool() {
  if [ -n "${GOBIN_CACHE:-}" ] && [ -x "$GOBIN_CACHE/$1" ]; then
    cp "$GOBIN_CACHE/$1" "$WORK/gobin/$1"
  elif ! GOBIN="$WORK/gobin" go install "$2@latest" >"$WORK/$1-install.log" 2>&1; then
    echo "== $1: the module proxy refused $2@latest: $(tail -1 "$WORK/$1-install.log")"
    return 1
  fi
}
go_tool hey github.com/rakyll/hey && HAVE_HEY=1
go_tool vegeta github.com/tsenart/vegeta/v12 && HAVE_VEGETA=1
go_tool bombardier github.com/codesenberg/bombardier && HAVE_BOMBARDIER=1
if ! command -v wrk >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; } || true
fi
if command -v wrk >/dev/null; then HAVE_WRK=1; else echo "== wrk: not installed (apt-get install -y wrk); left out"; fi

for tool in hey vegeta bombardier; do
  [ -x "$WORK/gobin/$tool" ] && echo "== $tool $(go version -m "$WORK/gobin/$tool" | awk '$1 == "mod" {print $2, $3}')"
done
[ "$HAVE_WRK" = 1 ] && echo "== wrk $(wrk --version 2>&1 | head -1)"

PORT=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$PORT"
GOMAXPROCS=1 KEYCAST_BCRYPT_COST=4 PORT=$PORT taskset -c 1 "$WORK/kl" server --data-dir "$WORK/data" \
  >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS "$URL/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.err" >&2; exit 1; }
  sleep 0.1
done
"$WORK/kl" setup --url "$URL" --users 4 --concurrency 2 --output "$WORK/users.json" >/dev/null 2>"$WORK/setup.err" \
  || { cat "$WORK/setup.err" >&2; exit 1; }
TOKEN=$(jq -r '.users[0].ucan_token' "$WORK/users.json")
PUBKEY=$(jq -r '.users[0].pubkey' "$WORK/users.json")
printf '%s' "$RPC" >"$WORK/body.json"
printf 'POST %s/api/nostr\nAuthorization: Bearer %s\nContent-Type: application/json\n@%s\n' "$URL" "$TOKEN" "$WORK/body.json" >"$WORK/targets.txt"

# cpu_of <file>: user+sys seconds from bash's `time` output ("real user sys").
cpu_of() { awk '{printf "%.3f", $2 + $3}' "$1"; }

# Each measure_* prints "<tool> <requests> <successes> <cpu_seconds>".
measure_ours() {
  local t="$WORK/time.ours"
  { TIMEFORMAT='%R %U %S'; time taskset -c 0 "$WORK/kl" run --url "$URL" --users-file "$WORK/users.json" \
      -c "$CONN" -d "$DUR" --ramp-up 0 -s warm-cache -m "$METHOD" -o "$WORK/ours.json" >/dev/null 2>"$WORK/ours.err"; } 2>"$t"
  echo "ours $(jq -r '.summary.total_requests' "$WORK/ours.json") $(jq -r '.summary.successful_requests' "$WORK/ours.json") $(cpu_of "$t")"
}
measure_hey() {
  local t="$WORK/time.hey"
  { TIMEFORMAT='%R %U %S'; time taskset -c 0 "$WORK/gobin/hey" -z "${DUR}s" -c "$CONN" -m POST \
      -H "Authorization: Bearer $TOKEN" -T application/json -d "$RPC" "$URL/api/nostr" >"$WORK/hey.out" 2>&1; } 2>"$t"
  local total ok
  total=$(awk '/\[[0-9]+\]/ {s += $2} END {print s + 0}' "$WORK/hey.out")
  ok=$(awk '/\[200\]/ {print $2}' "$WORK/hey.out")
  echo "hey $total ${ok:-0} $(cpu_of "$t")"
}
measure_vegeta() {
  local t="$WORK/time.vegeta"
  { TIMEFORMAT='%R %U %S'; time taskset -c 0 "$WORK/gobin/vegeta" attack -targets "$WORK/targets.txt" -rate 0 \
      -max-workers "$CONN" -workers "$CONN" -duration "${DUR}s" -output "$WORK/vegeta.bin" 2>"$WORK/vegeta.err"; } 2>"$t"
  "$WORK/gobin/vegeta" report -type=json "$WORK/vegeta.bin" >"$WORK/vegeta.json"
  local total ok
  total=$(jq -r '.requests' "$WORK/vegeta.json")
  ok=$(jq -r '.status_codes["200"] // 0' "$WORK/vegeta.json")
  echo "vegeta $total $ok $(cpu_of "$t")"
}

measure_wrk() {
  local t="$WORK/time.wrk"
  { TIMEFORMAT='%R %U %S'; time KC_TOKEN=$TOKEN KC_METHOD=get_public_key KC_PUBKEY=$PUBKEY taskset -c 0 wrk -t1 \
      -c"$CONN" -d"${DUR}s" -s bench/keycast-rpc.lua "$URL" >"$WORK/wrk.out" 2>&1; } 2>"$t"
  local total non2xx
  total=$(sed -n 's/.* requests=\([0-9]*\) .*/\1/p' "$WORK/wrk.out")
  non2xx=$(sed -n 's/.* non2xx=\([0-9]*\) .*/\1/p' "$WORK/wrk.out")
  echo "wrk ${total:-0} $((${total:-0} - ${non2xx:-0})) $(cpu_of "$t")"
}
measure_bombardier() {
  local t="$WORK/time.bombardier"
  { TIMEFORMAT='%R %U %S'; time taskset -c 0 "$WORK/gobin/bombardier" -c "$CONN" -d "${DUR}s" -m POST \
      -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" -b "$RPC" -p r -o json \
      "$URL/api/nostr" >"$WORK/bombardier.json" 2>"$WORK/bombardier.err"; } 2>"$t"
  local total ok
  total=$(jq -r '.result | .req1xx + .req2xx + .req3xx + .req4xx + .req5xx + .others' "$WORK/bombardier.json")
  ok=$(jq -r '.result.req2xx' "$WORK/bombardier.json")
  echo "bombardier $total $ok $(cpu_of "$t")"
}

# A short warm-up fills the server's handler cache and lets the CPU settle.
taskset -c 0 "$WORK/kl" run --url "$URL" --users-file "$WORK/users.json" -c "$CONN" -d 2 --ramp-up 0 \
  -s warm-cache -m "$METHOD" -o "$WORK/warmup.json" >/dev/null 2>&1

echo "== measurements: round tool requests successes client_cpu_s req_per_client_cpu_s"
: >"$WORK/all.txt"
for round in $(seq 1 "$ROUNDS"); do
  tools="ours"
  [ "$HAVE_WRK" = 1 ] && tools="$tools wrk"
  [ "$HAVE_BOMBARDIER" = 1 ] && tools="$tools bombardier"
  [ "$HAVE_HEY" = 1 ] && tools="$tools hey"
  [ "$HAVE_VEGETA" = 1 ] && tools="$tools vegeta"
  for tool in $tools; do
    line=$("measure_$tool")
    set -- $line
    rate=$(awk -v r="$2" -v c="$4" 'BEGIN {printf "%.0f", (c > 0 ? r / c : 0)}')
    echo "$round $line $rate" | tee -a "$WORK/all.txt"
  done
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.0f", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "== medians (requests per client CPU-second)"
OURS=$(awk '$2 == "ours" {print $6}' "$WORK/all.txt" | median)
echo "ours   $OURS"
# ratio NAME FLAG: the median and per-round ratios of ours to NAME.
ratio() {
  [ "$2" = 1 ] || return 0
  local m
  m=$(awk -v t="$1" '$2 == t {print $6}' "$WORK/all.txt" | median)
  printf '%-10s %s\n' "$1" "$m"
  awk -v o="$OURS" -v m="$m" -v t="$1" 'BEGIN {printf "ours/%s of the medians: %.2f\n", t, (m > 0 ? o / m : 0)}'
  local per
  per=$(awk -v t="$1" '$2 == "ours" {o[$1] = $6} $2 == t {h[$1] = $6} END {for (r = 1; r in o; r++) if (h[r] > 0) printf "%.3f ", o[r] / h[r]; print ""}' "$WORK/all.txt")
  echo "per-round ours/$1: $per(median $(printf '%s\n' $per | sort -n | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f", (a[NR / 2] + a[NR / 2 + 1]) / 2}'))"
}
ratio wrk "$HAVE_WRK"
ratio bombardier "$HAVE_BOMBARDIER"
ratio hey "$HAVE_HEY"
ratio vegeta "$HAVE_VEGETA"
