// Package observability tests what ships for watching baremeshd itself:
// the Grafana dashboard (examples/grafana) and the Prometheus alert rules
// with their promtool unit tests (examples/prometheus). Its tests check the
// rules with Debian's promtool, parse every dashboard query with it, and
// check that every metric the dashboard and the rules name is one a real
// in-process baremeshd exposes. It has no non-test code beyond the helpers
// the tests share; nothing imports it.
package observability
