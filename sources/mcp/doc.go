// Package mcp is the config source for upstream MCP-over-xDS servers
// (istiod, Nacos, Higress): Istio's `configSources: xds://host:port`. One
// Upstream subscribes over one ADS stream, SotW or Delta, to the Istio type
// URLs of the kinds baremesh reads (networking.istio.io/v1/ServiceEntry…),
// decodes resources wrapped in istio.mcp.v1alpha1.Resource or sent as the
// Istio message itself, validates them with core/config's rules, ACKs good
// responses and NACKs bad ones naming each resource and reason, and delivers
// differences to a store.Sink. It reconnects with backoff and jitter, keeps
// the last good state while the upstream is down and resyncs by difference,
// so a restart of an unchanged upstream raises no event.
//
// It imports core only; never xdsserver or another source.
package mcp
