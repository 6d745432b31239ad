#!/usr/bin/env bash
# Soak: do the reference servers leak under steady load?
#
# Builds loadproof, starts both reference servers on loopback (Keycast with SQLite and pprof,
# LinkKeys with its Prometheus endpoint), and for DURATION seconds drives a steady, bounded load
# against each:
#   Keycast   `keycast run --rate KC_RATE` (open model: a constant arrival rate, at most 8 in
#             flight) of sign-event, mixed scenario, over KC_USERS users made by `setup`;
#   LinkKeys  `request-bench --rate LK_RATE` (open model, 4 persistent connections) of
#             get-domain-keys, plus connection churn: `connections --count LK_CHURN --hold-secs 5`
#             every 10 s.
# Every INTERVAL seconds it samples each server's RSS (VmRSS of /proc/PID/status) and goroutine count
# (Keycast: the pprof goroutine profile's total; LinkKeys: go_goroutines of /metrics) into
# samples.csv while the load runs, and at the end prints, per server and series, the first and last
# values, min and max, the least-squares slope per hour (fitted after the first WARMUP seconds, when
# pools, caches and the heap have grown to their working size), one more sample 5 s after the load
# stopped, and the clients' totals. A leak shows as a slope that does not fall towards 0 as DURATION
# grows (read it against the start value and the min/max spread), or as goroutines that stay above
# their start value once the load has stopped.
#
# Usage: bench/soak.sh                       (1 hour, run by hand; results in a new /tmp/soak-XXXX)
#        DURATION=600 bench/soak.sh          (a 10-minute run)
#        SOAK_DIR=/tmp/soak-mine DURATION=3600 nohup bench/soak.sh >/tmp/soak-mine.out 2>&1 &
# Linux only (/proc). Needs curl.
set -euo pipefail

DURATION=${DURATION:-3600}
INTERVAL=${INTERVAL:-10}
WARMUP=${WARMUP:-60}
KC_RATE=${KC_RATE:-100}
KC_USERS=${KC_USERS:-20}
LK_RATE=${LK_RATE:-200}
LK_CHURN=${LK_CHURN:-50}

command -v curl >/dev/null || { echo "soak.sh: needs curl" >&2; exit 1; }
[[ -r /proc/self/status ]] || { echo "soak.sh: needs /proc (Linux)" >&2; exit 1; }
(( DURATION > WARMUP + 2 * INTERVAL )) || { echo "soak.sh: DURATION must exceed WARMUP + 2*INTERVAL" >&2; exit 1; }

cd "$(dirname "$0")/.."
dir=${SOAK_DIR:-$(mktemp -d /tmp/soak-XXXX)}
mkdir -p "$dir/kc" "$dir/lk"
echo "soak: results in $dir (DURATION=${DURATION}s INTERVAL=${INTERVAL}s WARMUP=${WARMUP}s KC_RATE=$KC_RATE LK_RATE=$LK_RATE LK_CHURN=$LK_CHURN)"

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

go build -o "$dir/loadproof" ./cmd/loadproof
bin="$dir/loadproof"

wait_for() { # wait_for FILE REGEX PID: the first match of REGEX in FILE (sed -E group 1)
	local i v
	for ((i = 0; i < 600; i++)); do
		v=$(sed -nE "s/$2/\1/p" "$1" | head -n1)
		[[ -n "$v" ]] && { echo "$v"; return 0; }
		kill -0 "$3" 2>/dev/null || { echo "soak.sh: process $3 exited; see $1" >&2; cat "$1" >&2; return 1; }
		sleep 0.1
	done
	echo "soak.sh: nothing matched /$2/ in $1" >&2
	return 1
}

# --- Keycast server, users ---
KEYCAST_BCRYPT_COST=4 "$bin" keycast server --addr 127.0.0.1:0 --data-dir "$dir/kc/data" --pprof-addr 127.0.0.1:0 \
	>"$dir/kc/server.out" 2>"$dir/kc/server.err" &
kc_pid=$!
pids+=("$kc_pid")
kc_url=$(wait_for "$dir/kc/server.out" '.*listening on (http:\/\/[0-9.:]+).*' "$kc_pid")
kc_pprof=$(wait_for "$dir/kc/server.err" '.*pprof listening.*addr=(http:\/\/[0-9.:]+)\/debug.*' "$kc_pid")
"$bin" keycast setup --url "$kc_url" --mode http --users "$KC_USERS" --concurrency 4 --output "$dir/kc/users.json" \
	>"$dir/kc/setup.out" 2>&1

# --- LinkKeys server ---
TCP_HANDSHAKE_RATE_PER_MINUTE=600000000 TCP_HANDSHAKE_BURST=100000000 \
	TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000000 TCP_HANDSHAKE_GLOBAL_BURST=100000000 \
	PUBLIC_READ_RATE_PER_MINUTE=600000000 PUBLIC_READ_BURST=100000000 \
	PUBLIC_READ_GLOBAL_RATE_PER_SECOND=100000000 PUBLIC_READ_GLOBAL_BURST=100000000 \
	"$bin" linkkeys server --db-path "$dir/lk/db.sqlite3" --info-file "$dir/lk/info.json" \
	--metrics-addr 127.0.0.1:0 --metrics-interval-secs 60 >"$dir/lk/server.out" 2>"$dir/lk/server.err" &
lk_pid=$!
pids+=("$lk_pid")
wait_for "$dir/lk/server.out" '.*(listening on).*' "$lk_pid" >/dev/null
lk_metrics="http://$(sed -nE 's/.*"metrics_addr": *"([^"]+)".*/\1/p' "$dir/lk/info.json")/metrics"

# --- steady load ---
"$bin" keycast run --url "$kc_url" --users-file "$dir/kc/users.json" --duration "$DURATION" --rate "$KC_RATE" \
	--concurrency 8 --ramp-up 0 --scenario mixed --method sign-event --report-interval 60 \
	--output "$dir/kc/run.json" >"$dir/kc/run.out" 2>"$dir/kc/run.err" &
kc_load=$!
pids+=("$kc_load")
"$bin" linkkeys request-bench --info-file "$dir/lk/info.json" --workers 1 --connections 4 --duration-secs "$DURATION" \
	--rate "$LK_RATE" --op domain-keys --json "$dir/lk/run.json" >"$dir/lk/run.out" 2>"$dir/lk/run.err" &
lk_load=$!
pids+=("$lk_load")
end=$(( $(date +%s) + DURATION ))
(
	i=0
	while (( $(date +%s) + 10 < end )); do
		"$bin" linkkeys connections --info-file "$dir/lk/info.json" --workers 1 --count "$LK_CHURN" --concurrency 10 \
			--hold-secs 5 --client-ip-count 1 --json "$dir/lk/churn-last.json" >>"$dir/lk/churn.out" 2>&1 || echo "churn $i failed" >>"$dir/lk/churn.out"
		i=$((i + 1))
		sleep 5
	done
) &
churn=$!
pids+=("$churn")

# --- sampling ---
rss_kb() { sed -nE 's/^VmRSS:[[:space:]]+([0-9]+) kB/\1/p' "/proc/$1/status" 2>/dev/null || echo ""; }
kc_goroutines() { curl -s -m 5 "$kc_pprof/debug/pprof/goroutine?debug=1" | sed -nE '1s/^goroutine profile: total ([0-9]+).*/\1/p'; }
lk_goroutines() { curl -s -m 5 "$lk_metrics" | sed -nE 's/^go_goroutines ([0-9.e+]+)$/\1/p'; }
csv="$dir/samples.csv"
echo "t_secs,kc_rss_kib,kc_goroutines,lk_rss_kib,lk_goroutines" >"$csv"
sample() { echo "$1,$(rss_kb "$kc_pid"),$(kc_goroutines),$(rss_kb "$lk_pid"),$(lk_goroutines)"; }
t0=$(date +%s)
# Samples under load only: the last one is taken at least 2 s before the clients' end.
while :; do
	now=$(date +%s)
	(( now + 2 > end )) && break
	sample "$((now - t0))" >>"$csv"
	sleep "$INTERVAL"
done

status=0
wait "$kc_load" || { echo "soak: keycast run exited $?" >&2; status=1; }
wait "$lk_load" || { echo "soak: request-bench exited $?" >&2; status=1; }
wait "$churn" || true
# Once the load has stopped, what is left: goroutines back to their start value mean none leaked.
sleep 5
idle=$(sample "$(( $(date +%s) - t0 ))")
echo "$idle" >"$dir/idle.csv"

# --- report ---
echo
echo "soak: $(( $(tail -n1 "$csv" | cut -d, -f1) ))s sampled every ${INTERVAL}s ($(( $(wc -l <"$csv") - 1 )) samples); slope fitted after ${WARMUP}s"
awk -F, -v warm="$WARMUP" '
NR == 1 { for (i = 2; i <= NF; i++) name[i] = $i; n = NF; next }
{
	for (i = 2; i <= n; i++) {
		if ($i == "") continue
		if (!(i in first)) first[i] = $i
		last[i] = $i
		if (!(i in lo) || $i + 0 < lo[i]) lo[i] = $i + 0
		if (!(i in hi) || $i + 0 > hi[i]) hi[i] = $i + 0
		if ($1 + 0 < warm) continue
		c[i]++; sx[i] += $1; sy[i] += $i; sxx[i] += $1 * $1; sxy[i] += $1 * $i
	}
}
END {
	printf "%-14s %12s %12s %12s %12s %16s\n", "series", "start", "end", "min", "max", "slope per hour"
	for (i = 2; i <= n; i++) {
		d = c[i] * sxx[i] - sx[i] * sx[i]
		slope = (c[i] > 1 && d != 0) ? (c[i] * sxy[i] - sx[i] * sy[i]) / d * 3600 : 0
		printf "%-14s %12s %12s %12s %12s %+16.1f\n", name[i], first[i], last[i], lo[i], hi[i], slope
	}
}' "$csv"
IFS=, read -r _ kr kg lr lg <<<"$idle"
echo "idle 5 s after the load: kc_rss_kib $kr, kc_goroutines $kg, lk_rss_kib $lr, lk_goroutines $lg"
echo
echo "keycast run:   $(grep -E 'Requests:|Success Rate:' "$dir/kc/run.out" | tr -s ' ' | tr '\n' ' ')"
echo "request-bench: $(grep -E 'DONE' "$dir/lk/run.out" | tail -n1)"
echo "churn:         $(grep -c '^connections: DONE' "$dir/lk/churn.out" || true) runs of connections --count $LK_CHURN ($(grep -c '^churn [0-9]* failed' "$dir/lk/churn.out" || true) failed); last: $(grep '^connections: DONE' "$dir/lk/churn.out" | tail -n1)"
exit "$status"
