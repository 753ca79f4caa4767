// Package cds generates Envoy clusters (CDS) for sidecars, gateways and
// proxyless gRPC clients: one "outbound|PORT|SUBSET|HOST" cluster per
// visible service port and DestinationRule subset, typed by the service's
// resolution (EDS, STRICT_DNS, LOGICAL_DNS, ORIGINAL_DST) and shaped by
// the DestinationRule's traffic policy; Istio's PassthroughCluster,
// BlackHoleCluster and InboundPassthroughCluster; and the proxy's
// "inbound|PORT||" clusters.
//
// It imports core and xdsserver/gen only.
package cds

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

var _ gen.Generator = Generate

// Generate builds the clusters of in.Proxy; with in.Names set, only those
// (in the order asked, unknown names left out).
func Generate(in gen.Input) (out []gen.Resource, err error) {
	if in.Push == nil || in.Proxy == nil {
		return nil, fmt.Errorf("cds: missing push context or proxy")
	}
	v := scope.New(in.Push, in.Proxy)
	var want map[string]bool
	if len(in.Names) > 0 {
		want = make(map[string]bool, len(in.Names))
		for _, n := range in.Names {
			want[n] = true
		}
	}
	b := builder{v: v, want: want}
	if in.Part == gen.PartInbound {
		if in.Proxy.Type == model.SidecarProxy && !in.Proxy.Proxyless {
			b.inbound(in)
		}
		istioTelemetry(v, b.out) // telemetry.go
		return b.out, nil
	}
	for _, svc := range v.Services {
		for _, p := range svc.Ports {
			b.service(svc, p)
		}
	}
	switch {
	case in.Proxy.Proxyless:
	case in.Proxy.Type == model.Router:
		// A gateway has no capture and no passthrough: BlackHoleCluster
		// only, as istiod's BuildClusters gives a router.
		b.add(meshDefaults(v, blackhole()))
		if scope.AutoPassthrough(in.Push, in.Proxy) {
			for _, svc := range v.Services {
				if svc.MeshExternal {
					continue
				}
				for _, p := range svc.Ports {
					if p.Protocol != model.UDP {
						b.sniService(svc, p)
					}
				}
			}
		}
	default:
		pt, ipt := passthrough(), inboundPassthrough(in.Proxy)
		if gen.ProxyHeadersOf(in.Proxy, v.Push.Mesh).PreserveHTTP1Case {
			pt.TypedExtensionProtocolOptions, ipt.TypedExtensionProtocolOptions = passthroughHTTPOptionsPreserveCase, passthroughHTTPOptionsPreserveCase
		}
		b.add(meshDefaults(v, pt), meshDefaults(v, blackhole()), meshDefaults(v, ipt))
		if in.Proxy.Type == model.SidecarProxy && in.Part == gen.PartAll {
			b.inbound(in)
		}
	}
	istioTelemetry(v, b.out) // telemetry.go
	if want != nil {
		slices.SortStableFunc(b.out, func(x, y gen.Resource) int {
			return slices.Index(in.Names, x.Name) - slices.Index(in.Names, y.Name)
		})
	}
	return b.out, nil
}

type builder struct {
	v    *scope.View
	want map[string]bool
	out  []gen.Resource
}

// inbound adds a sidecar's inbound|PORT|| clusters.
func (b *builder) inbound(in gen.Input) {
	for _, inst := range scope.Inbound(in.Push, in.Proxy) {
		if c := inboundCluster(inst, b.v); c != nil {
			b.add(c)
		}
	}
}

func (b *builder) add(cs ...*clusterv3.Cluster) {
	for _, c := range cs {
		if b.want != nil && !b.want[c.Name] {
			continue
		}
		b.out = append(b.out, gen.Resource{Name: c.Name, Resource: c})
	}
}

// service adds the clusters of one service port: the plain one and one
// per DestinationRule subset.
func (b *builder) service(svc *model.Service, p model.Port) {
	dr := b.v.DestinationRule(svc)
	name := gen.ClusterName(gen.Outbound, p.Number, "", svc.Hostname)
	if b.want == nil || b.want[name] {
		b.add(outboundCluster(b.v, svc, p, "", nil, meshPolicy(b.v, scope.Policy(dr, p.Number, ""))))
	}
	for _, ss := range dr.GetSubsets() {
		name := gen.ClusterName(gen.Outbound, p.Number, ss.GetName(), svc.Hostname)
		if b.want != nil && !b.want[name] {
			continue
		}
		b.add(outboundCluster(b.v, svc, p, ss.GetName(), ss.GetLabels(), meshPolicy(b.v, scope.Policy(dr, p.Number, ss.GetName()))))
	}
}

// sniService adds an AUTO_PASSTHROUGH gateway's clusters of one service
// port: the plain one and one per DestinationRule subset (istiod's
// buildOutboundSniDnatClusters).
func (b *builder) sniService(svc *model.Service, p model.Port) {
	dr := b.v.DestinationRule(svc)
	if name := gen.SNIClusterName(p.Number, "", svc.Hostname); b.want == nil || b.want[name] {
		b.add(sniCluster(b.v, svc, p, "", nil, meshPolicy(b.v, scope.Policy(dr, p.Number, ""))))
	}
	for _, ss := range dr.GetSubsets() {
		if name := gen.SNIClusterName(p.Number, ss.GetName(), svc.Hostname); b.want != nil && !b.want[name] {
			continue
		}
		b.add(sniCluster(b.v, svc, p, ss.GetName(), ss.GetLabels(), meshPolicy(b.v, scope.Policy(dr, p.Number, ss.GetName()))))
	}
}

// meshDefaults gives one of the clusters no DestinationRule shapes
// (PassthroughCluster, BlackHoleCluster, InboundPassthroughCluster, the
// inbound clusters) the mesh's connectTimeout and, but for
// BlackHoleCluster, its tcpKeepalive, and the passthrough clusters the
// limits of its defaultTrafficPolicy's pool, as istiod's builders apply
// them; c is returned. The clusters are the caller's own, never shared.
func meshDefaults(v *scope.View, c *clusterv3.Cluster) *clusterv3.Cluster {
	m := v.Push.Mesh
	if d := m.GetConnectTimeout(); d != nil {
		c.ConnectTimeout = d
	}
	if c.Name != gen.BlackHoleCluster {
		applyKeepalive(c, m.GetTcpKeepalive())
	}
	if c.Name == gen.PassthroughCluster || c.Name == gen.InboundPassthroughCluster {
		// istiod's buildDefaultPassthroughCluster: the mesh's default
		// pool sets the limits (its other settings do not apply here).
		if cp := m.GetDefaultTrafficPolicy().GetConnectionPool(); cp != nil {
			c.CircuitBreakers = circuitBreakers(cp, false)
		}
	}
	return c
}

// meshPolicy is policy (a merged policy, the caller's own; nil: none)
// with the mesh's defaultTrafficPolicy's connection pool and outlier
// detection where it sets neither, as istiod's applyDefaultTrafficPolicy.
func meshPolicy(v *scope.View, policy *networking.TrafficPolicy) *networking.TrafficPolicy {
	if v.Proxy.Proxyless { // istiod's grpcgen takes no mesh default
		return policy
	}
	d := v.Push.Mesh.GetDefaultTrafficPolicy()
	cp, od := d.GetConnectionPool(), d.GetOutlierDetection()
	if (cp == nil || policy.GetConnectionPool() != nil) && (od == nil || policy.GetOutlierDetection() != nil) {
		return policy
	}
	if policy == nil {
		policy = &networking.TrafficPolicy{}
	}
	if policy.ConnectionPool == nil {
		policy.ConnectionPool = cp
	}
	if policy.OutlierDetection == nil {
		policy.OutlierDetection = od
	}
	return policy
}

// inboundPolicy is the connection pool an inbound cluster takes, as
// istiod's buildInboundCluster: the DestinationRule of the service the
// proxy serves on the port (its port-level settings for the service
// port), the mesh's defaultTrafficPolicy under it, the Sidecar's inbound
// pool for the port over both. nil when none.
func inboundPolicy(v *scope.View, inst scope.Instance) *networking.ConnectionPoolSettings {
	if cp := v.InboundConnectionPool(inst.TargetPort); cp != nil {
		return cp
	}
	var policy *networking.TrafficPolicy
	if inst.Service != nil && v.HasDestinationRules() {
		policy = scope.Policy(v.DestinationRule(inst.Service), inst.Port.Number, "")
	}
	return meshPolicy(v, policy).GetConnectionPool()
}
