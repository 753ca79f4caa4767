package eds_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestLocalityLBReadsOnlyKeyFields generates the locality-lb scenario
// for each proxy and for a copy holding only the fields of the EDS cache
// key (xdsserver's edsKey): the results must be the same, or the cache
// would serve one proxy's weights and priorities to another.
func TestLocalityLBReadsOnlyKeyFields(t *testing.T) {
	dir := "../testdata/locality-lb"
	pc := gentest.Scenario(t, dir)
	for _, spec := range gentest.Proxies(t, dir) {
		p := spec.Proxy(t)
		p.Network, p.ClusterID, p.WorkloadName, p.ServiceAccount = "net-x", "cluster-x", "w", "sa"
		p.Metadata = map[string]string{"NETWORK": "net-x"}
		keyOnly := &model.Proxy{ID: "cache", Type: p.Type, Namespace: p.Namespace, DNSDomain: p.DNSDomain,
			Labels: p.Labels, Proxyless: p.Proxyless, Locality: p.Locality, Metadata: map[string]string{}}
		full := gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: p})
		reduced := gentest.Run(t, eds.Generate, gen.Input{Push: pc, Proxy: keyOnly})
		if len(full) != len(reduced) || len(full) == 0 {
			t.Fatalf("%s: %d resources, %d from the key's fields", spec.Name, len(full), len(reduced))
		}
		for i := range full {
			if !proto.Equal(full[i].Resource, reduced[i].Resource) {
				t.Errorf("%s: %s differs when generated from the key's fields", spec.Name, full[i].Name)
			}
		}
	}
}
