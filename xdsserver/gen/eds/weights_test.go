package eds

import (
	"math"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestLocalityWeightSaturates: endpoints whose weights sum past the
// uint32 range (a WorkloadEntry may give any uint32) make a locality
// weight of the largest uint32, as istiod's; before, the sum wrapped
// round to a small number.
func TestLocalityWeightSaturates(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: heavy, namespace: default}
spec:
  hosts: [heavy.fleet.internal]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, weight: 4000000000}, {address: 10.0.0.2, weight: 4000000000}]
`)
	const cluster = "outbound|80||heavy.fleet.internal"
	p := gentest.Node(t, "sidecar~10.9.0.1~vm.default~default.svc.cluster.local", nil)
	las := gentest.ByName[*endpointv3.ClusterLoadAssignment](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p, Names: []string{cluster}}))
	if w := las[cluster].GetEndpoints()[0].GetLoadBalancingWeight().GetValue(); w != math.MaxUint32 {
		t.Errorf("locality weight %d, want %d", w, uint32(math.MaxUint32))
	}
}
