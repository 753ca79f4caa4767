#!/usr/bin/env bash
# Node agent tests: iptables (nft and legacy binaries), iproute2 (ip netns)
# and util-linux (setpriv, to run clients as the proxy's UID).
set -euo pipefail
need=()
for pkg in iptables iproute2 util-linux; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "20-nodeagent: missing ${need[*]}; run as root to install (netns tests skip without them)" >&2
    exit 0
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
