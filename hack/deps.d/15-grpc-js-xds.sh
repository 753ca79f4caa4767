#!/usr/bin/env bash
# The third real xDS client for internal/e2e: @grpc/grpc-js-xds and its
# peer @grpc/grpc-js (with their dependencies) from npm, installed into
# ${BAREMESH_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baremesh/npm}/node_modules
# at the pinned versions below; node and npm from Debian (packages nodejs,
# npm) when there is no node/npm yet. Idempotent: does nothing when those
# versions are already there. The tests skip, naming the reason, without it.
set -euo pipefail
GRPC_JS_XDS=1.14.1
GRPC_JS=1.14.7
dir=${BAREMESH_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baremesh/npm}

need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "15-grpc-js-xds: missing ${need[*]}; run as root to install (grpc-js-xds tests skip without them)" >&2
    exit 0
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

have() { # have PKG VERSION: PKG at VERSION is installed in $dir
  node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
    "$dir/node_modules/$1/package.json" "$2" 2>/dev/null
}
if have @grpc/grpc-js-xds "$GRPC_JS_XDS" && have @grpc/grpc-js "$GRPC_JS"; then
  exit 0
fi
mkdir -p "$dir"
[[ -f $dir/package.json ]] || echo '{"name": "baremesh-e2e-clients", "private": true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact \
  "@grpc/grpc-js-xds@$GRPC_JS_XDS" "@grpc/grpc-js@$GRPC_JS" >/dev/null
