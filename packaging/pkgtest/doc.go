// Package pkgtest tests the baremesh packages as a user meets them: it
// builds the .deb and .rpm with `make package`, runs lintian on the .debs,
// inspects and installs the .rpms with Debian's rpm, and installs the .debs
// in a minimal Debian booted under systemd-nspawn to watch systemd run the
// services (READY, reload, restart, watchdog, stop, remove, purge,
// upgrade). It has no non-test code; it imports nothing of baremesh.
package pkgtest
