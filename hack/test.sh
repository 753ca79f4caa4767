#!/usr/bin/env bash
# test: make test's checks after test-deps. go vet and staticcheck run
# beside `go test -race` rather than before it, and go test runs up to
# TEST_P (default 4) packages at once rather than one per core: the long
# test packages (packaging in systemd-nspawn, the parity run against
# istiod, the end-to-end and chaos runs) spend much of their time waiting
# on processes and timers, and a run one after another left a quarter of
# the 2 cores idle while they waited (issue #32: a cold run within 40
# minutes). The checkers' findings are printed at the end; the exit
# status is non-zero when any of the three failed.
#
#   hack/test.sh        (GO, STATICCHECK, STATICCHECK_VERSION, TEST_P)
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}
STATICCHECK=${STATICCHECK:-$($GO env GOPATH)/bin/staticcheck}
P=${TEST_P:-4}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The checkers, in the background; their output waits in $logs.
hack/heartbeat.sh "make test: go vet" "$GO" vet ./... >"$logs/vet" 2>&1 &
vet=$!
{
  # The install's own output (module downloads) is kept apart: it is not
  # a finding, and is shown only when the install fails.
  "$STATICCHECK" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})" ||
    "$GO" install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" >"$logs/install" 2>&1 ||
    { cat "$logs/install"; exit 1; }
  hack/heartbeat.sh "make test: staticcheck" "$STATICCHECK" ./...
} >"$logs/staticcheck" 2>&1 &
sc=$!

start=$SECONDS
BAREMESH_CACHE_ASSERT=1 hack/heartbeat.sh "make test: go test" "$GO" test -race -count=1 -p "$P" -timeout 30m ./...
trc=$?
echo "make test: go test exit $trc after $((SECONDS - start)) s" >&2

wait "$vet"
vrc=$?
wait "$sc"
src=$?
for c in vet staticcheck; do
  rc=$vrc
  [[ $c == staticcheck ]] && rc=$src
  # Heartbeat lines were progress while it ran; only findings remain.
  findings=$(grep -v '^make test: ' "$logs/$c")
  if [[ $rc -ne 0 || -n $findings ]]; then
    echo "make test: $c exit $rc:" >&2
    printf '%s\n' "$findings" >&2
  else
    echo "make test: $c ok" >&2
  fi
done
[[ $trc -eq 0 && $vrc -eq 0 && $src -eq 0 ]]
