#!/usr/bin/env bash
# Full TLS 1.3 handshakes against the crypto bound, with server and client pinned to one core each
# (docs/benchmarks.md, "LinkKeys handshakes against the crypto bound"):
#
#   server   scale profile (bench/linkkeys-scale.sh's TCP_*/PUBLIC_READ_* overrides), one process,
#            `taskset -c $SERVER_CORE`, GOMAXPROCS=1
#   client   handshake-bench --duration-secs $SECS --concurrency $CONCURRENCY (256) --client-ip-base 127.0.2.0
#            --client-ip-count 128, `taskset -c $CLIENT_CORE`, GOMAXPROCS=1
#   crypto   the per-operation benchmarks of internal/linkkeys (handshake_bench_test.go), pinned to
#            one core with -test.cpu 1, before and after the end-to-end runs (a warning when a side's
#            two readings differ by more than 5 %: the machine's speed changed); the faster reading of
#            each is kept, so the bound is the higher one the run saw
#
# It prints, per run: full handshakes/s, server and client CPU per handshake (the result JSON's
# server_cpu and client_cpu over completed handshakes), handshakes per server and per client
# core-second, and the share of the crypto bound reached: with one core per side, handshakes/s
# cannot exceed 1 / max(server crypto, client crypto), and each side alone 1 / its own crypto per
# core-second. Then the machine record of the client's result.
#
# Usage: bench/linkkeys-handshake-pinned.sh [OLD_BINARY]
#   With OLD_BINARY, both builds run alternately, $ROUNDS rounds (server and client of the same
#   build each time), and the summary adds new/old ratios per round: the side-by-side comparison of
#   a change. NEW defaults to a build of this tree.
#   SECS=15 ROUNDS=1 (2 with OLD_BINARY) SERVER_CORE=0 CLIENT_CORE=1 BENCHTIME=1s
#   PERF=1 records both processes with `perf record -g` during each run (reports under $OUT; the
#   figures of such a run include perf's own cost and are not the ones to quote).
#   CLIENT_GOGC, SERVER_GOGC set GOGC for that side (unset: each side's own default);
#   OLD_SERVER_ENV, NEW_SERVER_ENV, OLD_CLIENT_ENV, NEW_CLIENT_ENV ("VAR=value ...") add variables
#   to one build's side, so one binary can be compared with itself under two settings.
#   NEW_SERVER_BIN, OLD_SERVER_BIN run that build's server from a `linkkeys-server` binary (the
#   server alone; the same flags without the subcommand) instead of `BINARY server`; LEAN=1 builds
#   one from this tree for the new build's server.
#   GCTRACE=1 runs the servers with GODEBUG=gctrace=1 and prints, per run, the server's collections
#   per handshake, their CPU (as gctrace accounts it: the phases, not the write barrier or sweeping
#   during allocation) per handshake, and the mean live heap after a collection.
# Needs: go, python3, taskset; perf for PERF=1. Run it on a quiet machine: the figures are CPU-bound.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:-}
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-handshake-pinned-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
NEW=${NEW:-$OUT/linkkeys-loadtest-new}
[ -x "$NEW" ] || (cd "$ROOT" && go build -o "$NEW" ./cmd/linkkeys-loadtest)
if [ "${LEAN:-}" = 1 ] && [ -z "${NEW_SERVER_BIN:-}" ]; then
  NEW_SERVER_BIN=$OUT/linkkeys-server-new
  (cd "$ROOT" && go build -o "$NEW_SERVER_BIN" ./cmd/linkkeys-server)
fi
(cd "$ROOT" && go test -c -o "$OUT/linkkeys.test" ./internal/linkkeys)
SECS=${SECS:-15} SERVER_CORE=${SERVER_CORE:-0} CLIENT_CORE=${CLIENT_CORE:-1} BENCHTIME=${BENCHTIME:-1s} CONCURRENCY=${CONCURRENCY:-256}
BUILDS=(new)
[ -n "$OLD" ] && BUILDS=(old new)
ROUNDS=${ROUNDS:-${#BUILDS[@]}}
ulimit -n "$(ulimit -Hn)"

SCALE_ENV=(TCP_MAX_CONNECTIONS=220000 TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000
  PUBLIC_READ_RATE_PER_MINUTE=6000000 PUBLIC_READ_BURST=1000000
  PUBLIC_READ_GLOBAL_RATE_PER_SECOND=100000 PUBLIC_READ_GLOBAL_BURST=200000)
CLEAN_ENV=(-u GOGC -u GOMAXPROCS)
. "$ROOT/bench/lib.sh"
unset_server_env
SERVER_ENV=(GOMAXPROCS=1)
[ -n "${SERVER_GOGC:-}" ] && SERVER_ENV+=(GOGC="$SERVER_GOGC")
[ "${GCTRACE:-}" = 1 ] && SERVER_ENV+=(GODEBUG=gctrace=1)
CLIENT_ENV=(GOMAXPROCS=1)
[ -n "${CLIENT_GOGC:-}" ] && CLIENT_ENV+=(GOGC="$CLIENT_GOGC")

trap stop_server EXIT

start_server() { # start_server "BINARY server"|LEAN_BINARY NAME EXTRA_ENV...: the pinned one-process scale-profile server
  local cmd name=$2
  read -r -a cmd <<<"$1"
  shift 2
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "${SCALE_ENV[@]}" "${SERVER_ENV[@]}" "$@" taskset -c "$SERVER_CORE" "${cmd[@]}" \
    --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" --metrics-interval-secs 5 \
    >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    if [ -s "$OUT/$name-info.json" ] && grep -q '^METRICS ' "$OUT/$name-server.log"; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name-server.err" >&2; echo "server $name exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "server $name did not become ready within 20s" >&2; exit 1
}

crypto() { # crypto NAME: the per-operation benchmarks on one core
  echo "== crypto benchmarks ($1), core $SERVER_CORE, -test.cpu 1, -test.benchtime $BENCHTIME"
  taskset -c "$SERVER_CORE" "$OUT/linkkeys.test" -test.run '^$' -test.cpu 1 -test.benchtime "$BENCHTIME" \
    -test.bench 'X25519|Ed25519|HandshakeCrypto' | tee "$OUT/crypto-$1.txt" | grep '^Benchmark'
}

run() { # run BUILD ROUND: one pinned server and one pinned handshake-bench
  local build=$1 r=$2 bin=$NEW srv=${NEW_SERVER_BIN:-} name senv=() cenv=()
  read -r -a senv <<<"${NEW_SERVER_ENV:-}"
  read -r -a cenv <<<"${NEW_CLIENT_ENV:-}"
  if [ "$build" = old ]; then
    bin=$OLD srv=${OLD_SERVER_BIN:-}
    read -r -a senv <<<"${OLD_SERVER_ENV:-}"
    read -r -a cenv <<<"${OLD_CLIENT_ENV:-}"
  fi
  name=$build-$r
  start_server "${srv:-$bin server}" "$name" "${senv[@]}"
  echo "== $name: server pid $SERVER_PID ($(taskset -pc "$SERVER_PID" | sed 's/.*: //')), client on core $CLIENT_CORE"
  env "${CLEAN_ENV[@]}" "${CLIENT_ENV[@]}" "${cenv[@]}" taskset -c "$CLIENT_CORE" "$bin" handshake-bench \
    --info-file "$OUT/$name-info.json" --duration-secs "$SECS" --concurrency "$CONCURRENCY" \
    --client-ip-base 127.0.2.0 --client-ip-count 128 --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err" &
  local cpid=$! perfs=()
  if [ "${PERF:-}" = 1 ]; then
    # Attached once the client's threads exist, for the middle of the run.
    sleep 1
    perf record -g -o "$OUT/$name-server.perf" -p "$SERVER_PID" -- sleep $((SECS - 2)) >/dev/null 2>&1 &
    perfs+=($!)
    perf record -g -o "$OUT/$name-client.perf" -p "$cpid" -- sleep $((SECS - 2)) >/dev/null 2>&1 &
    perfs+=($!)
  fi
  wait "$cpid" || { cat "$OUT/$name.err" >&2; echo "handshake-bench $name failed" >&2; exit 1; }
  for p in "${perfs[@]}"; do wait "$p" || true; done
  grep -E 'DONE|cpu:' "$OUT/$name.txt" | sed 's/^ */  /' | cut -c1-200 || true
  stop_server
  if [ "${PERF:-}" = 1 ]; then
    local hs cpu
    for side in server client; do
      read -r hs cpu < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["handshakes"]["completed"], (d.get(sys.argv[2]+"_cpu") or {"ns":0})["ns"])' "$OUT/$name.json" "$side")
      echo "  $side profile (perf, middle $((SECS - 2))s; µs per handshake scaled to the run's $side CPU):"
      perf script -i "$OUT/$name-$side.perf" -F comm,tid,period,ip,sym 2>/dev/null \
        | python3 "$ROOT/bench/perf-breakdown.py" "$hs" "$cpu" | tee "$OUT/$name-$side.breakdown.txt"
    done
  fi
}

echo "== results in $OUT; new $NEW${OLD:+, old $OLD}; $ROUNDS round(s), ${SECS}s each"
crypto before
for r in $(seq 1 "$ROUNDS"); do
  order=("${BUILDS[@]}")
  [ ${#BUILDS[@]} = 2 ] && [ $((r % 2)) = 0 ] && order=(new old)
  for b in "${order[@]}"; do run "$b" "$r"; done
done
crypto after

python3 - "$OUT" "$ROUNDS" "${BUILDS[@]}" <<'PY'
import json, os, re, sys
out, rounds, builds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bench, wall, each = {}, {}, {}
for when in ("before", "after"):
    for line in open(os.path.join(out, "crypto-%s.txt" % when)):
        m = re.match(r"^Benchmark(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
        if not m:
            continue
        # CPU time per operation (cpu-ns/op) when the benchmark reports it: the e2e figures are CPU
        # time too, so the ratios hold when other processes take the cores; else wall time.
        c = re.search(r"([\d.]+) cpu-ns/op", line)
        k = m.group(1)
        bench[k] = min(bench.get(k, float("inf")), float(c.group(1) if c else m.group(3)))
        each[(k, when)] = float(c.group(1) if c else m.group(3))
        wall[k] = min(wall.get(k, float("inf")), float(m.group(3)))
S, C = bench["HandshakeCryptoServer"], bench["HandshakeCryptoClient"]
print("== crypto per full handshake, one core, CPU time per operation (faster of before/after; wall ns/op in brackets):")
for k in ("X25519KeyGen", "X25519SharedSecret", "Ed25519SignCertificateVerify", "Ed25519VerifyCertificateVerify"):
    print("   %-32s %7.1f µs  (%.1f)" % (k, bench[k] / 1e3, wall[k] / 1e3))
print("   server (keygen + shared + sign)   %7.1f µs: at most %.0f handshakes per server core-second" % (S / 1e3, 1e9 / S))
print("   client (keygen + shared + verify) %7.1f µs: at most %.0f handshakes per client core-second" % (C / 1e3, 1e9 / C))
bound = 1e9 / max(S, C)
print("   bound, one core per side: %.0f full handshakes/s" % bound)
for k in ("HandshakeCryptoServer", "HandshakeCryptoClient"):
    b, a = each.get((k, "before")), each.get((k, "after"))
    if b and a and abs(a - b) > 0.05 * min(a, b):
        print("   WARNING: %s read %.1f µs before the runs and %.1f µs after (%.0f%% apart): the machine's speed "
              "changed during the run, so the shares below are not measurements; run it again" % (k, b / 1e3, a / 1e3, 100 * abs(a - b) / min(a, b)))
rows = {}
print("== end to end (server core, client core; GOMAXPROCS=1 each). %bound: hs/s over the bound (wall: the")
print("   cores are shared with whatever else runs); %cpu: the same with each side's measured CPU per handshake,")
print("   1/max(server, client) over the bound (what the pair does per core-second); %srv, %cli: each side's own")
print("   crypto over its CPU per handshake")
print("   %-6s %8s %6s %9s %9s %13s %13s %7s %7s %7s %7s" % ("run", "hs/s", "failed", "srv µs/hs", "cli µs/hs",
      "hs/srv core-s", "hs/cli core-s", "%bound", "%cpu", "%srv", "%cli"))
for r in range(1, rounds + 1):
    for b in builds:
        d = json.load(open(os.path.join(out, "%s-%d.json" % (b, r))))
        h = d["handshakes"]
        n = h["completed"]
        rate = h["handshakes_per_sec"]
        srv = d["server_cpu"]["ns"] / n if d.get("server_cpu") else float("nan")
        cli = d["client_cpu"]["ns"] / n
        rows[(b, r)] = (rate, srv, cli)
        print("   %-6s %8.1f %6d %9.1f %9.1f %13.0f %13.0f %6.1f%% %6.1f%% %6.1f%% %6.1f%%" % (
            "%s-%d" % (b, r), rate, h["failed"], srv / 1e3, cli / 1e3, 1e9 / srv, 1e9 / cli,
            100 * rate / bound, 100 * max(S, C) / max(srv, cli), 100 * S / srv, 100 * C / cli))
gcs = {}
for r in range(1, rounds + 1):
    for b in builds:
        n, cyc, cpu, live = 0, 0, 0.0, []
        try:
            lines = open(os.path.join(out, "%s-%d-server.err" % (b, r))).read().splitlines()
        except OSError:
            lines = []
        for l in lines:
            m = re.match(r"gc \d+ @[\d.]+s \d+%: [\d.+]+ ms clock, ([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu, \d+->\d+->(\d+) MB", l)
            if m:
                cyc += 1
                cpu += sum(float(m.group(i)) for i in range(1, 6))
                live.append(int(m.group(6)))
        if cyc:
            gcs[(b, r)] = (cyc, cpu, sum(live) / len(live))
if gcs:
    print("== server collections (GODEBUG=gctrace=1; over the whole server run, start-up included)")
    for (b, r), (cyc, cpu, live) in sorted(gcs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        d = json.load(open(os.path.join(out, "%s-%d.json" % (b, r))))
        n = d["handshakes"]["completed"]
        print("   %-6s %5d collections, %6.1f handshakes per collection, %5.1f µs of GC CPU per handshake, live heap after a collection %.2f MB (gctrace rounds to MB)" % (
            "%s-%d" % (b, r), cyc, n / cyc, cpu * 1e3 / n, live))
if len(builds) == 2:
    print("== new/old per round (rate; CPU per handshake, server and client)")
    for r in range(1, rounds + 1):
        o, n = rows[("old", r)], rows[("new", r)]
        print("   round %d: rate %.3f; server CPU/hs %.3f; client CPU/hs %.3f" % (r, n[0] / o[0], n[1] / o[1], n[2] / o[2]))
d = json.load(open(os.path.join(out, "%s-1.json" % builds[-1])))
m = d["machines"][0]
print("machine: %s, %d cores, GOMAXPROCS %d (client), %.1f GiB, kernel %s, nofile %s/%s, somaxconn %s, ports %s, %s, loadproof %s, %s" % (
    m.get("cpu_model"), m["cores"], m["gomaxprocs"], m.get("memory_bytes", 0) / 2**30, m.get("kernel"), m.get("nofile_soft"),
    m.get("nofile_hard"), m.get("somaxconn"), m.get("ip_local_port_range"), m["go_version"], m["loadproof_version"], m["collected_at"]))
print("load average at the end: %s" % open("/proc/loadavg").read().split(" ")[:3])
PY
