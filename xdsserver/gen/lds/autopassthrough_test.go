package lds

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestAutoPassthrough: an AUTO_PASSTHROUGH server forwards Istio mTLS by
// its SNI, one chain per service port and subset under its hosts (no
// VirtualService needed), matched by the SNI and Istio's mTLS ALPNs, to
// the cluster of that name (istiod's builtAutoPassthroughFilterChains).
// Before, the server was taken for PASSTHROUGH and, with no
// VirtualService, the gateway had no listener.
func TestAutoPassthrough(t *testing.T) {
	pc := gentest.MustBuild(t, gentest.EastWestConfig)
	p := gentest.ProxySpec{ID: "router~10.0.0.3~eastwest-1.istio-system~istio-system.svc.cluster.local", Labels: map[string]string{"istio": "eastwestgateway"}}.Proxy(t)
	ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	l := ls["0.0.0.0_15443"]
	if l == nil {
		t.Fatalf("no listener 0.0.0.0_15443 (have %d)", len(ls))
	}
	var got []string
	for _, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if len(m.GetServerNames()) != 1 || !slices.Equal(m.GetApplicationProtocols(), istioMTLSALPNs) {
			t.Errorf("chain match %v, want one SNI and Istio's mTLS ALPNs", m)
			continue
		}
		if c := tcpProxyOf(t, fc).GetCluster(); c != m.GetServerNames()[0] {
			t.Errorf("SNI %s forwarded to %q, want the cluster of that name", m.GetServerNames()[0], c)
		}
		got = append(got, m.GetServerNames()[0])
	}
	want := []string{"outbound_.5432_._.inventory.fleet.internal", "outbound_.5432_.v1_.inventory.fleet.internal"}
	if !slices.Equal(got, want) {
		t.Errorf("SNIs %v, want %v", got, want)
	}
	if len(l.GetListenerFilters()) == 0 {
		t.Error("no TLS inspector: SNI would never be read")
	}
}
