package lds

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestNodeIdleTimeout: a proxy's IDLE_TIMEOUT metadata is the idle
// timeout of its catch-all and service TCP proxies (a DestinationRule's
// TCP idle timeout wins) and of its connection managers, as istiod; not
// of the blackhole chain. Without it, none is set.
func TestNodeIdleTimeout(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pg, namespace: default}
spec:
  hosts: [pg.fleet.internal]
  addresses: [10.96.9.1]
  ports: [{number: 5432, name: tcp-pg, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.9.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: mq, namespace: default}
spec:
  hosts: [mq.fleet.internal]
  addresses: [10.96.9.2]
  ports: [{number: 5672, name: tcp-mq, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.9.2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: mq, namespace: default}
spec:
  host: mq.fleet.internal
  trafficPolicy: {connectionPool: {tcp: {idleTimeout: 30m}}}
`)
	idle := func(meta map[string]string) map[string]string {
		p := gentest.Node(t, "sidecar~10.0.0.9~vm.default~default.svc.cluster.local", meta)
		ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
		out := map[string]string{}
		out["pg"] = tcpProxyOf(t, ls["10.96.9.1_5432"].GetFilterChains()[0]).GetIdleTimeout().AsDuration().String()
		out["mq"] = tcpProxyOf(t, ls["10.96.9.2_5672"].GetFilterChains()[0]).GetIdleTimeout().AsDuration().String()
		for _, fc := range ls[gen.VirtualOutboundListener].GetFilterChains() {
			out[fc.GetName()] = tcpProxyOf(t, fc).GetIdleTimeout().AsDuration().String()
		}
		for _, fc := range ls[gen.VirtualInboundListener].GetFilterChains() {
			if fc.GetName() != "virtualInbound-catchall-http" {
				continue
			}
			for _, f := range fc.GetFilters() {
				h := &hcmv3.HttpConnectionManager{}
				if f.GetName() == "envoy.filters.network.http_connection_manager" && f.GetTypedConfig().UnmarshalTo(h) == nil {
					out["hcm"] = h.GetCommonHttpProtocolOptions().GetIdleTimeout().AsDuration().String()
				}
			}
		}
		return out
	}
	got := idle(map[string]string{"IDLE_TIMEOUT": "1h30m"})
	want := map[string]string{"pg": "1h30m0s", "mq": "30m0s", "virtualOutbound-catchall-tcp": "1h30m0s", "virtualOutbound-blackhole": "0s", "hcm": "1h30m0s"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("IDLE_TIMEOUT 1h30m: %s idle %s, want %s (all: %v)", k, got[k], v, got)
		}
	}
	for k, v := range idle(nil) {
		if k != "mq" && v != "0s" {
			t.Errorf("no IDLE_TIMEOUT: %s idle %s, want none", k, v)
		}
	}
}
