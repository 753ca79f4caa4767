// Package chaos is the fleet under faults (issue #32 item 1): three real
// baremeshd processes in one memberlist cluster, each in its own network
// namespace made by the test (a partition is an iptables DROP between
// namespaces), each with its state directory on a small tmpfs, simulated
// proxies auto-registering over the TLS port with certificates, spread
// across the replicas, and a config file changed every second. The test
// applies faults one after another (a partition and its heal, a kill -9
// loop, a full state disk, a restart of all three), then overlapping (a
// partition during kills, a full disk during a partition with a token
// minted on the full disk, a restart of all three with one disk full:
// overlap_linux_test.go), and after each
// measures what was lost, duplicated or left stale, whether tokens and
// the CA survived, how long until the fleet converged, and the replicas'
// memory and goroutines. TestRollingUpgrade runs a cluster of the
// previous release (built from git) through an upgrade replica by replica,
// a downgrade, and a state directory of a later format.
//
// The package holds tests only (chaos_linux_test.go and its helpers);
// they need root, iproute2 and iptables and skip, saying why, without
// them. A short form of TestChaos runs in make test; make chaos
// (CHAOS_FULL=1) runs the full form (5,000 proxies, a 5-minute kill loop)
// and the upgrade.
package chaos
