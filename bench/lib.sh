# Shared by the bench scripts:  . "$ROOT/bench/lib.sh"
#
# The scripts keep what needs the operating system (servers started and stopped by PID, pinning,
# sysctls, perf, /proc, peers side by side). Figures are read with jq (one field of a result file,
# `loadproof report --format json`); summaries over several runs, ratios and medians are printed by
# one Go program, bench/cmd/benchsum (`benchsum`, below), which has tests; its tests also check that no
# script embeds another interpreter's code (awk and jq filters are the only inline programs).
#
# unset_server_env appends to the CLEAN_ENV array an `env -u` for every TCP_* and PUBLIC_READ_*
# variable of the calling shell, so a server started with `env "${CLEAN_ENV[@]}" …` runs the
# profile the script sets and nothing the shell happened to export.
unset_server_env() {
  local v
  for v in $(env | sed -n 's/^\(TCP_[A-Z_]*\|PUBLIC_READ_[A-Z_]*\)=.*/\1/p'); do CLEAN_ENV+=(-u "$v"); done
}

# SCALE_UNBOUNDED_ENV is the LinkKeys server's scale profile with public reads unbounded: nothing is
# shed, so what differs between two runs is the client. Start a server with
# `env "${CLEAN_ENV[@]}" "${SCALE_UNBOUNDED_ENV[@]}" …`.
SCALE_UNBOUNDED_ENV=(TCP_MAX_CONNECTIONS=220000 TCP_HANDSHAKE_CONCURRENCY=1024
  TCP_HANDSHAKE_RATE_PER_MINUTE=6000000 TCP_HANDSHAKE_BURST=1000000
  TCP_HANDSHAKE_GLOBAL_RATE_PER_SECOND=100000 TCP_HANDSHAKE_GLOBAL_BURST=200000
  PUBLIC_READ_BURST=1000000000 PUBLIC_READ_GLOBAL_BURST=1000000000
  PUBLIC_READ_RATE_PER_MINUTE=60000000000 PUBLIC_READ_GLOBAL_RATE_PER_SECOND=1000000000)

# stop_server stops the server in SERVER_PID (SIGTERM, then waits for it), if there is one.
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}

# ---- LinkKeys capacity plans (bench/plans/*.json) ----
#
# A bench that is "run these phases and read the figures" is a plan under bench/plans/, run by
# `loadproof linkkeys capacity`, so every run leaves an evidence bundle (evidence.json, one results
# file and one server log per phase, manifest.json with the SHA-256 of each); its figures are read
# back through `loadproof report --format json` with jq. The scripts keep what needs the operating
# system: ulimit, sysctls, pinning, perf, peers side by side.

# need_tools TOOL...: stop with a message naming every tool that is missing and the Debian/Ubuntu
# packages that hold them (go: https://go.dev/dl/).
need_tools() {
  local t missing=() pkgs=() gohint=""
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 && continue
    missing+=("$t")
    case $t in
      go) gohint=" (Go 1.26: https://go.dev/dl/)" ;;
      taskset) pkgs+=(util-linux) ;;
      ip) pkgs+=(iproute2) ;;
      perf) pkgs+=(linux-perf) ;;
      *) pkgs+=("$t") ;;
    esac
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]}${pkgs[0]+ (apt-get install -y ${pkgs[*]})}$gohint; install them, then run this again" >&2
    exit 2
  fi
}

# build_loadproof: build this tree's loadproof and set LOADPROOF to it; record the commit (and
# whether the tree had changes) in $OUT/commit.txt. The binary goes to $BENCH_BIN (default
# $TMPDIR/loadproof-bench), not $OUT, so bench/keep-run.sh archives the run's files and no binary.
build_loadproof() {
  local bindir=${BENCH_BIN:-${TMPDIR:-/tmp}/loadproof-bench}
  mkdir -p "$bindir"
  LOADPROOF="$bindir/loadproof"
  go build -o "$LOADPROOF" ./cmd/loadproof
  { git rev-parse HEAD 2>/dev/null || echo "not a git checkout"
    git status --porcelain 2>/dev/null | grep -q . && echo "with uncommitted changes" || true
  } >"$OUT/commit.txt"
}

# raise_nofile: raise the soft open-file limit to the hard one (the held populations need it;
# the capacity command spreads clients and server processes under what remains).
raise_nofile() { ulimit -n "$(ulimit -Hn)"; }

# sized_plan PLAN NAME JQ-FILTER [jq args...]: write $OUT/NAME.plan.json, PLAN with the jq filter
# applied (a size or a variable changed for this run), and print its path. The derived plan is run
# as is and recorded in its bundle; the committed plan stays the reference.
sized_plan() {
  local plan=$1 name=$2 filter=$3; shift 3
  jq "$@" "$filter" "$plan" >"$OUT/$name.plan.json"
  echo "$OUT/$name.plan.json"
}

# run_plan PLAN NAME [capacity flags...]: run the plan into the bundle $OUT/NAME and write its
# report, $OUT/NAME.report.json; the command's summary goes to $OUT/NAME.txt, its progress to the
# terminal and $OUT/NAME.err. A check that fails (exit 1) is reported and the figures are still
# read; a plan that could not run (exit 2 or 3) stops the script. SETTLE, when set, is the capacity
# command's --settle-wait (its default, 15 s, otherwise); PLAN_ENV, an array of `env` arguments (-u NAME, NAME=VALUE), the
# environment changes it runs with (its servers and client workers inherit them).
PLAN_ENV=()
run_plan() {
  local plan=$1 name=$2 rc=0; shift 2
  echo "== $name: loadproof linkkeys capacity --plan $plan"
  # stdout to the file, stderr (progress) through tee; rc is the command's status, not tee's.
  env ${PLAN_ENV[@]+"${PLAN_ENV[@]}"} "$LOADPROOF" linkkeys capacity --plan "$plan" --output "$OUT/$name" \
    ${SETTLE:+--settle-wait "$SETTLE"} "$@" 2>&1 >"$OUT/$name.txt" | tee "$OUT/$name.err" >&2 || rc=${PIPESTATUS[0]}
  case $rc in
    0) ;;
    1) echo "   $name: a check failed or a stop condition was breached (see $OUT/$name.txt); the figures are read anyway" ;;
    *) tail -n 20 "$OUT/$name.txt" >&2
       echo "$name: the plan could not run (exit $rc); its progress and errors are in $OUT/$name.err" >&2
       exit "$rc" ;;
  esac
  "$LOADPROOF" report --format json "$OUT/$name" >"$OUT/$name.report.json"
}

# metric NAME PHASE METRIC: one figure of a phase from $OUT/NAME.report.json ("null" when absent).
metric() { jq -r --arg p "$2" --arg m "$3" '.phases[] | select(.name == $p) | .metrics[$m]' "$OUT/$1.report.json"; }

# machine_line NAME: the machine record of a report, one line.
machine_line() {
  jq -r '.machine | "machine: \(.cpu_model), \(.cores) cores, \(.memory_bytes / 1073741824 * 10 | floor / 10) GiB, kernel \(.kernel), nofile \(.nofile_soft)/\(.nofile_hard), somaxconn \(.somaxconn), ports \(.ip_local_port_range), \(.go_version), loadproof \(.loadproof_version)"' \
    "$OUT/$1.report.json"
}

# phase_metrics NAME PHASE: the METRICS lines of a phase's server log in the bundle $OUT/NAME (the
# log the report names), as one JSON array, for figures over time (RSS as it settles or grows).
phase_metrics() {
  local log
  log=$(jq -r --arg p "$2" '.phases[] | select(.name == $p) | .server.log' "$OUT/$1.report.json")
  sed -n 's/^METRICS //p' "$OUT/$1/$log" | jq -s .
}

# ---- tools every script shares ----

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# build_benchsum: build bench/cmd/benchsum (the summaries, ratios and medians of every script) into
# $BENCH_BIN (default $TMPDIR/loadproof-bench) and set BENCHSUM to it. Call it once, near the top:
# `benchsum` inside $(...) cannot set a variable for later calls.
build_benchsum() {
  local bindir=${BENCH_BIN:-${TMPDIR:-/tmp}/loadproof-bench}
  mkdir -p "$bindir"
  BENCHSUM="$bindir/benchsum"
  (cd "$BENCH_ROOT" && go build -o "$BENCHSUM" ./bench/cmd/benchsum)
}

# benchsum SUMMARY ARGS...: one summary of bench/cmd/benchsum (`benchsum help` lists them).
benchsum() {
  [ -n "${BENCHSUM:-}" ] || { echo "benchsum: call build_benchsum first" >&2; exit 2; }
  "$BENCHSUM" "$@"
}

# b64url: standard input as unpadded base64url (RFC 4648, section 5) on one line.
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# pkce_pair: set VERIFIER (32 random bytes, base64url: 43 characters) and CHALLENGE (its S256
# transform, base64url of its SHA-256), the pair an OAuth authorization with PKCE sends.
pkce_pair() {
  VERIFIER=$(openssl rand 32 | b64url)
  CHALLENGE=$(printf '%s' "$VERIFIER" | openssl dgst -sha256 -binary | b64url)
}

# keycast_user URL EMAIL_PREFIX: one Keycast user through register -> authorize (PKCE S256) ->
# token against the server at URL; sets TOKEN and PUBKEY. Needs curl, jq, openssl.
keycast_user() {
  local url=$1 prefix=$2 reg session code
  reg=$(curl -fsS -i -X POST "$url/api/auth/register" -H 'Content-Type: application/json' -H "Origin: $url" \
    -d "{\"email\":\"$prefix-$RANDOM@test.local\",\"password\":\"bench-password\"}")
  PUBKEY=$(printf '%s' "$reg" | tail -1 | jq -r .pubkey)
  session=$(printf '%s' "$reg" | tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: keycast_session=\([^;]*\);.*/\1/p')
  pkce_pair
  code=$(curl -fsS -X POST "$url/api/oauth/authorize" -H 'Content-Type: application/json' -H "Cookie: keycast_session=$session" \
    -d "{\"approved\":true,\"client_id\":\"loadtest\",\"redirect_uri\":\"$url/callback\",\"scope\":\"policy:social\",\"code_challenge\":\"$CHALLENGE\",\"code_challenge_method\":\"S256\"}" |
    jq -r .code)
  TOKEN=$(curl -fsS -X POST "$url/api/oauth/token" -H 'Content-Type: application/json' \
    -d "{\"grant_type\":\"authorization_code\",\"code\":\"$code\",\"client_id\":\"loadtest\",\"redirect_uri\":\"$url/callback\",\"code_verifier\":\"$VERIFIER\"}" |
    jq -r .access_token)
}

# wait_ready SECONDS PID TEST...: poll TEST (a command) every 0.1 s until it succeeds; return 1
# when process PID exits first or SECONDS pass. The callers below say what they waited for.
wait_ready() {
  local secs=$1 pid=$2 i; shift 2
  for ((i = 0; i < secs * 10; i++)); do
    "$@" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  "$@" 2>/dev/null
}

# linkkeys_up INFO LOG: the LinkKeys server wrote its info file and a METRICS line.
linkkeys_up() { [ -s "$1" ] && grep -q '^METRICS ' "$2"; }

# server_ready SECONDS ERR LATE GONE TEST...: wait (wait_ready) until TEST succeeds while the server
# in SERVER_PID runs; else print its stderr (the file ERR), then LATE when it still runs or GONE
# when it exited, and stop. The servers' own wrappers below say what ready means.
server_ready() {
  local secs=$1 err=$2 late=$3 gone=$4
  shift 4
  wait_ready "$secs" "$SERVER_PID" "$@" && return 0
  cat "$err" >&2
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "$late" >&2
  else
    echo "$gone" >&2
  fi
  exit 1
}

# linkkeys_ready NAME INFO LOG ERR [SECONDS]: wait (default 20 s) until the LinkKeys server in
# SERVER_PID is up (linkkeys_up INFO LOG); else print its stderr (the file ERR), say why and stop.
linkkeys_ready() {
  local name=$1 info=$2 log=$3 err=$4 secs=${5:-20}
  server_ready "$secs" "$err" "server $name did not become ready within ${secs}s (no info file $info, or no METRICS line in $log)" \
    "server $name exited (its stderr above)" linkkeys_up "$info" "$log"
}

# keycast_ready URL ERR [SECONDS [CURL_ARGS...]]: wait (default 10 s) until the Keycast server in
# SERVER_PID answers URL/health; else print its stderr (the file ERR), say why and stop.
keycast_ready() {
  local url=$1 err=$2 secs=${3:-10}
  shift $(($# < 3 ? $# : 3))
  server_ready "$secs" "$err" "the Keycast server did not answer $url/health within ${secs}s" \
    "the Keycast server exited (its stderr above)" curl -fsS "$@" -o /dev/null "$url/health"
}

# cpu_us_per_op TICKS0 TICKS1 OPS: CPU microseconds per operation from two readings of a process's
# CPU in clock ticks (/proc/PID/stat fields 14 and 15), two decimals.
cpu_us_per_op() {
  awk -v a="$1" -v b="$2" -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz * 1e6 / (n > 1 ? n : 1)}'
}

# last_metrics LOG: the last METRICS line of a LinkKeys server log, as JSON ({} when there is none).
last_metrics() {
  local l
  l=$(sed -n 's/^METRICS //p' "$1" | tail -n 1)
  if [ -n "$l" ]; then echo "$l"; else echo '{}'; fi
}
