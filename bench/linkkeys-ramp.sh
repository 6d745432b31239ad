#!/usr/bin/env bash
# The 200,000-connection ramp against the isolated handshake rate, measured in the same run, as the
# LinkKeys capacity plan bench/plans/linkkeys-ramp.json:
#
#   isolated-before  a fresh one-process scale-profile server, full handshakes for 15 s at
#                    concurrency 256 (connect + handshake + close, nothing held)
#   ramp             a fresh scale-profile server over $PROCS processes, 200,000 held connections at
#                    concurrency 3000, held 5 s; its ramp time is the figure
#   isolated-after   as isolated-before
#
# and the ratio: (established / ramp seconds) / the mean of the two isolated rates; the summary
# warns when those two differ by more than 10 % (the machine's speed changed during the run). Each
# variant and round is one `loadproof linkkeys capacity` run, so each leaves an evidence bundle
# ($OUT/r<round>-<variant>); the figures are read from `loadproof report --format json` of it.
#
# VARIANTS lists the settings to compare, each a word. What stays here is what needs the OS or the
# process environment; the rest is the plan:
#   default         the tree as built
#   old             $OLD_LOADPROOF (a loadproof built from the tree before a change) runs the plan,
#                   so its servers and clients too: the change against what it replaces, same run
#   gomaxprocs=N    GOMAXPROCS=N for the server and the clients (every server child, every worker)
#   gogc=N          GOGC=N for the server and the clients (turns the server's own GC pacer off)
#   madvfree        GODEBUG=madvdontneed=0 on both sides (freed pages returned with MADV_FREE)
#   hsconc=N        the profiles' TCP_HANDSHAKE_CONCURRENCY (handshakes at once, per process) set to N
#                   instead of 1024 (a derived plan, recorded in the bundle)
#   thp=MODE        /sys/kernel/mm/transparent_hugepage/enabled set to MODE (always, madvise, never)
#                   for that run, restored afterwards
#   backlog=N       net.core.netdev_max_backlog set to N for that run, restored afterwards
# Loopback packets dropped at that backlog (/proc/net/softnet_stat) are counted over each run (all
# three phases) and printed. ROUNDS repeats the lot, the variants interleaved, so a noisy machine
# hits them alike. The variants that set one side only or a server or client flag (servergogc,
# clientgogc, norelease, sequential, spread, seqserver, seqclient) ran the commands by hand before
# the plans; the capacity plan carries no per-side flag, so they are gone (their figures stay in
# docs/load-testing.md).
#
# Usage: bench/linkkeys-ramp.sh                               default only, one round (~3.5 min of load
#                                                             and the capacity command's settle waits)
#        VARIANTS="default gomaxprocs=2" ROUNDS=2 bench/linkkeys-ramp.sh
#        OLD_LOADPROOF=/tmp/old/loadproof VARIANTS="old default" ROUNDS=2 bench/linkkeys-ramp.sh
#        COUNT=50000 bench/linkkeys-ramp.sh                   a smaller ramp (a derived plan)
#        PROCS=4 HS_SECS=5 bench/linkkeys-ramp.sh             server processes, isolated seconds
# Needs: go, jq. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-ramp-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
build_loadproof
raise_nofile
NEW_LOADPROOF=$LOADPROOF
ROUNDS=${ROUNDS:-1} VARIANTS=${VARIANTS:-default}

# The plan, sized when COUNT, PROCS or HS_SECS are given (TCP_MAX_CONNECTIONS stays 1.1 × COUNT).
PLAN=bench/plans/linkkeys-ramp.json
if [ -n "${COUNT:-}${PROCS:-}${HS_SECS:-}" ]; then
  PLAN=$(sized_plan "$PLAN" ramp '
    (if $count then (.phases[] | select(.name == "ramp") | .workload.held.count) = $count
       | .environment_profiles[].variables.TCP_MAX_CONNECTIONS = ($count * 11 / 10 | floor | tostring) else . end)
    | (if $procs then .environment_profiles["scale-processes"].processes = $procs else . end)
    | (if $hs then (.phases[] | select(.name != "ramp") | .duration_seconds) = $hs else . end)' \
    --argjson count "${COUNT:-null}" --argjson procs "${PROCS:-null}" --argjson hs "${HS_SECS:-null}")
fi
COUNT=$(jq '.phases[] | select(.name == "ramp") | .workload.held.count' "$PLAN")

OLD_BACKLOG=$(cat /proc/sys/net/core/netdev_max_backlog)
THP=/sys/kernel/mm/transparent_hugepage/enabled
OLD_THP=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP" 2>/dev/null || true)
restore() {
  echo "$OLD_BACKLOG" >/proc/sys/net/core/netdev_max_backlog 2>/dev/null || true
  [ -z "$OLD_THP" ] || echo "$OLD_THP" >"$THP" 2>/dev/null || true
}
trap restore EXIT
drops() { awk '{ s += strtonum("0x" $2) } END { print s }' /proc/net/softnet_stat; }

echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee "$OUT/machine.txt"
TAGS=()
for round in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    venv=() vplan=$PLAN LOADPROOF=$NEW_LOADPROOF
    restore
    case $v in
      default) ;;
      old) LOADPROOF=${OLD_LOADPROOF:?the variant old needs OLD_LOADPROOF, the path of a loadproof built from the old tree} ;;
      gomaxprocs=*) venv=(GOMAXPROCS="${v#gomaxprocs=}") ;;
      gogc=*) venv=(GOGC="${v#gogc=}") ;;
      madvfree) venv=(GODEBUG=madvdontneed=0) ;;
      hsconc=*) vplan=$(sized_plan "$PLAN" "hsconc-${v#hsconc=}" '.environment_profiles[].variables.TCP_HANDSHAKE_CONCURRENCY = $n' --arg n "${v#hsconc=}") ;;
      thp=*) echo "${v#thp=}" >"$THP" || { echo "cannot set $THP (needs root)" >&2; exit 2; } ;;
      backlog=*) echo "${v#backlog=}" >/proc/sys/net/core/netdev_max_backlog || { echo "cannot set netdev_max_backlog (needs root)" >&2; exit 2; } ;;
      servergogc=* | clientgogc=* | norelease | sequential | spread | seqserver | seqclient)
        echo "variant $v: it set one side or a server/client flag, which a capacity plan does not carry; see the header of $0" >&2; exit 2 ;;
      *) echo "unknown variant $v (see the header of $0)" >&2; exit 2 ;;
    esac
    tag="r$round-$v"
    d0=$(drops)
    PLAN_ENV=(-u GOMAXPROCS -u GOGC -u GODEBUG ${venv[@]+"${venv[@]}"})
    run_plan "$vplan" "$tag"
    echo $(( $(drops) - d0 )) >"$OUT/$tag.drops"
    TAGS+=("$tag")
  done
done
restore

{
  printf '%-22s %19s %12s %8s %10s %22s %22s %10s\n' run "isolated/s (bef/aft)" ramp/s ratio ramp "hs CPU µs (cli+srv)" "ramp CPU µs (cli+srv)" "lo drops"
  for tag in "${TAGS[@]}"; do
    jq -r --arg tag "$tag" --arg drops "$(cat "$OUT/$tag.drops")" --argjson count "$COUNT" '
      def phase($n): .phases[] | select(.name == $n);
      def cpu($n): phase($n).results.cpu_per | "\(.client_per_attempt.ns / 1000 | round) + \((.server_per_attempt.ns // 0) / 1000 | round)";
      phase("isolated-before").metrics["handshakes.rate"] as $b | phase("isolated-after").metrics["handshakes.rate"] as $a |
      phase("ramp").metrics as $r | ($r["held.established"] / $r["held.ramp_secs"]) as $rate |
      "\($tag | .[0:22] | . + " " * (22 - length)) \($b * 10 | round / 10)/\($a * 10 | round / 10)  \($rate * 10 | round / 10) \(100 * $rate / (($b + $a) / 2) * 10 | round / 10)% \($r["held.ramp_secs"] * 10 | round / 10)s  \(cpu("isolated-before"))  \(cpu("ramp"))  \($drops)  (\($r["held.established"]) of \($count) established)",
      (if (($b - $a) | fabs) > 0.1 * ([$b, $a] | min) then
        "WARNING: \($tag): the isolated readings before and after the ramp differ by \(100 * (($b - $a) | fabs) / ([$b, $a] | min) | round)% (\($b) and \($a)/s): the machine'"'"'s speed changed during the run; the ratio against either is \(100 * $rate / $b | round)% or \(100 * $rate / $a | round)%"
       else empty end)' "$OUT/$tag.report.json"
  done
  echo "ratio: ramp connections/s over the mean of the two isolated readings; lo drops over the whole run of the plan"
  echo "evidence bundles: $OUT/<run>"
} | tee "$OUT/summary.txt"
