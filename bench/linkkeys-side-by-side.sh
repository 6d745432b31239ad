#!/usr/bin/env bash
# The LinkKeys clients of two builds side by side, on one machine in one run, alternating, for the
# figures docs/benchmarks.md tracks across a change of the clients:
#
#   handshake-bench --duration-secs $SECS --concurrency 64            full handshakes per second
#   request-bench   --connections 64 --duration-secs $SECS --pipeline 8  the pipelined request rate
#   ddos            --sources $SOURCES --concurrency 500                 exact accounting (every check ok)
#
# handshake-bench and request-bench run against one server (the scale profile with public reads
# unbounded, so nothing is shed and the client is what differs); each ddos run gets a fresh server
# with the default profile, so both builds meet the same limiter state. Every server runs with its
# Prometheus endpoint on, which the info file advertises: the new clients sample it once a second
# into their interval snapshots, so their figures include that cost. The order of the two builds
# alternates from round to round. The machine is shared and noisy: compare the ratios of a round,
# and the client CPU per operation, which moves less than the rates.
#
# Usage: bench/linkkeys-side-by-side.sh OLD_BINARY [NEW_BINARY]
#        ROUNDS=3 SECS=5 SOURCES=5000 (defaults); NEW_BINARY defaults to a build of this tree.
# The servers are NEW_BINARY's (the server is not what is compared). Needs: go, python3.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?usage: $0 OLD_BINARY [NEW_BINARY]}
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-side-by-side-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
NEW=${2:-}
if [ -z "$NEW" ]; then
  NEW="$OUT/linkkeys-loadtest-new"
  (cd "$ROOT" && go build -o "$NEW" ./cmd/linkkeys-loadtest)
fi
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} SOURCES=${SOURCES:-5000}
ulimit -n "$(ulimit -Hn)"

SCALE_ENV=(TCP_MAX_CONNECTIONS=220000 TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000
  PUBLIC_READ_BURST=1000000000 PUBLIC_READ_GLOBAL_BURST=1000000000
  PUBLIC_READ_RATE_PER_MINUTE=60000000000 PUBLIC_READ_GLOBAL_RATE_PER_SECOND=1000000000)
CLEAN_ENV=()
. "$ROOT/bench/lib.sh"
unset_server_env
trap stop_server EXIT

start_server() { # start_server NAME ENV...: start NEW's server, wait for its info file
  local name=$1; shift
  rm -f "$OUT/$name-info.json"
  env "${CLEAN_ENV[@]}" "$@" "$NEW" server --info-file "$OUT/$name-info.json" --db-path "$OUT/$name.sqlite3" \
    --metrics-interval-secs 5 --metrics-addr 127.0.0.1:0 >"$OUT/$name-server.log" 2>"$OUT/$name-server.err" &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    if [ -s "$OUT/$name-info.json" ] && grep -q '^METRICS ' "$OUT/$name-server.log"; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name-server.err" >&2; echo "server $name exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "server $name did not become ready within 20s" >&2; exit 1
}

run() { # run BUILD NAME ARGS...: one client run, its output and JSON result kept
  local build=$1 name=$2; shift 2
  local bin=$OLD
  [ "$build" = new ] && bin=$NEW
  "$bin" "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err"
  grep -E 'DONE|client vs server' "$OUT/$name.txt" | sed "s/^/  $build $name: /" | cut -c1-200
}

echo "== results in $OUT; old $OLD, new $NEW; $ROUNDS rounds, ${SECS}s runs, ddos $SOURCES sources"
for r in $(seq 1 "$ROUNDS"); do
  order="old new"
  [ $((r % 2)) = 0 ] && order="new old"
  echo "== round $r ($order)"
  start_server bench-$r "${SCALE_ENV[@]}"
  for b in $order; do
    run "$b" "hs-$b-$r" handshake-bench --info-file "$OUT/bench-$r-info.json" --duration-secs "$SECS" --concurrency 64 \
      --client-ip-base 127.0.2.0 --client-ip-count 128
  done
  for b in $order; do
    run "$b" "rq-$b-$r" request-bench --info-file "$OUT/bench-$r-info.json" --connections 64 --duration-secs "$SECS" --pipeline 8
  done
  stop_server
  for b in $order; do
    start_server ddos-$b-$r
    run "$b" "ddos-$b-$r" ddos --info-file "$OUT/ddos-$b-$r-info.json" --sources "$SOURCES" --concurrency 500 \
      --client-ip-base 127.5.0.0
    stop_server
  done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def res(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)
def machine(r):  # the envelope's records (new) or the single record (old)
    return (r.get("machines") or [r.get("machine")])[0]
def cpu_us(r, ops):
    return r["client_cpu"]["ns"] / 1e3 / max(ops, 1)
rows = {"hs": [], "rq": [], "ddos": []}
for i in range(1, rounds + 1):
    for b in ("old", "new"):
        h = res("hs-%s-%d" % (b, i))["handshakes"]
        rows["hs"].append((i, b, h["full_per_sec"], cpu_us(res("hs-%s-%d" % (b, i)), h["completed"]), h["failed"]))
        q = res("rq-%s-%d" % (b, i))["requests"]
        rows["rq"].append((i, b, q["requests_per_sec"], cpu_us(res("rq-%s-%d" % (b, i)), q["completed"]), q["errors"]))
        d = res("ddos-%s-%d" % (b, i))
        srv = d.get("server") or {}
        checks = srv.get("checks") or []
        exact = bool(checks) and all(c["ok"] for c in checks)
        a = d["attempts"]
        rows["ddos"].append((i, b, a["attempted"] / (d["elapsed"]["ns"] / 1e9), cpu_us(d, a["attempted"]),
                             "%d/%d/%d %s" % (a["attempted"], a["succeeded"], a["failed"], "exact" if exact else "MISMATCH %s" % (checks or srv.get("note")))))
m = machine(res("hs-new-1"))
print("== machine: %s, %d cores (GOMAXPROCS %d), %.1f GiB, kernel %s, nofile %s/%s, %s" % (
    m.get("cpu_model"), m["cores"], m.get("gomaxprocs", 0), m.get("memory_bytes", 0) / 2**30, m.get("kernel"),
    m.get("nofile_soft"), m.get("nofile_hard"), m["go_version"]))
names = {"hs": "handshake-bench full handshakes/s", "rq": "request-bench --pipeline 8 requests/s", "ddos": "ddos attempts/s"}
for k, title in names.items():
    print("== %s (round, build, rate, client CPU µs/op, extra)" % title)
    ratios, cpu_ratios = [], []
    for i in range(1, rounds + 1):
        o = [r for r in rows[k] if r[0] == i and r[1] == "old"][0]
        n = [r for r in rows[k] if r[0] == i and r[1] == "new"][0]
        for r in (o, n):
            print("  %d %s %10.1f %8.2f  %s" % r)
        ratios.append(n[2] / o[2] if o[2] else float("nan"))
        cpu_ratios.append(n[3] / o[3] if o[3] else float("nan"))
        print("  %d new/old rate %.3f, CPU/op %.3f" % (i, ratios[-1], cpu_ratios[-1]))
    print("  median new/old: rate %.3f, client CPU per op %.3f" % (statistics.median(ratios), statistics.median(cpu_ratios)))
PY
