#!/usr/bin/env bash
# Installs what `make test` needs. Runs every hack/deps.d/*.sh in order; each
# is idempotent and quiet when there is nothing to do. Each step is named
# with what it installs (its header's first line) and how long it took: on a
# fresh machine the slow ones are the kube-apiserver + etcd build (40-cni,
# 5-8 minutes), the istiod + pilot-agent build (50-istio, about 6 minutes)
# and the Debian rootfs for the package tests (30-packaging, about a
# minute); warm, the whole script takes seconds.
#
# A step whose header has the line "# test-deps: beside the others" only
# builds from the Go module proxy into its own cache (no apt, nothing a
# later step reads): it starts in the background when its turn comes and
# the script waits for it at the end. The two long builds overlap that
# way: each leaves a core idle while it downloads modules or links.
set -euo pipefail
cd "$(dirname "$0")/.."
pids=()
names=()
for f in hack/deps.d/*.sh; do
  [[ -e $f ]] || continue
  what=$(sed -n '2s/^# *//p' "$f")
  name=$(basename "$f")
  step() {
    local start=$SECONDS rc=0
    # A line a minute while a step runs (the cold builds are long and quiet).
    hack/heartbeat.sh "test-deps: $name" bash "$f" || rc=$?
    echo "test-deps: $name $([[ $rc == 0 ]] && echo done || echo "FAILED (exit $rc)") in $((SECONDS - start)) s" >&2
    return "$rc"
  }
  if grep -qx '# test-deps: beside the others' "$f"; then
    echo "test-deps: $name: $what (beside the next steps)" >&2
    step &
    pids+=($!)
    names+=("$name")
  else
    echo "test-deps: $name: $what" >&2
    step
  fi
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "test-deps: ${names[$i]} failed" >&2; rc=1; }
done
exit "$rc"
