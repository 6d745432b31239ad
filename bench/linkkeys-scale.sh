#!/usr/bin/env bash
# The measured run of docs/load-testing.md: the four results of upstream LinkKeys' documented scale
# run (docs/protocol-linkkeys.md, Scale profile) reproduced on this machine with loadproof's
# reference server and clients, as the LinkKeys capacity plan bench/plans/linkkeys-scale.json:
#
#   established             200,000 held (--concurrency 3000, hold 20 s, 127.0.1.0/64) against the
#                           scale profile over $PROCS server processes (200,000 sockets do not fit
#                           one process's 20,000 open files); the client fans out to workers too
#   handshake-rate          full handshakes for 15 s, concurrency 256, one server process
#   handshake-rate-resumed  the same, resumed (ours)
#   request-rate            64 connections, one request at a time, 20 s (the seed's closed loop)
#   request-rate-pipelined  64 connections, pipeline 8, public-read limits raised (ours, the ceiling)
#   ddos                    12,000 sources against the default profile
#   ddos-many-sources       1,000,000 sources against the default profile (memory must stay bounded)
#
# Every phase gets a fresh server started and verified by `loadproof linkkeys capacity`; the run
# leaves its evidence bundle in $OUT/scale (evidence.json, one results file and one server log per
# phase, manifest.json with their SHA-256). The summary is read from `loadproof report --format json`
# of that bundle alone. This script keeps what needs the OS: the open-file limit.
#
# Usage: bench/linkkeys-scale.sh            the full run (about 6 minutes on the 2-core machine)
#        SMALL=1 bench/linkkeys-scale.sh    bench/plans/linkkeys-scale-small.json: every size divided
#                                           down (a check of the bench itself)
#        PROCS=N                            server processes for the established phase (default: the plan's)
# Needs: go, jq. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
need_tools go jq
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-scale-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
build_loadproof
# The seed sets `ulimit -n 300000`; this machine's hard limit is lower, so raise the soft limit
# to the hard one and let the clients fan out and the server run several processes instead.
raise_nofile

PLAN=bench/plans/linkkeys-scale.json
[ "${SMALL:-}" = 1 ] && PLAN=bench/plans/linkkeys-scale-small.json
if [ -n "${PROCS:-}" ]; then
  PLAN=$(sized_plan "$PLAN" scale '.environment_profiles["scale-processes"].processes = $n' --argjson n "$PROCS")
fi
echo "== results in $OUT"
run_plan "$PLAN" scale

echo "== summary (from loadproof report --format json $OUT/scale)"
{
machine_line scale
jq -r '
  def phase($n): .phases[] | select(.name == $n);
  def m($n; $k): (phase($n).metrics[$k]);
  def kib: . / 1024 * 100 | round / 100;
  def mib: . / 1048576 * 10 | round / 10;
  def cpu($n): phase($n).results.cpu_per | "CPU per \(.success_unit): client \(.client_per_success.ns / 1000 | round) µs, server \((.server_per_success.ns // 0) / 1000 | round) µs";
  "1. established: \(m("established"; "held.established")) of \(m("established"; "held.attempted")) (\(m("established"; "held.failed")) failed), ramp \(m("established"; "held.ramp_secs") * 10 | round / 10) s, survival \(m("established"; "held.survival_percent")) %",
  "   server RSS \(m("established"; "server.rss_baseline_bytes") | mib) MiB at 0 connections, peak \(m("established"; "server.rss_peak_bytes") | mib) MiB: \(m("established"; "server.rss_bytes_per_connection") | kib) KiB per connection; frame_buffer_bytes idle \(m("established"; "server.frame_buffer_bytes_idle")); accounting gap \(m("established"; "server.accounting_gap"))",
  "   " + cpu("established"),
  (("handshake-rate", "handshake-rate-resumed") as $n |
    "2. \($n): \(m($n; "handshakes.completed")) completed, \(m($n; "handshakes.failed")) failed: \(m($n; "handshakes.rate")) /s (full \(m($n; "handshakes.full")), resumed \(m($n; "handshakes.resumed"))), p99 \(m($n; "handshakes.p99_ms")) ms",
    "   " + cpu($n)),
  (("request-rate", "request-rate-pipelined") as $n |
    "3. \($n): \(m($n; "requests.completed")) completed, \(m($n; "requests.errors")) errors: \(m($n; "requests.rate")) requests/s, p50 \(m($n; "requests.p50_ms")) ms p99 \(m($n; "requests.p99_ms")) ms",
    "   " + cpu($n)),
  (("ddos", "ddos-many-sources") as $n |
    "4. \($n): \(m($n; "ddos.attempted")) sources: allowed \(m($n; "ddos.allowed")) denied \(m($n; "ddos.denied")); server: admitted \(m($n; "ddos.admitted")) shed global \(m($n; "ddos.shed_global")) overflow \(m($n; "ddos.shed_overflow")) per-source \(m($n; "ddos.shed_per_source")); accounting gap \(m($n; "server.accounting_gap")); server RSS peak \(m($n; "server.rss_peak_bytes") | mib) MiB"),
  "checks: \(if .passed then "all passed" else "some failed (see \($out)/scale.txt)" end); evidence \($out)/scale"
' --arg out "$OUT" "$OUT/scale.report.json"
} | tee "$OUT/summary.txt"
