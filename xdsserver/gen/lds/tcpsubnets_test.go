package lds

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestTCPDestinationSubnets: a TCP rule matching destinationSubnets
// routes only connections to those subnets; the rules after it still
// take the others (istiod's buildSidecarOutboundTCPFilterChainOpts).
// Before, the subnet rule took every connection to the port.
func TestTCPDestinationSubnets(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ledger, namespace: default}
spec:
  hosts: [ledger.fleet.internal]
  ports: [{number: 7433, name: tcp-ledger, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.11.1, labels: {site: primary}}, {address: 10.77.0.1, labels: {site: dr}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ledger, namespace: default}
spec:
  host: ledger.fleet.internal
  subsets: [{name: primary, labels: {site: primary}}, {name: dr, labels: {site: dr}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ledger, namespace: default}
spec:
  hosts: [ledger.fleet.internal]
  tcp:
  - match: [{destinationSubnets: [10.77.0.0/16]}]
    route: [{destination: {host: ledger.fleet.internal, subset: dr}}]
  - route: [{destination: {host: ledger.fleet.internal, subset: primary}}]
`)
	p := gentest.Node(t, "sidecar~10.0.0.9~vm.default~default.svc.cluster.local", nil)
	l := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))["0.0.0.0_7433"]
	if l == nil {
		t.Fatal("no listener 0.0.0.0_7433")
	}
	var subnet, rest string
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		if fc == nil || len(fc.GetFilters()) == 0 {
			continue
		}
		switch pr := fc.GetFilterChainMatch().GetPrefixRanges(); {
		case len(pr) == 1 && pr[0].GetAddressPrefix() == "10.77.0.0" && pr[0].GetPrefixLen().GetValue() == 16:
			subnet = tcpProxyOf(t, fc).GetCluster()
		case len(pr) == 0 && fc.GetFilterChainMatch().GetDestinationPort() == nil:
			rest = tcpProxyOf(t, fc).GetCluster()
		}
	}
	if subnet != "outbound|7433|dr|ledger.fleet.internal" {
		t.Errorf("to the DR subnet: %q", subnet)
	}
	if rest != "outbound|7433|primary|ledger.fleet.internal" {
		t.Errorf("elsewhere: %q, want the next rule's primary", rest)
	}
}
