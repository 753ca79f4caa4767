#!/usr/bin/env bash
# Installs what `make test` needs. Runs every hack/deps.d/*.sh in order; each
# is idempotent and quiet when there is nothing to do. Each step is named
# with what it installs (its header's first line) and how long it took: on a
# fresh machine the slow ones are the kube-apiserver + etcd build (40-cni,
# 5-8 minutes) and the Debian rootfs for the package tests (30-packaging,
# about a minute); warm, the whole script takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in hack/deps.d/*.sh; do
  [[ -e $f ]] || continue
  what=$(sed -n '2s/^# *//p' "$f")
  echo "test-deps: $(basename "$f"): $what" >&2
  start=$SECONDS
  # A line a minute while a step runs (the cold builds are long and quiet).
  hack/heartbeat.sh "test-deps: $(basename "$f")" bash "$f"
  echo "test-deps: $(basename "$f") done in $((SECONDS - start)) s" >&2
done
