#!/usr/bin/env bash
# Distinct-source ddos at scale against the default profile, as the LinkKeys capacity plan
# bench/plans/linkkeys-ddos-sources.json: one attempt from each of 10,000,000 source addresses (from
# 127.16.0.0, all inside 127/8) against a fresh one-process reference server with no TCP_* or
# PUBLIC_READ_* variable, to show the limiter's memory stays bounded however many distinct sources
# arrive. `loadproof linkkeys capacity` starts and verifies the server and leaves the evidence bundle
# in $OUT/ddos-sources; the accounting and the RSS figures are read from `loadproof report --format
# json` of it, the RSS at each millionth source from the phase's server log in the bundle.
#
# The server is loadproof's `linkkeys server` (the one binary); the lean linkkeys-server against it,
# side by side, is bench/linkkeys-ddos-rss.sh.
#
# Usage: bench/linkkeys-ddos-sources.sh              (about 11 minutes on the 2-core machine)
#        SOURCES=1000000 bench/linkkeys-ddos-sources.sh   (a derived plan, recorded in the bundle)
# Needs: go, jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-ddos-sources-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
build_loadproof
raise_nofile
PLAN=bench/plans/linkkeys-ddos-sources.json
if [ -n "${SOURCES:-}" ]; then
  PLAN=$(sized_plan "$PLAN" ddos-sources '.phases[0].workload.ddos[0].sources = $n' --argjson n "$SOURCES")
fi
echo "== results in $OUT"
PLAN_ENV=(-u GOGC)
run_plan "$PLAN" ddos-sources

{
  machine_line ddos-sources
  jq -r '.phases[0].metrics as $m | def mib: . / 1048576 * 10 | round / 10;
    "ddos: \($m["ddos.attempted"]) sources: allowed \($m["ddos.allowed"]) denied \($m["ddos.denied"]); server: admitted \($m["ddos.admitted"]) shed global \($m["ddos.shed_global"]) overflow \($m["ddos.shed_overflow"]) per-source \($m["ddos.shed_per_source"]); accounting gap \($m["server.accounting_gap"])",
    "server RSS at the start \($m["server.rss_baseline_bytes"] | mib) MiB, peak \($m["server.rss_peak_bytes"] | mib) MiB"' \
    "$OUT/ddos-sources.report.json"
  phase_metrics ddos-sources ddos-sources | jq -r '
    def mib: (. // 0) / 1048576 * 10 | round / 10;
    def line: "\(.process_rss_bytes | mib) MiB (anon \(.process_rss_anon_bytes | mib), file \(.process_rss_file_bytes | mib)) at \(.accepted_connections) accepted";
    . as $ms | range(1000000; ($ms | map(.accepted_connections) | max) + 1; 1000000) as $step
    | ($ms | map(select(.accepted_connections >= $step)) | first) | "   first line past \($step) sources: \(line)"'
  echo "evidence: $OUT/ddos-sources"
} | tee "$OUT/summary.txt"
