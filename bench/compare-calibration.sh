#!/usr/bin/env bash
# Calibration of `loadproof compare` on real Keycast runs (docs/benchmarks.md, Compare calibration;
# docs/compare.md, Calibration): interleaved A/B `keycast run` against the reference server on
# loopback, then `compare` of the two sides.
#
# (a) identical configurations: two reference servers started with the same settings
#     (KEYCAST_CPU_SLOTS=1, GOMAXPROCS=1, both pinned to core 1), the generator on core 0, an
#     open-model sign-event run at RATE requests/s. REPS comparisons of RUNS runs a side; the runs
#     alternate A, B, A, B … (B first in every other comparison). Counted: how many comparisons say
#     "no change" at CONF on every metric, on the headline metrics (throughput, p99 latency), and
#     per metric.
# (b) KEYCAST_CPU_SLOTS=2 (A) against =1 (B): two servers on both cores (GOMAXPROCS=2, unpinned),
#     as is the generator, closed model (-c CONC, no rate), REPS_B comparisons of RUNS_B runs a side,
#     interleaved the same way. Expected: B worse on throughput and latency.
# (c) a deliberately slower server: KEYCAST_FAST_PATH=on (A) against =off (B: every request through
#     net/http, about 40 % more server CPU per sign_event), both servers on core 1 (GOMAXPROCS=1),
#     the generator on core 0, closed model, REPS_B comparisons of RUNS_B runs a side.
#
#   bench/compare-calibration.sh                                        the figure run (about 15 minutes)
#   REPS=2 REPS_B=1 RUNS=2 RUNS_B=2 DUR=1 bench/compare-calibration.sh  a quick check of the script
#   REPS=0 bench/compare-calibration.sh                                 (b) and (c) only
#
# Every run is bounded by -d DUR seconds (--ramp-up 0). Loopback only. The servers are stopped on
# exit. Results (every run file, every comparison as JSON) stay in OUT.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go taskset jq
REPS=${REPS:-20} REPS_B=${REPS_B:-3} RUNS=${RUNS:-3} RUNS_B=${RUNS_B:-5} DUR=${DUR:-3} RATE=${RATE:-1000} CONC=${CONC:-64}
CONF=${CONF:-0.95} USERS=${USERS:-20}
OUT=${OUT:-${TMPDIR:-/tmp}/compare-calibration-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/loadproof"
go build -o "$BIN" ./cmd/loadproof
build_benchsum
"$BIN" machine >"$OUT/machine.txt" 2>&1 || true

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap cleanup EXIT

# start_server NAME SLOTS GOMAXPROCS CPUS [FAST_PATH]: a reference server on a free loopback port,
# its users file set up; sets URL_<NAME>.
start_server() {
  local name=$1 slots=$2 procs=$3 cpus=$4 fast=${5:-on} port
  port=$((20000 + RANDOM % 20000))
  env KEYCAST_CPU_SLOTS="$slots" GOMAXPROCS="$procs" KEYCAST_FAST_PATH="$fast" taskset -c "$cpus" "$BIN" keycast server \
    --addr "127.0.0.1:$port" --data-dir "$OUT/data-$name" >"$OUT/server-$name.log" 2>"$OUT/server-$name.err" &
  PIDS+=($!)
  local i
  for i in $(seq 300); do
    grep -q 'listening on' "$OUT/server-$name.log" && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "server $name exited: $(cat "$OUT/server-$name.err")" >&2; exit 1; }
    sleep 0.1
  done
  grep -q 'listening on' "$OUT/server-$name.log" || { echo "server $name did not listen within 30 s" >&2; exit 1; }
  "$BIN" keycast setup --url "http://127.0.0.1:$port" --users "$USERS" -c 4 -o "$OUT/users-$name.json" >"$OUT/setup-$name.log" 2>&1
  printf -v "URL_$name" '%s' "http://127.0.0.1:$port"
}

# one_run NAME FILE CPUS ARGS...: one bounded keycast run against server NAME.
one_run() {
  local name=$1 file=$2 cpus=$3 url
  shift 3
  url=URL_$name
  taskset -c "$cpus" "$BIN" keycast run --url "${!url}" --users-file "$OUT/users-$name.json" -d "$DUR" --ramp-up 0 \
    -m sign-event "$@" -o "$file" >"$file.log" 2>&1 || echo "run $file exit $? (see $file.log)"
}

# series PART X Y REPS NRUNS CPUS ARGS...: REPS comparisons of NRUNS runs on server X (side A) and Y
# (side B), interleaved, then compare of each.
series() {
  local part=$1 x=$2 y=$3 reps=$4 nruns=$5 cpus=$6 r i
  shift 6
  for r in $(seq "$reps"); do
    for i in $(seq "$nruns"); do
      if (((r + i) % 2 == 0)); then
        one_run "$x" "$OUT/$part-$r-a$i.json" "$cpus" "$@"
        one_run "$y" "$OUT/$part-$r-b$i.json" "$cpus" "$@"
      else
        one_run "$y" "$OUT/$part-$r-b$i.json" "$cpus" "$@"
        one_run "$x" "$OUT/$part-$r-a$i.json" "$cpus" "$@"
      fi
    done
    local as=() bs=()
    for i in $(seq "$nruns"); do as+=("$OUT/$part-$r-a$i.json"); bs+=("$OUT/$part-$r-b$i.json"); done
    "$BIN" compare --confidence "$CONF" --seed "$r" --format json -o "$OUT/$part-$r-compare.json" \
      "${as[@]}" --vs "${bs[@]}" >/dev/null 2>"$OUT/$part-$r-compare.err" || echo "compare $part $r exit $?"
    echo "$part $r done $(date -u +%T), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  done
}

echo "== $(jq -r '"\(.cpu_model) \(.cores) cores, kernel \(.kernel) \(.go_version)"' "$OUT/machine.txt" 2>/dev/null || echo "machine record: $OUT/machine.txt"); load average $(cut -d' ' -f1-3 /proc/loadavg); out $OUT"
t0=$(date +%s)
if ((REPS > 0)); then
  start_server a1 1 1 1
  start_server a2 1 1 1
  echo "== (a) identical: two servers KEYCAST_CPU_SLOTS=1 GOMAXPROCS=1 on core 1; sign-event --rate $RATE, ${DUR}s runs, $RUNS a side, $REPS comparisons"
  series ident a1 a2 "$REPS" "$RUNS" 0 --rate "$RATE" -c 256
  cleanup
fi
t1=$(date +%s)
start_server s2 2 2 0,1
start_server s1 1 2 0,1
echo "== (b) KEYCAST_CPU_SLOTS=2 (A) against =1 (B), servers and generator on cores 0-1 (GOMAXPROCS=2); sign-event closed, -c $CONC, ${DUR}s runs, $RUNS_B a side, $REPS_B comparisons"
series slots s2 s1 "$REPS_B" "$RUNS_B" 0,1 -c "$CONC"
cleanup
t2=$(date +%s)
start_server fon 1 1 1 on
start_server foff 1 1 1 off
echo "== (c) KEYCAST_FAST_PATH=on (A) against =off (B, every request through net/http), servers on core 1 (GOMAXPROCS=1), generator on core 0; sign-event closed, -c $CONC, ${DUR}s runs, $RUNS_B a side, $REPS_B comparisons"
series fast fon foff "$REPS_B" "$RUNS_B" 0 -c "$CONC"
cleanup
t3=$(date +%s)
echo "== minutes: (a) $(((t1 - t0) / 60)), (b) $(((t2 - t1) / 60)), (c) $(((t3 - t2) / 60)); load average $(cut -d' ' -f1-3 /proc/loadavg)"

benchsum calibration "$OUT" "$REPS" "$REPS_B" "$RUNS" "$RUNS_B"
echo "results in $OUT"
