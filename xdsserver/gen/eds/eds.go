// Package eds generates ClusterLoadAssignments (EDS) for the
// "outbound|PORT|SUBSET|HOST" clusters a proxy asks for: the service's
// endpoints on that port, narrowed to the subset's labels, grouped by
// locality, with weights and health, and with locality priorities for
// failover when the DestinationRule configures outlier detection, and
// the locality load balancing settings (distribute, failover,
// failoverPriority) of the DestinationRule or the mesh config.
//
// LoadAssignment is also what CDS inlines into DNS clusters. It imports
// core and xdsserver/gen only.
package eds

import (
	"fmt"
	"google.golang.org/protobuf/types/known/structpb"
	"math"
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

var _ gen.Generator = Generate

// Generate answers the cluster names in in.Names. A name that is not an
// outbound cluster of a visible, client-side load-balanced service is
// left out (Envoy then keeps waiting, as with istiod). Wildcard requests
// (no names) answer every such cluster.
func Generate(in gen.Input) ([]gen.Resource, error) {
	if in.Push == nil || in.Proxy == nil {
		return nil, fmt.Errorf("eds: missing push context or proxy")
	}
	names := in.Names
	var v *scope.View
	if len(names) == 0 {
		v = scope.New(in.Push, in.Proxy)
		names = allClusters(v)
	} else {
		v = scope.NewForLookups(in.Push, in.Proxy) // names are looked up, not listed
	}
	out := make([]gen.Resource, 0, len(names))
	for _, name := range names {
		k, ok := gen.ParseClusterName(name)
		if !ok || k.Direction != gen.Outbound {
			continue
		}
		svc := v.ServiceFor(k.Host)
		if svc == nil || !scope.UsesEDS(v.Proxy, svc) {
			continue
		}
		p, ok := svc.Port(k.Port)
		if !ok {
			continue
		}
		dr := v.DestinationRule(svc)
		var labels map[string]string
		if k.Subset != "" {
			ss := scope.Subset(dr, k.Subset)
			if ss == nil {
				continue
			}
			labels = ss.GetLabels()
		}
		cla := LoadAssignment(v, svc, p, labels, name, scope.Policy(dr, p.Number, k.Subset))
		out = append(out, gen.Resource{Name: name, Resource: cla})
	}
	return out, nil
}

func allClusters(v *scope.View) []string {
	var out []string
	for _, svc := range v.Services {
		if !scope.UsesEDS(v.Proxy, svc) {
			continue
		}
		dr := v.DestinationRule(svc)
		for _, p := range svc.Ports {
			out = append(out, gen.ClusterName(gen.Outbound, p.Number, "", svc.Hostname))
			for _, ss := range dr.GetSubsets() {
				out = append(out, gen.ClusterName(gen.Outbound, p.Number, ss.GetName(), svc.Hostname))
			}
		}
	}
	return out
}

// LoadAssignment builds the assignment of cluster name: the endpoints of
// svc on port p whose labels match subset. Endpoints are grouped per
// locality ("region/zone/subzone") in order of first appearance (the
// index sorts by address); each locality's weight is the sum of its
// endpoints' weights. The locality load balancing setting (the
// DestinationRule's, else the mesh config's) then applies as istiod
// applies it (see applyLocalityLB): distribute weights, or, when policy
// has outlier detection, failover priorities. Endpoints whose address is
// not an IP (only DNS clusters have those) are kept as hostnames.
func LoadAssignment(v *scope.View, svc *model.Service, p model.Port, subset map[string]string, name string, policy *networking.TrafficPolicy) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	// An AUTO_PASSTHROUGH gateway cannot tell whether what it passes
	// through is mTLS: its clusters keep only the endpoints that take
	// Istio mTLS, so a connection can only reach a workload's mTLS chain
	// (istiod's EndpointsWithMTLSFilter; a locality left without
	// endpoints stays, weightless).
	mtlsOnly := gen.IsSNIClusterName(name)
	nets := newNetworks(v.Proxy, v.Push.Networks)     // network.go
	var viaGW map[int]map[model.NetworkGateway]uint32 // by group: its gateways' weights
	byLocality := map[string]int{}
	var groups []group
	for _, ep := range v.Push.Endpoints.Endpoints(svc.Key()) {
		if ep.ServicePortName != p.Name || !scope.LabelsMatch(subset, ep.Labels) {
			continue
		}
		if !ep.Healthy {
			// As istiod (without "send unhealthy endpoints"): an unhealthy
			// endpoint leaves EDS, else Envoy's panic threshold could still
			// route to it.
			continue
		}
		if scope.UsesEDS(v.Proxy, svc) {
			if _, err := netip.ParseAddr(ep.Address); err != nil {
				continue // EDS needs IPs
			}
		}
		nw := ""
		if nets.gws != nil || nets.view != nil {
			if nw = ep.Network; !nets.visible(nw) {
				continue
			}
		}
		i, ok := byLocality[ep.Locality]
		if !ok {
			i = len(groups)
			loc := &endpointv3.LocalityLbEndpoints{Locality: ParseLocality(ep.Locality), LoadBalancingWeight: gen.U32(0)}
			byLocality[ep.Locality] = i
			groups = append(groups, group{loc: loc.Locality, llb: loc})
			cla.Endpoints = append(cla.Endpoints, loc)
		}
		mode := tlsMode(v, svc, ep, policy)
		if mtlsOnly && mode != "istio" {
			continue
		}
		w := ep.Weight
		if w == 0 {
			w = 1
		}
		if nets.gws != nil {
			w = nets.weight(ep.Weight)
			direct, gws := nets.route(nw)
			if !direct {
				if len(gws) > 0 && mode == "istio" { // gateways route Istio mTLS only
					if viaGW == nil {
						viaGW = map[int]map[model.NetworkGateway]uint32{}
					}
					if viaGW[i] == nil {
						viaGW[i] = map[model.NetworkGateway]uint32{}
					}
					viaGateways(viaGW[i], w, gws)
				}
				continue
			}
		}
		g := &groups[i]
		g.eps = append(g.eps, ep)
		lb := lbEndpoint(ep, mode)
		lb.LoadBalancingWeight.Value = w
		g.llb.LbEndpoints = append(g.llb.LbEndpoints, lb)
		g.llb.LoadBalancingWeight.Value = addWeight(g.llb.LoadBalancingWeight.Value, w)
	}
	for i, weights := range viaGW {
		g := &groups[i]
		lbs, eps := gatewayEndpoints(weights)
		g.llb.LbEndpoints = append(g.llb.LbEndpoints, lbs...)
		g.eps = append(g.eps, eps...)
		for _, lb := range lbs {
			g.llb.LoadBalancingWeight.Value = addWeight(g.llb.LoadBalancingWeight.Value, lb.GetLoadBalancingWeight().GetValue())
		}
	}
	for _, loc := range cla.Endpoints {
		if len(loc.LbEndpoints) == 0 {
			loc.LoadBalancingWeight = nil // left without endpoints by mtlsOnly or the networks, as istiod
		}
	}
	if len(cla.Endpoints) == 0 {
		return cla
	}
	if setting, force := scope.LocalityLbSetting(v.Push, policy, svc); setting != nil {
		if !scope.UsesEDS(v.Proxy, svc) {
			groups = nil // istiod's CDS applies no failoverPriority to DNS clusters
		}
		applyLocalityLB(cla, groups, v.Proxy.Locality, withTopology(v.Proxy.Labels, v.Proxy.Locality), setting, force || policy.GetOutlierDetection() != nil)
	}
	return cla
}

// addWeight adds endpoint weight w to a locality's sum, at most the
// largest uint32 (istiod's addUint32): weights near the maximum (a
// WorkloadEntry may give any uint32) wrapped round to a small sum.
func addWeight(sum, w uint32) uint32 {
	if w > math.MaxUint32-sum {
		return math.MaxUint32
	}
	return sum + w
}

// tlsMode is the endpoint's transport socket match value (empty: none),
// as istiod's EDS decides it (mtlsChecker): with a DestinationRule tls
// mode for the cluster, the endpoint's security.istio.io/tlsMode label
// when that mode is ISTIO_MUTUAL; else the label when it is "istio" and
// the PeerAuthentication of the endpoint's workload (its namespace and
// labels, its port) is not DISABLE, so a client's auto mTLS does not
// talk TLS to a port that serves plaintext. "disabled" is never sent.
func tlsMode(v *scope.View, svc *model.Service, ep *model.Endpoint, policy *networking.TrafficPolicy) string {
	mode := ep.Labels[tlsModeLabel]
	if mode == "" || mode == "disabled" {
		return ""
	}
	if t := policy.GetTls(); t != nil {
		if t.GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL {
			return mode
		}
		return ""
	}
	if mode != "istio" {
		return ""
	}
	ns := ep.Workload.Namespace
	if ns == "" {
		ns = svc.Namespace
	}
	if scope.PeerAuthnFor(v.Push, ns, ep.Labels).PortMode(ep.Port) == scope.MTLSDisable {
		return ""
	}
	return mode
}

func lbEndpoint(ep *model.Endpoint, tlsMode string) *endpointv3.LbEndpoint {
	status := corev3.HealthStatus_HEALTHY
	if !ep.Healthy {
		status = corev3.HealthStatus_UNHEALTHY
	}
	w := ep.Weight
	if w == 0 {
		w = 1
	}
	lb := &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: gen.SocketAddress(ep.Address, ep.Port),
		}},
		HealthStatus:        status,
		LoadBalancingWeight: gen.U32(w),
	}
	if mode := tlsMode; mode != "" {
		// Auto mTLS: the cluster's transport socket matches pick TLS
		// for {tlsMode: istio}, as Istio's endpoints carry it.
		lb.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"envoy.transport_socket_match": {Fields: map[string]*structpb.Value{"tlsMode": structpb.NewStringValue(mode)}},
		}}
	}
	AddWorkloadMetadata(lb, ep) // telemetry.go
	return lb
}

// tlsModeLabel marks an endpoint that takes Istio mTLS (value "istio").
const tlsModeLabel = "security.istio.io/tlsMode"

// ParseLocality splits "region/zone/subzone" (parts may be missing). An
// empty string gives an empty Locality, never nil: grpc-go NACKs a
// LocalityLbEndpoints without a locality ("locality without ID").
func ParseLocality(s string) *corev3.Locality {
	if s == "" {
		return &corev3.Locality{}
	}
	parts := strings.SplitN(s, "/", 3)
	l := &corev3.Locality{Region: parts[0]}
	if len(parts) > 1 {
		l.Zone = parts[1]
	}
	if len(parts) > 2 {
		l.SubZone = parts[2]
	}
	return l
}
