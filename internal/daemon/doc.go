// Package daemon wires baremeshd: the sources, the aggregate store, the
// push pipeline, the xDS server and the HTTP debug/metrics endpoints. It is
// the only place that knows all of them. Its configuration is
// internal/daemonconfig's (daemonconfig.Config, Load, Defaults), so that
// tools reading it need not link this package.
package daemon
