#!/usr/bin/env bash
# The measured run of docs/load-testing.md: the four results of upstream LinkKeys' documented scale
# run (docs/protocol-linkkeys.md, Scale profile) reproduced on this machine with loadproof's
# reference server and clients.
#
#   scale profile (the seed's TCP_*/PUBLIC_READ_* overrides):
#     1. connections     --count 200000 --concurrency 3000 --hold-secs 20 --attempt-timeout-secs 20
#                        --client-ip-base 127.0.1.0 --client-ip-count 64
#                        against `server --processes $PROCS` (200,000 sockets do not fit one process's
#                        20,000 open files); the client fans out to worker processes the same way
#   then a fresh one-process server, so no limiter budget is split across processes:
#     2. handshake-bench --duration-secs 15 --concurrency 256 --client-ip-base 127.0.2.0 --client-ip-count 128
#        handshake-bench ... --resume                                        (ours: resumed handshakes)
#     3. request-bench   --connections 64 --duration-secs 20                 (the seed's closed loop)
#        request-bench   --connections 64 --duration-secs 20 --pipeline 8    (ours, the ceiling; against a
#                        server whose public-read limits are raised past the scale profile's)
#   default profile (no overrides), a fresh single-process server for each:
#     4. ddos            --sources 12000 --concurrency 500 --client-ip-base 127.5.0.0
#     5. ddos            --sources 1000000 --concurrency 500 --client-ip-base 127.16.0.0 (bounded memory)
#
# Every client writes a JSON result (counts, failure reasons, HDR histograms, machine record, flags)
# and the servers' METRICS logs are kept, all under $OUT (default $TMPDIR/linkkeys-scale-<time>).
# The summary at the end is computed from those files alone.
#
# Usage: bench/linkkeys-scale.sh            the full run (about 6 minutes on the 2-core machine)
#        SMALL=1 bench/linkkeys-scale.sh    every size divided down (a check of the script itself)
#        PROCS=N                            server processes for step 1 (default 12)
# Needs: go, python3. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-scale-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN="$OUT/linkkeys-loadtest"
go build -o "$BIN" ./cmd/linkkeys-loadtest

# The seed sets `ulimit -n 300000`; this machine's hard limit is lower, so raise the soft limit
# to the hard one and let the clients fan out and the server run several processes instead.
ulimit -n "$(ulimit -Hn)"

COUNT=200000 CONC=3000 HOLD=20 HS_SECS=15 REQ_SECS=20 DDOS=12000 BIG=1000000 PROCS=${PROCS:-12}
if [ "${SMALL:-}" = 1 ]; then
  COUNT=6000 CONC=500 HOLD=3 HS_SECS=3 REQ_SECS=3 DDOS=1200 BIG=20000 PROCS=${PROCS:-2}
fi

SCALE_ENV=(TCP_MAX_CONNECTIONS=220000 TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000
  PUBLIC_READ_RATE_PER_MINUTE=6000000 PUBLIC_READ_BURST=1000000
  PUBLIC_READ_GLOBAL_RATE_PER_SECOND=100000 PUBLIC_READ_GLOBAL_BURST=200000)
# The default profile: none of the variables set, whatever the calling shell has.
CLEAN_ENV=()
. "$ROOT/bench/lib.sh"
unset_server_env
trap stop_server EXIT

# start_server NAME ENV... -- FLAGS...: start a server, wait for its info file and first METRICS line.
start_server() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "${envs[@]}" "$BIN" server --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" \
    --metrics-interval-secs 5 "$@" >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    if [ -s "$OUT/$name-info.json" ] && grep -q '^METRICS ' "$OUT/$name-server.log"; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name-server.err" >&2; echo "server $name exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "server $name did not become ready within 20s" >&2; exit 1
}

client() { # client NAME ARGS...: run a client, keep its output and JSON result
  local name=$1; shift
  echo "== $name: $*"
  "$BIN" "$@" --json "$OUT/$name.json" | tee "$OUT/$name.txt"
}

echo "== results in $OUT"
echo "== scale profile, $PROCS server processes"
start_server scale "${SCALE_ENV[@]}" -- --processes "$PROCS"
sleep 6 # one more METRICS line: the server's baseline RSS at 0 connections
client connections connections --info-file "$OUT/scale-info.json" --count "$COUNT" --concurrency "$CONC" \
  --hold-secs "$HOLD" --attempt-timeout-secs 20 --client-ip-base 127.0.1.0 --client-ip-count 64 \
  --server-metrics "$OUT/scale-server.log"
stop_server

echo "== scale profile, one server process"
start_server scale1 "${SCALE_ENV[@]}" --
client handshake-bench handshake-bench --info-file "$OUT/scale1-info.json" --duration-secs "$HS_SECS" \
  --concurrency 256 --client-ip-base 127.0.2.0 --client-ip-count 128
client handshake-bench-resume handshake-bench --info-file "$OUT/scale1-info.json" --duration-secs "$HS_SECS" \
  --concurrency 256 --client-ip-base 127.0.4.0 --client-ip-count 128 --resume
client request-bench request-bench --info-file "$OUT/scale1-info.json" --connections 64 --duration-secs "$REQ_SECS"
stop_server

# The pipelined run passes the scale profile's public-read budget (200,000 burst + 100,000/s), so it
# runs against a server with the public-read limits raised further: the raw dispatch ceiling.
echo "== scale profile with public reads unbounded, one server process"
start_server raw "${SCALE_ENV[@]}" PUBLIC_READ_BURST=1000000000 PUBLIC_READ_GLOBAL_BURST=1000000000 \
  PUBLIC_READ_RATE_PER_MINUTE=60000000000 PUBLIC_READ_GLOBAL_RATE_PER_SECOND=1000000000 --
client request-bench-pipelined request-bench --info-file "$OUT/raw-info.json" --connections 64 \
  --duration-secs "$REQ_SECS" --pipeline 8
stop_server

echo "== default profile: ddos, $DDOS sources"
start_server ddos -- --duration-secs 0
client ddos ddos --info-file "$OUT/ddos-info.json" --sources "$DDOS" --concurrency 500 \
  --client-ip-base 127.5.0.0 --server-metrics "$OUT/ddos-server.log"
stop_server

echo "== default profile: ddos, $BIG sources (memory must stay bounded)"
start_server ddos-big -- --duration-secs 0
client ddos-big ddos --info-file "$OUT/ddos-big-info.json" --sources "$BIG" --concurrency 500 \
  --client-ip-base 127.16.0.0 --progress-every 100000 --server-metrics "$OUT/ddos-big-server.log"
stop_server

python3 - "$OUT" "$COUNT" <<'PY'
import json, sys, os
out, count = sys.argv[1], int(sys.argv[2])
def res(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)
def metrics(name):
    lines = []
    with open(os.path.join(out, name + "-server.log")) as f:
        for l in f:
            if l.startswith("METRICS "):
                lines.append(json.loads(l[len("METRICS "):]))
    return lines
kib = lambda b: b / 1024
c = res("connections")
m = metrics("scale")
# Baseline: the last reading before the first connection was accepted.
base = [s for s in m if s["accepted_connections"] == 0][-1]["process_rss_bytes"]
top = max(s["established_connections"] for s in m)
held = [s for s in m if s["established_connections"] == top]
peak, steady = held[0], held[-1]  # first reading at the top (end of the ramp) and last (end of the hold)
print("== summary (from the JSON results and METRICS logs in %s)" % out)
mr = c["machines"][0]  # one record per client process; the first is the machine's
print("machine: %s, %d cores, %.1f GiB, kernel %s, nofile %s/%s, somaxconn %s, ports %s, %s, loadproof %s" % (
    mr.get("cpu_model"), mr["cores"], mr.get("memory_bytes", 0) / 2**30, mr.get("kernel"), mr.get("nofile_soft"),
    mr.get("nofile_hard"), mr.get("somaxconn"), mr.get("ip_local_port_range"), mr["go_version"], mr["loadproof_version"]))
a, h = c["attempts"], c["hold"]
print("1. connections: %d of %d established (%d failed: %s), ramp %s, held at once: %d (%d still established at the end of the hold), client processes %d" % (
    a["succeeded"], count, a["failed"], a["failure_reasons"], h["ramp_time"]["text"], h["held"], h.get("still_open_at_end", -1), len(c["segments"])))
for label, s in (("right after the ramp", peak), ("at the end of the hold", steady)):
    print("   server RSS %.1f MiB at 0 connections, %.1f MiB at %d established %s: %.2f KiB per connection; frame_buffer_bytes %d" % (
        base / 2**20, s["process_rss_bytes"] / 2**20, s["established_connections"], label,
        kib(s["process_rss_bytes"] - base) / max(s["established_connections"], 1), s["frame_buffer_bytes"]))
print("   server: handshake_timeouts %d, handshake_rejections %d, shed %d" % (steady["handshake_timeouts"], steady["handshake_rejections"],
    steady["shed_connection_limit"] + steady["shed_handshake_per_source"] + steady["shed_handshake_overflow"] + steady["shed_handshake_global"]))
print("   client RSS %.2f KiB per held connection (summed over workers, after GC)" % kib(h["client_rss_bytes_per_connection"]))
srv = c.get("server") or {}
print("   server accounting: %s" % ("; ".join("%s %d/%d %s" % (k["name"], k["client"], k["server"], "ok" if k["ok"] else "MISMATCH") for k in srv.get("checks", [])) or srv.get("note")))
def cpu(r, ops):
    parts = ["client %.1f µs" % (r["client_cpu"]["ns"] / 1e3 / max(ops, 1))]
    if r.get("server_cpu"):
        parts.append("server %.1f µs" % (r["server_cpu"]["ns"] / 1e3 / max(ops, 1)))
    return "CPU per op: " + ", ".join(parts)
print("   %s" % cpu(c, a["attempted"]))
for n in ("handshake-bench", "handshake-bench-resume"):
    hb = res(n)["handshakes"]
    print("2. %s: %d completed, %d failed over %ds: %.1f/s (full %d, resumed %d)" % (
        n, hb["completed"], hb["failed"], hb["duration_secs"], hb["handshakes_per_sec"], hb["full"], hb["resumed"]))
    print("   %s" % cpu(res(n), hb["completed"]))
for n in ("request-bench", "request-bench-pipelined"):
    q = res(n)["requests"]
    print("3. %s: %d completed, %d errors over %ds: %.1f requests/s (pipeline %d), p50 %.3f ms p99 %.3f ms" % (
        n, q["completed"], q["errors"], q["duration_secs"], q["requests_per_sec"], q["pipeline"], q["latency"]["p50_ms"], q["latency"]["p99_ms"]))
    print("   %s" % cpu(res(n), q["completed"]))
for n in ("ddos", "ddos-big"):
    d = res(n)
    dm = metrics(n)
    top = max(dm, key=lambda s: s["process_rss_bytes"] or 0)
    rss = top["process_rss_bytes"] or 0
    # The split of that reading (servers from before the split lack the fields).
    split = " (anon %.1f, file %.1f MiB)" % (top["process_rss_anon_bytes"] / 2**20, top["process_rss_file_bytes"] / 2**20) \
        if "process_rss_anon_bytes" in top else ""
    srv = d.get("server") or {}
    ok = srv.get("checks") and all(k["ok"] for k in srv["checks"])
    dl = srv.get("delta", {})
    print("4. %s: %d sources in %s: allowed %d denied %d; server: admitted %s shed global %s overflow %s per-source %s; accounting %s; server RSS max %.1f MiB%s" % (
        n, d["attempts"]["attempted"], d["elapsed"]["text"], d["attempts"]["succeeded"], d["attempts"]["failed"],
        dl.get("admitted"), dl.get("shed_handshake_global"), dl.get("shed_handshake_overflow"), dl.get("shed_handshake_per_source"),
        "exact" if ok else "MISMATCH " + str(srv.get("checks") or srv.get("note")), rss / 2**20, split))
PY
