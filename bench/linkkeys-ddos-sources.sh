#!/usr/bin/env bash
# Distinct-source ddos at scale against the default profile: one attempt from each of $SOURCES
# source addresses (default 10,000,000, from 127.16.0.0, all inside 127/8), against a fresh
# one-process lean `linkkeys-server` with no TCP_*/PUBLIC_READ_* variables, to show the limiter's
# memory stays bounded however many distinct sources arrive. The server's METRICS (every 5 s, with
# the anonymous/file RSS split) are kept; the client reads them before and after for the exact
# accounting. Prints the client's DONE lines, the accounting, and the server's RSS at the start,
# its maximum, and at each millionth source.
#
# Usage: bench/linkkeys-ddos-sources.sh              (about 11 minutes on the 2-core machine)
#        SOURCES=1000000 bench/linkkeys-ddos-sources.sh
# Needs: go, python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-${TMPDIR:-/tmp}/linkkeys-ddos-sources-$(date -u +%Y%m%dT%H%M%SZ)}
SOURCES=${SOURCES:-10000000}
mkdir -p "$OUT"
go build -o "$OUT/" ./cmd/linkkeys-loadtest ./cmd/linkkeys-server
ulimit -n "$(ulimit -Hn)"
CLEAN_ENV=()
for v in $(env | sed -n 's/^\(TCP_[A-Z_]*\|PUBLIC_READ_[A-Z_]*\|GOGC\)=.*/\1/p'); do CLEAN_ENV+=(-u "$v"); done
env "${CLEAN_ENV[@]}" "$OUT/linkkeys-server" --info-file "$OUT/info.json" --db-path "$OUT/server.sqlite3" \
  --metrics-interval-secs 5 --duration-secs 0 >"$OUT/server.log" 2>"$OUT/server.err" &
SERVER_PID=$!
trap 'kill -TERM $SERVER_PID 2>/dev/null || true; wait $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do
  [ -s "$OUT/info.json" ] && grep -q '^METRICS ' "$OUT/server.log" && break
  sleep 0.1
done
sleep 6
echo "== ddos: $SOURCES distinct sources from 127.16.0.0 (results in $OUT)"
"$OUT/linkkeys-loadtest" ddos --info-file "$OUT/info.json" --sources "$SOURCES" --concurrency 500 \
  --client-ip-base 127.16.0.0 --progress-every 1000000 --server-metrics "$OUT/server.log" \
  --json "$OUT/ddos.json" | tee "$OUT/ddos.txt"
sleep 6
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
ms = [json.loads(l[8:]) for l in open(os.path.join(out, 'server.log')) if l.startswith('METRICS ')]
mib = lambda b: (b or 0) / 2**20
def line(m):
    return "%.1f MiB (anon %.1f, file %.1f) at %d accepted" % (mib(m['process_rss_bytes']), mib(m.get('process_rss_anon_bytes')),
        mib(m.get('process_rss_file_bytes')), m['accepted_connections'])
print("server RSS at the start: " + line(ms[0]))
top = max(ms, key=lambda m: m['process_rss_bytes'] or 0)
print("server RSS max:          " + line(top))
step = 1000000
for m in ms:
    if m['accepted_connections'] >= step:
        print("   first line past %8d sources: %s" % (step, line(m)))
        step += 1000000
print("server RSS at the end:   " + line(ms[-1]))
d = json.load(open(os.path.join(out, 'ddos.json')))
srv = d.get('server') or {}
print("accounting: %s" % ("; ".join("%s %d/%d %s" % (k['name'], k['client'], k['server'], 'ok' if k['ok'] else 'MISMATCH') for k in srv.get('checks', [])) or srv.get('note')))
PY
