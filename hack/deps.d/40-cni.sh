#!/usr/bin/env bash
# CNI plugin tests (nodeagent/cni): the real bridge, host-local and loopback
# plugins built from github.com/containernetworking/plugins (the version is
# the go.mod tool requirement) into /var/cache/baremesh-test/cni-bin/VERSION,
# and a real kube-apiserver + etcd from shared/tools/kube-assets (cached in
# ~/.cache/kube-assets; the first build takes 5-8 minutes). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
ver=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
dir=${BAREMESH_CNI_BIN:-/var/cache/baremesh-test/cni-bin/$ver}
if [[ ! -x $dir/bridge || ! -x $dir/host-local || ! -x $dir/loopback ]]; then
  if mkdir -p "$dir" 2>/dev/null; then
    CGO_ENABLED=0 go build -o "$dir/" \
      github.com/containernetworking/plugins/plugins/main/bridge \
      github.com/containernetworking/plugins/plugins/ipam/host-local \
      github.com/containernetworking/plugins/plugins/main/loopback
  else
    echo "40-cni: cannot create $dir; the CNI tests build the plugins themselves or skip" >&2
  fi
fi
assets=""
for cand in "${KUBE_ASSETS_TOOL:-}" ../shared/tools/kube-assets; do
  [[ -n $cand && -x $cand ]] && { assets=$cand; break; }
done
if [[ -n $assets ]]; then
  "$assets" >/dev/null
else
  echo "40-cni: shared/tools/kube-assets not found; the tests that need a kube-apiserver will skip" >&2
fi
