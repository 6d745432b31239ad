#!/usr/bin/env bash
# Idle TLS connection memory of the LinkKeys reference server, as the LinkKeys capacity plan
# bench/plans/linkkeys-idle-rss.json: a fresh one-process server on the scale profile's handshake
# limiter (so the ramp is not throttled), COUNT idle TLS connections held by the `connections`
# stream for 30 s, so the server's RSS settles after the ramp. `loadproof linkkeys capacity` leaves
# the evidence bundle in $OUT/idle-rss; from the phase's server log in it (its METRICS lines) this
# prints the RSS at 0 connections (the last line before the first accept), the settled RSS (the last
# line with every connection established) and the KiB per idle connection between them, with
# frame_buffer_bytes and parked_connections at that line.
#
# Usage: bench/linkkeys-idle-rss.sh             (COUNT=15000, the plan's)
#        COUNT=5000 HOLD=60 bench/linkkeys-idle-rss.sh   (a derived plan, recorded in the bundle)
# Needs: go, jq; `ulimit -n` >= COUNT+300 for the server and for the client.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-idle-rss-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
raise_nofile
PLAN=bench/plans/linkkeys-idle-rss.json
if [ -n "${COUNT:-}${HOLD:-}" ]; then
  PLAN=$(sized_plan "$PLAN" idle-rss '
    (if $count then .phases[0].workload.held.count = $count | .phases[0].checks[0].limit = $count
       | .environment_profiles.idle.variables.TCP_MAX_CONNECTIONS = ($count + 1000 | tostring) else . end)
    | (if $hold then .phases[0].workload.held.hold_secs = $hold | .phases[0].duration_seconds = $hold else . end)' \
    --argjson count "${COUNT:-null}" --argjson hold "${HOLD:-null}")
fi
COUNT=$(jq '.phases[0].workload.held.count' "$PLAN")
if (( $(ulimit -n) < COUNT + 300 )); then
  echo "ulimit -n is $(ulimit -n); need at least $((COUNT + 300)) for $COUNT connections (raise the hard limit or lower COUNT)" >&2
  exit 2
fi
build_loadproof
run_plan "$PLAN" idle-rss

{
  machine_line idle-rss
  jq -r '.phases[0].metrics | "established \(.["held.established"]) of \(.["held.attempted"]) in \(.["held.ramp_secs"] * 10 | round / 10) s; survival \(.["held.survival_percent"]) %"' \
    "$OUT/idle-rss.report.json"
  phase_metrics idle-rss idle | jq -r '
    (map(select(.accepted_connections == 0)) | last) as $base
    | (map(.established_connections) | max) as $top
    | (map(select(.established_connections == $top)) | last) as $steady
    | if $base == null or $top == 0 then "the server log has no line at 0 connections or none with connections established: no figure"
      else "process_rss_bytes: baseline=\($base.process_rss_bytes) settled=\($steady.process_rss_bytes) at \($top) established; parked_connections=\($steady.parked_connections); frame_buffer_bytes=\($steady.frame_buffer_bytes)",
           "server RSS per idle connection: \(($steady.process_rss_bytes - $base.process_rss_bytes) / $top / 1024 * 10 | round / 10) KiB"
      end'
  echo "evidence: $OUT/idle-rss"
} | tee "$OUT/summary.txt"
