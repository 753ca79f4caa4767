#!/usr/bin/env bash
# Independent xDS clients for the real-client tests: gRPC C-core through
# Debian's python3-grpcio.
set -euo pipefail
if ! dpkg -s python3-grpcio >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-grpcio >/dev/null || {
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-grpcio >/dev/null; }
fi
