package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestDualStackInboundBind (issue #25 item 8): connections to the local
// application leave from 127.0.0.6, from ::6 too on a dual-stack proxy
// (Envoy picks the destination's family), from ::6 alone on an
// IPv6-only one, as istiod's passthrough bind IPs.
func TestDualStackInboundBind(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`)
	for ips, want := range map[string][]string{
		"10.0.0.1":         {"127.0.0.6"},
		"10.0.0.1,fd00::1": {"127.0.0.6", "::6"},
		"fd00::1":          {"::6"},
	} {
		p := gentest.Node(t, "sidecar~10.0.0.1~web.default~default.svc.cluster.local", map[string]string{"INSTANCE_IPS": ips})
		res := gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p})
		checked := 0
		for _, r := range res {
			c := r.Resource.(*clusterv3.Cluster)
			b := c.GetUpstreamBindConfig()
			if b == nil {
				continue
			}
			checked++
			got := []string{b.GetSourceAddress().GetAddress()}
			for _, e := range b.GetExtraSourceAddresses() {
				got = append(got, e.GetAddress().GetAddress())
			}
			if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				t.Errorf("%s: %s binds %v, want %v", ips, c.GetName(), got, want)
			}
		}
		// InboundPassthroughCluster, and inbound|8080|| where the
		// endpoint is at the proxy's IPv4 address.
		want := 2
		if ips == "fd00::1" {
			want = 1
		}
		if checked != want {
			t.Errorf("%s: %d clusters bind locally, want %d", ips, checked, want)
		}
	}
}
