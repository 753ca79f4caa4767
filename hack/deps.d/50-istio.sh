#!/usr/bin/env bash
# Istio's own pilot-agent and istiod (pilot-discovery), built from the Go
# module istio.io/istio by shared/tools/istio-bins, as real peers for the
# CA, VM onboarding and MCP tests (internal/onboard, internal/e2e). Cached in
# ~/.cache/istio-bins; the first build takes about 10 minutes on 2 cores.
# Without the tool the tests that need these binaries skip and say why.
set -euo pipefail
cd "$(dirname "$0")/../.."
for cand in "${ISTIO_BINS_TOOL:-}" ../shared/tools/istio-bins; do
  if [[ -n $cand && -x $cand ]]; then
    "$cand" >/dev/null
    exit 0
  fi
done
echo "50-istio: shared/tools/istio-bins not found; the tests that need Istio's binaries will skip" >&2
