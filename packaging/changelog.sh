#!/bin/sh
# changelog.sh PACKAGE VERSION: the Debian changelog entry for a package
# built by `make package` (gzip it into /usr/share/doc/PACKAGE/changelog.gz).
# The date is the last commit's, so that builds are reproducible.
set -eu
pkg=$1 version=$2
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
cat <<END
$pkg ($version) unstable; urgency=medium

  * baremesh $version, built from the baremesh repository with nfpm.
    See /usr/share/doc/baremesh/README.md.

 -- baremesh maintainers <maintainers@baremesh.invalid>  $(LC_ALL=C date -u -R -d "@$epoch")
END
