package cds

import (
	xdsudpa "github.com/cncf/xds/go/udpa/type/v1"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// Istio's telemetry on clusters, for istio-proxy only (model.Proxy.IstioProxy),
// as istiod writes it:
//   - alt_stat_name: the name ending in ";" (istio-proxy's stat tag
//     regexes end a name there; InboundPassthroughCluster counts as
//     "PassthroughCluster;", as istiod names it);
//   - the TCP metadata exchange filter on outbound clusters and
//     PassthroughCluster (outbound TCP exchanges peer metadata there);
//   - filter_metadata.istio: the services of the cluster (host, name,
//     namespace) the stats filter labels metrics with, "external" for a
//     mesh-external service, the DestinationRule ("config") and subset
//     that shaped it, alpn_override "false" under its SIMPLE/MUTUAL TLS.

// tcpClusterMX is shared and never altered.
var tcpClusterMX = &clusterv3.Filter{Name: "istio.metadata_exchange", TypedConfig: gen.MustAny(&xdsudpa.TypedStruct{
	TypeUrl: "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange",
	Value: &structpb.Struct{Fields: map[string]*structpb.Value{
		"protocol": structpb.NewStringValue("istio-peer-exchange"), "enable_discovery": structpb.NewBoolValue(true),
	}},
})}

// istioTelemetry adds the telemetry above to the clusters of out.
func istioTelemetry(v *scope.View, out []gen.Resource) {
	if v.Proxy.Proxyless {
		// istiod names a proxyless client's clusters' stats too (gRPC
		// ignores alt_stat_name); nothing else of the above.
		for _, r := range out {
			if c, ok := r.Resource.(*clusterv3.Cluster); ok {
				c.AltStatName = c.Name + ";"
			}
		}
		return
	}
	if !v.Proxy.IstioProxy {
		return
	}
	byHost := make(map[string]*model.Service, len(v.Services))
	for _, s := range v.Services {
		if _, ok := byHost[s.Hostname]; !ok {
			byHost[s.Hostname] = s
		}
	}
	services := map[*model.Service]*structpb.Value{}
	var inbound []scope.Instance
	inboundDone := false
	for _, r := range out {
		c, ok := r.Resource.(*clusterv3.Cluster)
		if !ok {
			continue
		}
		switch c.Name {
		case gen.InboundPassthroughCluster:
			c.AltStatName = "PassthroughCluster;"
		default:
			c.AltStatName = c.Name + ";"
		}
		if c.Name == gen.PassthroughCluster {
			c.Filters = append(c.Filters, tcpClusterMX)
		}
		k, ok := gen.ParseClusterName(c.Name)
		if !ok {
			continue
		}
		if k.Direction == gen.Inbound {
			if !inboundDone {
				inbound, inboundDone = scope.Inbound(v.Push, v.Proxy), true
			}
			if pat := v.Push.Mesh.GetInboundClusterStatName(); pat != "" {
				inboundStatName(c, pat, k.Port, inbound)
			}
			if svc := inboundMetadata(c, k.Port, inbound); svc != nil {
				// A DestinationRule with a traffic policy shapes the inbound
				// cluster too: istiod names it.
				if dr := v.DestinationRule(svc); dr.GetTrafficPolicy() != nil {
					if m, ok := v.DestinationRuleMeta(dr); ok {
						istioMetadata(c).Fields["config"] = structpb.NewStringValue(gen.ConfigPath("destination-rule", m.Namespace, m.Name))
					}
				}
			}
			continue
		}
		c.Filters = append(c.Filters, tcpClusterMX)
		svc := byHost[k.Host]
		if svc == nil {
			continue
		}
		if pat := v.Push.Mesh.GetOutboundClusterStatName(); pat != "" {
			p, _ := svc.Port(k.Port)
			c.AltStatName = gen.StatName(pat, svc.Hostname, svc.Namespace, svc.Source.Kind == "", k.Subset, k.Port, p.Name, 0) + ";"
		}
		im := istioMetadata(c)
		// One value per service, shared by its clusters (outputs are
		// only marshalled).
		sv := services[svc]
		if sv == nil {
			sv = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{serviceMetadata(svc)}})
			services[svc] = sv
		}
		im.Fields["services"] = sv
		if svc.MeshExternal && k.Subset == "" { // istiod marks the service's own cluster only
			im.Fields["external"] = structpb.NewBoolValue(true)
		}
		if dr := v.DestinationRule(svc); dr != nil {
			if m, ok := v.DestinationRuleMeta(dr); ok {
				im.Fields["config"] = structpb.NewStringValue(gen.ConfigPath("destination-rule", m.Namespace, m.Name))
			}
			if k.Subset != "" {
				im.Fields["subset"] = structpb.NewStringValue(k.Subset)
			}
			if mode := scope.Policy(dr, k.Port, k.Subset).GetTls().GetMode(); mode == networking.ClientTLSSettings_SIMPLE || mode == networking.ClientTLSSettings_MUTUAL {
				im.Fields["alpn_override"] = structpb.NewStringValue("false")
			}
		}
	}
}

// inboundMetadata lists the services the proxy serves on an inbound
// cluster's port (each host once), unless the first is mesh-external;
// it returns the first (nil: none).
func inboundMetadata(c *clusterv3.Cluster, port uint32, inst []scope.Instance) *model.Service {
	var vals []*structpb.Value
	seen := map[string]bool{}
	var first *model.Service
	for _, in := range inst {
		if in.TargetPort != port || in.Service == nil {
			continue
		}
		if first == nil {
			if in.Service.MeshExternal {
				return nil
			}
			first = in.Service
		}
		if seen[in.Service.Hostname] {
			continue
		}
		seen[in.Service.Hostname] = true
		vals = append(vals, serviceMetadata(in.Service))
	}
	if first == nil {
		return nil
	}
	istioMetadata(c).Fields["services"] = structpb.NewListValue(&structpb.ListValue{Values: vals})
	return first
}

// serviceMetadata is istiod's {host, name, namespace} of a service: the
// name of a ServiceEntry's service is its host.
func serviceMetadata(s *model.Service) *structpb.Value {
	name := s.Hostname
	if s.Source.Kind != "" && s.Source.Kind != config.ServiceEntry {
		name = s.Source.Name
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"host": structpb.NewStringValue(s.Hostname), "name": structpb.NewStringValue(name), "namespace": structpb.NewStringValue(s.Namespace),
	}})
}

func istioMetadata(c *clusterv3.Cluster) *structpb.Struct {
	if c.Metadata == nil {
		c.Metadata = &corev3.Metadata{}
	}
	if c.Metadata.FilterMetadata == nil {
		c.Metadata.FilterMetadata = map[string]*structpb.Struct{}
	}
	s := c.Metadata.FilterMetadata["istio"]
	if s == nil {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		c.Metadata.FilterMetadata["istio"] = s
	}
	return s
}

// inboundStatName names an inbound cluster's stats by the mesh's
// inboundClusterStatName, after the first service the proxy serves on
// the cluster's port (istiod's buildInboundCluster: its service port,
// and the cluster's port as the target).
func inboundStatName(c *clusterv3.Cluster, pattern string, port uint32, inst []scope.Instance) {
	for _, in := range inst {
		if in.TargetPort == port && in.Service != nil {
			s := in.Service
			c.AltStatName = gen.StatName(pattern, s.Hostname, s.Namespace, s.Source.Kind == "", "", in.Port.Number, in.Port.Name, port) + ";"
			return
		}
	}
}
