#!/usr/bin/env bash
# Installs what `make test` needs. Runs every hack/deps.d/*.sh in order; each
# is idempotent and quiet when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in hack/deps.d/*.sh; do
  [[ -e $f ]] || continue
  bash "$f"
done
