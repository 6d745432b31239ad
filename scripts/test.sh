#!/usr/bin/env bash
# The project's test command (README "Two commands"; .ci/run calls exactly this). It runs everything,
# in stages, each with its time printed:
#
#   static       go vet (with and without the e2e tag), gofmt, cross-checks for macOS (vet) and Windows
#   unit         go test -short -race on the core packages (the engine, histograms, results, limiters)
#   integration  go test ./...: unit and integration tests against real servers on loopback, real
#                SQLite files, a real PostgreSQL and an embedded NATS
#   e2e          go test -tags e2e: reports and the dashboard in headless Chromium, the fault suite,
#                the multi-host test bed in network namespaces; then the PostgreSQL restart alone
#   fuzz         mutation time where the code changed: the fuzz targets of packages changed in the
#                last day (FUZZ_SINCE), most recent first, FUZZTIME each, each package's test binary
#                built once, within FUZZ_BUDGET seconds (every target's seed corpus already ran as a
#                test in the integration stage; FUZZ_ALL=1 fuzzes every package)
#   smoke        the LinkKeys smoke run of the built binary
#
# Each go test stage names its 10 slowest tests and ends with "N passed, N failed, N skipped".
# Outside CI the Go test cache is used (a second run reruns only what changed); under CI=true every
# test runs. STAGES="unit integration" runs only those stages (the developer's quick loop is
# `go test -short ./...`). Long benchmarks and scale runs live under bench/ and are run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-4s}"
FUZZ_BUDGET="${FUZZ_BUDGET:-90}"
FUZZ_SINCE="${FUZZ_SINCE:-24 hours ago}"
STAGES="${STAGES:-static unit integration e2e fuzz smoke}"
COUNT=()
if [ "${CI:-}" = "true" ]; then COUNT=(-count=1); fi

command -v go >/dev/null || { echo "test.sh: Go is not on PATH; install Go 1.26 (see README)" >&2; exit 1; }

# Test artifacts (the browser tests' screenshots and pages) are kept here.
TEST_OUTPUT="${TEST_OUTPUT:-/tmp/loadproof-test-output}"
mkdir -p "$TEST_OUTPUT"
SUMMARY_BIN="$(mktemp -d)/testsummary"
go build -o "$SUMMARY_BIN" ./scripts/testsummary

declare -a TIMES=()
suite_start=$SECONDS
want() { [[ " $STAGES " == *" $1 "* ]]; }
# run_stage NAME CMD...: runs one stage and records its time.
run_stage() {
  local name=$1; shift
  want "$name" || return 0
  echo "== stage $name"
  local t0=$SECONDS
  "$@"
  TIMES+=("$(printf '%-12s %5d s' "$name" $((SECONDS - t0)))")
  echo "== stage $name: $((SECONDS - t0)) s"
}
# gotest STAGE ARGS...: go test -json through testsummary (failures in full, the slowest tests, counts).
gotest() {
  local stage=$1; shift
  go test -json "${COUNT[@]}" "$@" | "$SUMMARY_BIN" -stage "$stage" -slowest 10
}

static() {
  echo "-- go vet"
  go vet ./...
  go vet -tags e2e ./internal/report/e2e ./internal/faults ./internal/testbed
  echo "-- gofmt"
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; return 1; fi
  # keycast-loadtest and the report commands are used on macOS, keycast-loadtest on Windows (README
  # "Platforms"): Linux-only code lives in _linux.go files with a fallback, and these keep it so.
  # go vet type-checks every package, its tests included, on the dependencies it compiles: a
  # separate go build for macOS costs another 15 s on a cold cache and finds nothing more.
  echo "-- cross-build: GOOS=darwin go vet ./...; GOOS=windows go build ./cmd/keycast-loadtest"
  GOOS=darwin go vet ./...
  GOOS=windows go build -o /dev/null ./cmd/keycast-loadtest
}

# The core packages carry the concurrency every run depends on; the race detector watches them.
unit() {
  local race=(-race)
  if ! command -v "$(go env CC)" >/dev/null 2>&1; then
    echo "   (no C compiler: the race detector needs one, apt-get install gcc; running without -race)"
    race=()
  fi
  gotest unit -short "${race[@]}" -timeout 10m ./internal/engine/... ./internal/hist/... ./internal/result/... \
    ./internal/admit/... ./internal/syncio/... ./internal/hostrule/... ./scripts/...
}

integration() {
  # PostgreSQL for the Keycast store tests: start the local cluster when it is down.
  scripts/postgres.sh
  # Prometheus for the remote-write tests (a real receiver): install it when it is missing.
  scripts/prometheus.sh
  gotest integration -timeout 30m ./...
}

e2e() {
  # Chromium for the report and dashboard browser tests: install it when it is missing.
  scripts/chromium.sh
  scripts/postgres.sh
  local pkgs=(./internal/report/e2e ./internal/faults ./internal/testbed)
  gotest e2e -tags e2e -timeout 20m -artifacts -outputdir "$TEST_OUTPUT" "${pkgs[@]}"
  echo "test artifacts (screenshots of the browser tests): $TEST_OUTPUT/_artifacts"
  # The fault suite's PostgreSQL restart stops the cluster that other packages' tests share, so it
  # runs on its own, after them (docs/reliability.md, Fault suite).
  echo "-- fault suite: PostgreSQL restarted mid-run (alone)"
  LOADPROOF_FAULTS_SERIAL=1 gotest e2e-serial -tags e2e -timeout 5m -run '^TestPostgresRestartedMidRun$' ./internal/faults
}

fuzz() {
  # Every target's seed corpus already ran as an ordinary test in the integration stage. Mutation
  # time goes where the code changed: packages with Go files changed in the last FUZZ_SINCE (a day),
  # the most recently changed first, FUZZTIME per target, until FUZZ_BUDGET seconds of the stage
  # (builds included) are spent; the targets left over are named. FUZZ_ALL=1 fuzzes every package.
  local pkgs
  if [ -n "${FUZZ_ALL:-}" ]; then
    pkgs=$(fuzz_packages)
  else
    pkgs=$(changed_fuzz_packages)
  fi
  if [ -z "$pkgs" ]; then
    echo "   no package with fuzz targets changed since $FUZZ_SINCE: mutation skipped (FUZZ_ALL=1 fuzzes all)"
    return 0
  fi
  local bindir; bindir=$(mktemp -d)
  local t0=$SECONDS dir name bin left=()
  for dir in $pkgs; do
    if [ $((SECONDS - t0)) -ge "$FUZZ_BUDGET" ]; then left+=("$dir"); continue; fi
    bin="$bindir/$(echo "$dir" | tr / _).test"
    go test -c -fuzz=Fuzz -o "$bin" "./$dir"  # -fuzz builds the coverage instrumentation the fuzzer needs
    for name in $(fuzz_targets "$dir"); do
      if [ $((SECONDS - t0)) -ge "$FUZZ_BUDGET" ]; then left+=("$dir.$name"); continue; fi
      echo "-- $dir $name ($FUZZTIME)"
      fuzz_one "$dir" "$bin" "$name" "$FUZZTIME"
    done
  done
  if [ ${#left[@]} -gt 0 ]; then
    echo "   budget of ${FUZZ_BUDGET} s spent; not fuzzed this run (their seeds ran as tests): ${left[*]}"
  fi
}

# fuzz_packages: every package directory with a fuzz target.
fuzz_packages() {
  grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' internal bench | xargs -r -n1 dirname | sort -u
}

# changed_fuzz_packages: the packages with fuzz targets whose Go files changed since FUZZ_SINCE,
# the most recently changed first.
changed_fuzz_packages() {
  local all; all=$(fuzz_packages)
  git log --since="$FUZZ_SINCE" --name-only --pretty=format: 2>/dev/null | grep '\.go$' | xargs -r -n1 dirname |
    awk '!seen[$0]++' | grep -Fx -f <(printf '%s\n' $all) || true
}

# fuzz_targets DIR: the fuzz targets declared in DIR's test files.
fuzz_targets() {
  grep -h -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$1"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u
}

# fuzz_one DIR BIN NAME TIME: the test binary runs in its package directory, where its seed corpus
# (testdata/fuzz) is and where a failing input is written.
fuzz_one() {
  local dir=$1 bin=$2 name=$3 t=$4 try log
  log=$(mktemp)
  for try in 1 2 3; do
    if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$t" \
        -test.fuzzcachedir="$(go env GOCACHE)/fuzz/github.com/loadproof/loadproof/$dir") >"$log" 2>&1; then
      return 0
    fi
    # Go's fuzzer sometimes ends a time-bounded run with "context deadline exceeded" and no
    # failing input (a worker still busy when the time is up). That is not a finding: run the
    # target again. A real failure writes its input under testdata/fuzz and is reported at once.
    if [ "$try" -lt 3 ] && grep -q "context deadline exceeded" "$log" && ! grep -q "Failing input written" "$log"; then
      echo "   (fuzzer stopped on its deadline without a finding; running $name again)"
      continue
    fi
    cat "$log"; return 1
  done
}

smoke() {
  go build -o /tmp/loadproof-ci-bin/linkkeys-loadtest ./cmd/linkkeys-loadtest
  /tmp/loadproof-ci-bin/linkkeys-loadtest smoke
}

run_stage static static
run_stage unit unit
run_stage integration integration
run_stage e2e e2e
run_stage fuzz fuzz
run_stage smoke smoke

echo "== stage times"
printf '   %s\n' "${TIMES[@]}"
printf '   %-12s %5d s\n' total $((SECONDS - suite_start))
echo "== all tests passed"
