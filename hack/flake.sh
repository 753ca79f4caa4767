#!/usr/bin/env bash
# flake: runs a set of packages N times with -race -count=1 while a CPU hog
# keeps every core busy, and prints what failed (make flake; issue #32
# item 4). A test that fails here fails for a reason: fix the cause (wait on
# the condition, not longer), never retry.
#
#   make flake                                  # default set, N=3
#   make flake PKG=./core/cluster N=10          # one package
#   make flake PKG='./sources/...' RUN=TestX    # a -run filter
#
# Knobs (environment):
#   PKG      packages (go list patterns, space separated). Default: the whole
#            suite minus $SLOW.
#   SLOW     packages left out of the default set: they are long scenario or
#            load runs rather than unit tests (run them on their own with
#            PKG=...). Default: internal/load internal/parity
#            packaging/pkgtest xdsserver/gen/bench.
#   N        how many runs (default 3).
#   RUN      go test -run filter (default: every test).
#   SKIP     go test -skip filter (default: none).
#   HOG      busy-loop processes to start (default: the number of cores).
#   TIMEOUT  go test -timeout per run (default 30m).
#   FLAKE_DIR where each run's log goes (default a new temp dir; kept).
# Every minute a progress line; at the end a summary: runs, failures by
# test (package and name, how many of the N runs), time per run and total.
# Exit status 1 when any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-3}
RUN=${RUN:-}
SKIP=${SKIP:-}
HOG=${HOG:-$(nproc)}
TIMEOUT=${TIMEOUT:-30m}
SLOW=${SLOW:-internal/load internal/parity packaging/pkgtest xdsserver/gen/bench}
# As make test runs them: the cache test mode on.
export BAREMESH_CACHE_ASSERT=${BAREMESH_CACHE_ASSERT:-1}
FLAKE_DIR=${FLAKE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/baremesh-flake.XXXXXX")}
mkdir -p "$FLAKE_DIR"
command -v jq >/dev/null || { echo "flake: needs jq (apt-get install jq)" >&2; exit 2; }

module=$(go list -m)
if [[ -n ${PKG:-} ]]; then
  read -r -a pkgs <<<"$PKG"
else
  skip=$(printf '%s\n' $SLOW | sed "s|^|$module/|")
  mapfile -t pkgs < <(go list ./... | grep -vxF -f <(printf '%s\n' "$skip"))
fi
((${#pkgs[@]})) || { echo "flake: no packages" >&2; exit 2; }

hogs=()
ticker=""
gotest=""
cleanup() {
  # go test runs in its own process group (setsid): end it and its test
  # binaries when we are stopped.
  [[ -n $gotest ]] && kill -- -"$gotest" 2>/dev/null || true
  [[ -n $ticker ]] && kill "$ticker" 2>/dev/null || true
  ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
state=$FLAKE_DIR/state
echo "starting" >"$state"
label="${PKG:-the suite minus: $SLOW}"
echo "flake: $N run(s) of ${#pkgs[@]} package(s) ($label)${RUN:+, -run $RUN}${SKIP:+, -skip $SKIP}, -race -count=1, $HOG CPU hog(s); logs in $FLAKE_DIR" >&2

(
  while sleep 60; do
    echo "flake: $(((SECONDS - start) / 60)) min: $(cat "$state")" >&2
  done
) &
ticker=$!

# Compile first (not timed as a run) so a cold build's minutes do not count
# against the first run, and the hog does not slow the build. -exec
# /bin/true builds and links every test binary and runs none (not even a
# TestMain's set-up); go test -c cannot, as two packages share a name.
echo "building the test binaries" >"$state"
echo "flake: building the test binaries" >&2
go test -race -count=1 -exec /bin/true "${pkgs[@]}" >"$FLAKE_DIR/build.log" 2>&1 || {
  cat "$FLAKE_DIR/build.log" >&2; echo "flake: build failed" >&2; exit 2; }

for ((h = 0; h < HOG; h++)); do
  # A busy loop per core, at the tests' own priority.
  bash -c 'while :; do :; done' &
  hogs+=($!)
done

fails=$FLAKE_DIR/failures
: >"$fails"
failed_runs=0
times=()
for ((i = 1; i <= N; i++)); do
  echo "run $i/$N, failures so far: $failed_runs run(s)" >"$state"
  t0=$SECONDS
  log=$FLAKE_DIR/run-$i.json
  rc=0
  # In the background and waited for, so a signal stops us at once.
  setsid go test -json -race -count=1 -timeout "$TIMEOUT" ${RUN:+-run "$RUN"} ${SKIP:+-skip "$SKIP"} "${pkgs[@]}" \
    >"$log" 2>"$FLAKE_DIR/run-$i.stderr" &
  gotest=$!
  wait "$gotest" || rc=$?
  gotest=""
  times+=($((SECONDS - t0)))
  # The log as go test would print it, for reading.
  jq -rj 'select(.Action == "output") | .Output' "$log" >"$FLAKE_DIR/run-$i.txt" 2>/dev/null || true
  # Failed tests, and failed packages with no failed test (a build error,
  # a panic, a timeout or TestMain's leak check).
  run_fails=$(jq -r '
    select(.Action == "fail") |
    if .Test then "\(.Package) \(.Test)" else "\(.Package) (package)" end' "$log" 2>/dev/null | sort -u)
  run_fails=$(printf '%s\n' "$run_fails" | awk '
    $2 != "(package)" { pkgfail[$1] = 1; print; next }
    { pk[$1] = 1 }
    END { for (p in pk) if (!(p in pkgfail)) print p " (package: build, panic, timeout or leak check)" }')
  if [[ $rc -ne 0 || -n $run_fails ]]; then
    failed_runs=$((failed_runs + 1))
    [[ -n $run_fails ]] || run_fails="(go test exit $rc; see run-$i.stderr)"
    printf '%s\n' "$run_fails" >>"$fails"
    echo "flake: run $i/$N FAILED in ${times[-1]} s:" >&2
    printf '%s\n' "$run_fails" | sed 's/^/  /' >&2
  else
    echo "flake: run $i/$N ok in ${times[-1]} s" >&2
  fi
done

echo "flake: summary: $N run(s) of ${#pkgs[@]} package(s) ($label)${RUN:+, -run $RUN}${SKIP:+, -skip $SKIP} with $HOG CPU hog(s)" >&2
echo "flake: runs failed: $failed_runs of $N; time per run (s): ${times[*]}; total $((SECONDS - start)) s" >&2
if [[ -s $fails ]]; then
  echo "flake: failures by test (runs failed of $N):" >&2
  sort "$fails" | uniq -c | sort -rn | sed 's/^/  /' >&2
  echo "flake: logs: $FLAKE_DIR/run-*.txt" >&2
  exit 1
fi
echo "flake: no failures" >&2
