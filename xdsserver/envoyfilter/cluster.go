package envoyfilter

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// patchCluster applies CLUSTER MERGE and REMOVE patches to c; false when
// c is removed. (ADD is Apply's.)
func patchCluster(r *run, c *clusterv3.Cluster) bool {
	for _, p := range r.patches(networking.EnvoyFilter_CLUSTER) {
		if !clusterMatch(c, p, r.ps.inbound) {
			continue
		}
		switch {
		case p.op == networking.EnvoyFilter_Patch_REMOVE:
			r.mark(p)
			return false
		case isMerge(p.op):
			r.mark(p)
			if err := mergeCluster(c, p); err != nil {
				r.fail(p, err)
			}
		}
	}
	return true
}

// mergeCluster merges p's value into c; a transport socket in the value
// is merged into c's socket (or transport socket match) of the same name
// inside its Any, or set when c has none, as istiod does.
func mergeCluster(c *clusterv3.Cluster, p *patch) error {
	v := p.value.(*clusterv3.Cluster)
	ts := v.GetTransportSocket()
	if ts == nil {
		return p.merge(c)
	}
	var dst *corev3.TransportSocket
	if len(c.GetTransportSocketMatches()) > 0 {
		for _, m := range c.GetTransportSocketMatches() {
			if m.GetTransportSocket() != nil && m.GetTransportSocket().GetName() == ts.GetName() {
				dst = m.GetTransportSocket()
				break
			}
		}
		if dst == nil {
			return nil // istiod: nothing merged, not even the rest of the value
		}
	} else if c.GetTransportSocket() != nil && c.GetTransportSocket().GetName() == ts.GetName() {
		dst = c.GetTransportSocket()
	}
	if dst == nil {
		c.TransportSocket = clone(ts)
		return nil
	}
	if d, s := dst.GetTypedConfig(), ts.GetTypedConfig(); d != nil && s != nil {
		merged, err := mergeAny(d, s)
		if err != nil {
			return fmt.Errorf("transport socket %s: %w", ts.GetName(), err)
		}
		dst.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: merged}
	}
	return nil
}

// clusterMatch is istiod's: the name, else the parts of a
// "direction|port|subset|host" name; an inbound cluster's service is
// any of those the proxy serves on its port (inbound).
func clusterMatch(c *clusterv3.Cluster, p *patch, inbound map[uint32][]string) bool {
	m := p.match.GetCluster()
	if m == nil {
		return true
	}
	if m.GetName() != "" {
		return m.GetName() == c.GetName()
	}
	port, subset, hosts := 0, "", []string{""}
	if k, ok := gen.ParseClusterName(c.GetName()); ok { // both of Istio's forms, as its ParseSubsetKey
		port, subset, hosts[0] = int(k.Port), k.Subset, k.Host
		if k.Direction == gen.Inbound {
			if hs := inbound[k.Port]; len(hs) > 0 {
				hosts = hs
			}
		}
	}
	if m.GetSubset() != "" && m.GetSubset() != subset {
		return false
	}
	if m.GetService() != "" && !slices.Contains(hosts, m.GetService()) {
		return false
	}
	if m.GetPortNumber() != 0 && int(m.GetPortNumber()) != port {
		return false
	}
	return true
}
