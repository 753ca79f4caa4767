#!/usr/bin/env bash
# Observability tests (internal/observability): promtool from Debian's
# prometheus package (alert rules, dashboard queries), headless chromium and
# fonts-dejavu-core (the dashboard screenshot).
set -euo pipefail
need=()
for pkg in prometheus chromium fonts-dejavu-core; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "60-observability: missing ${need[*]}; run as root to install (the promtool and screenshot tests skip without them)" >&2
    exit 0
  fi
  apt-get update -qq
  # --no-install-recommends: only promtool and the server are needed, not
  # the exporters the package recommends.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

