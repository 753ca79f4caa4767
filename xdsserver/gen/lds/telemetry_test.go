package lds

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

const telemetryScenario = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 8081, name: http-alt, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  workloadSelector: {labels: {app: web}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: web-1, namespace: shop}
spec: {address: 10.0.0.1, labels: {app: web}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-1, namespace: shop}
spec: {address: 10.0.0.2, labels: {app: db}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh, namespace: istio-system}
spec:
  metrics: [{providers: [{name: prometheus}]}]
  accessLogging: [{providers: [{name: envoy}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web-quiet, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  metrics: [{overrides: [{match: {metric: ALL_METRICS, mode: SERVER}, disabled: true}]}]
`

func telemetryProxy(t *testing.T, ip, app string, istio bool) *model.Proxy {
	t.Helper()
	md := map[string]string{}
	if istio {
		md["ISTIO_VERSION"] = "1.31.0"
	}
	return gentest.ProxySpec{ID: "sidecar~" + ip + "~" + app + "-1.shop~shop.svc.cluster.local", Metadata: md, Labels: map[string]string{"app": app}}.Proxy(t)
}

// inboundHCM is the connection manager of virtualInbound's chain for
// port 8080 (plaintext), and that chain's network filter names.
func inboundHCM(t *testing.T, res []gen.Resource) (*hcmv3.HttpConnectionManager, []string) {
	t.Helper()
	for _, r := range res {
		l := r.Resource.(*listenerv3.Listener)
		if l.Name != gen.VirtualInboundListener {
			continue
		}
		fc := gentest.MatchChain(l, gentest.Conn{Port: 8080, HTTP: "http/1.1"})
		if fc == nil {
			t.Fatal("no inbound chain for 8080")
		}
		var names []string
		var h *hcmv3.HttpConnectionManager
		for _, f := range fc.Filters {
			names = append(names, f.Name)
			if f.Name == hcmName {
				h = &hcmv3.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
					t.Fatal(err)
				}
			}
		}
		return h, names
	}
	t.Fatal("no virtualInbound")
	return nil, nil
}

func httpFilterNames(h *hcmv3.HttpConnectionManager) []string {
	var out []string
	for _, f := range h.HttpFilters {
		out = append(out, f.Name)
	}
	return out
}

// TestIstioProxyTelemetry: istio-proxy gets Istio's filters where istiod
// puts them and the Telemetry API's metrics per workload and side; a
// plain Envoy gets the access logs and tracing but none of Istio's
// filters (it could not load them).
func TestIstioProxyTelemetry(t *testing.T) {
	pc := gentest.MustBuild(t, telemetryScenario)
	gen1 := func(p *model.Proxy) []gen.Resource {
		return gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p})
	}

	// web (server-side metrics off by its workload Telemetry), istio-proxy.
	h, chain := inboundHCM(t, gen1(telemetryProxy(t, "10.0.0.1", "web", true)))
	if want := []string{mxName, hcmName}; !slices.Equal(chain, want) {
		t.Errorf("istio-proxy inbound chain %v, want %v", chain, want)
	}
	if got, want := httpFilterNames(h), []string{mxName, grpcStatsName, "envoy.filters.http.fault", "envoy.filters.http.cors", routerName}; !slices.Equal(got, want) {
		t.Errorf("web inbound HTTP filters %v, want %v (no istio.stats: its server metrics are off)", got, want)
	}
	if h.StatPrefix != "inbound_0.0.0.0_8080;" || h.Tracing == nil || len(h.AccessLog) != 1 || h.RequestIdExtension == nil {
		t.Errorf("istio-proxy HCM: stat prefix %q, tracing %v, access logs %d, request ID %v", h.StatPrefix, h.Tracing != nil, len(h.AccessLog), h.RequestIdExtension != nil)
	}

	// db (mesh-wide metrics on), istio-proxy: istio.stats before the router.
	// db serves nothing, so its outbound listener to web carries them.
	found := false
	for _, r := range gen1(telemetryProxy(t, "10.0.0.2", "db", true)) {
		l := r.Resource.(*listenerv3.Listener)
		// A chain listeners share (the default PassthroughFilterChain)
		// logs once, not once per listener.
		if d := l.DefaultFilterChain; d != nil {
			var tp tcpproxyv3.TcpProxy
			if err := d.Filters[len(d.Filters)-1].GetTypedConfig().UnmarshalTo(&tp); err != nil {
				t.Fatal(err)
			}
			if len(tp.AccessLog) != 1 {
				t.Errorf("%s: default chain has %d access logs, want 1", l.Name, len(tp.AccessLog))
			}
		}
		if l.Name != "0.0.0.0_8080" {
			continue
		}
		found = true
		var h hcmv3.HttpConnectionManager
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
			t.Fatal(err)
		}
		got := httpFilterNames(&h)
		want := []string{mxName, grpcStatsName, alpnName, "envoy.filters.http.fault", "envoy.filters.http.cors", statsName, routerName}
		if !slices.Equal(got, want) {
			t.Errorf("db outbound HTTP filters %v, want %v", got, want)
		}
	}

	if !found {
		t.Error("db has no outbound listener 0.0.0.0_8080")
	}

	// The same workload as plain Envoy: no Istio filter anywhere.
	res := gen1(telemetryProxy(t, "10.0.0.1", "web", false))
	h, chain = inboundHCM(t, res)
	if slices.Contains(chain, mxName) || slices.ContainsFunc(httpFilterNames(h), func(n string) bool { return n == mxName || n == grpcStatsName || n == statsName || n == alpnName }) {
		t.Errorf("plain Envoy got Istio filters: chain %v, HTTP %v", chain, httpFilterNames(h))
	}
	if h.StatPrefix != "inbound_0.0.0.0_8080" || h.Tracing == nil || len(h.AccessLog) != 1 {
		t.Errorf("plain Envoy HCM: stat prefix %q, tracing %v, access logs %d", h.StatPrefix, h.Tracing != nil, len(h.AccessLog))
	}
}
