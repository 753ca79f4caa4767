#!/usr/bin/env bash
# Packaging (make package, packaging/pkgtest): nfpm from the Go module
# proxy; debootstrap, systemd-nspawn (systemd-container), lintian and rpm
# from Debian for the package tests.
set -euo pipefail
NFPM_VERSION=v2.44.1 # v2.45+ need modules the proxy here does not serve
nfpm="$(go env GOPATH)/bin/nfpm"
if [[ ! -x $nfpm ]] || ! go version -m "$nfpm" | grep -q "nfpm/v2[[:space:]]*${NFPM_VERSION}"; then
  go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@${NFPM_VERSION}"
fi
need=()
for pkg in debootstrap systemd-container lintian rpm; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "30-packaging: missing ${need[*]}; run as root to install (packaging tests skip without them)" >&2
    exit 0
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
