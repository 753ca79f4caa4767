// Package model owns service discovery: Services, Endpoints and
// WorkloadInstances built from ServiceEntries and WorkloadEntries and from
// Kubernetes Services with their EndpointSlices and Pods (converted by
// sources/kube into KubeService and WorkloadInstance values, kube.go),
// including the cross cases (a ServiceEntry selecting Pods, a Service
// selecting WorkloadEntries), the
// deterministic allocation of addresses to ServiceEntries that declare
// none, and the incremental, per-service and per-shard endpoint index that
// endpoint-only changes go through without rebuilding anything else.
//
// It imports only core/config and core/store.
package model

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/config"
)

// Protocol is a port's application protocol as Istio names it.
type Protocol string

// Protocols Istio distinguishes.
const (
	HTTP        Protocol = "HTTP"
	HTTP2       Protocol = "HTTP2"
	GRPC        Protocol = "GRPC"
	GRPCWeb     Protocol = "GRPC-WEB"
	HTTPS       Protocol = "HTTPS"
	TLS         Protocol = "TLS"
	TCP         Protocol = "TCP"
	UDP         Protocol = "UDP"
	Mongo       Protocol = "MONGO"
	Redis       Protocol = "REDIS"
	MySQL       Protocol = "MYSQL"
	Unsupported Protocol = "" // auto-detect
)

// ParseProtocol maps a port's protocol (case-insensitive), or its name
// prefix as Istio does ("http-web", "grpc"), to a Protocol.
func ParseProtocol(protocol, portName string) Protocol {
	if p := protocolOf(protocol); p != Unsupported {
		return p
	}
	name := strings.ToLower(portName)
	if i := strings.IndexByte(name, '-'); i >= 0 {
		name = name[:i]
	}
	return protocolOf(name)
}

func protocolOf(s string) Protocol {
	switch strings.ToUpper(s) {
	case "HTTP":
		return HTTP
	case "HTTP2":
		return HTTP2
	case "GRPC":
		return GRPC
	case "GRPC-WEB":
		return GRPCWeb
	case "HTTPS":
		return HTTPS
	case "TLS":
		return TLS
	case "TCP":
		return TCP
	case "UDP":
		return UDP
	case "MONGO":
		return Mongo
	case "REDIS":
		return Redis
	case "MYSQL":
		return MySQL
	}
	return Unsupported
}

// IsHTTP reports whether the protocol is served by an HTTP connection
// manager.
func (p Protocol) IsHTTP() bool {
	return p == HTTP || p == HTTP2 || p == GRPC || p == GRPCWeb
}

// IsHTTP2 reports whether upstream connections must speak HTTP/2.
func (p Protocol) IsHTTP2() bool { return p == HTTP2 || p == GRPC || p == GRPCWeb }

// IsGRPC reports whether the protocol is gRPC (or gRPC-Web).
func (p Protocol) IsGRPC() bool { return p == GRPC || p == GRPCWeb }

// Port is one service port.
type Port struct {
	Name       string
	Number     uint32
	Protocol   Protocol
	TargetPort uint32
}

// Resolution says how a proxy finds a service's endpoints.
type Resolution int

// Resolutions, as Istio's ServiceEntry resolution.
const (
	// ClientSideLB: endpoints come from EDS (STATIC).
	ClientSideLB Resolution = iota
	// DNSLB: the proxy resolves endpoint hostnames (DNS).
	DNSLB
	// DNSRoundRobinLB: one hostname, round robin over its addresses.
	DNSRoundRobinLB
	// Passthrough: the original destination (NONE).
	Passthrough
)

// ServiceKey identifies a service: a hostname in a namespace.
type ServiceKey struct {
	Hostname  string
	Namespace string
}

func (k ServiceKey) String() string { return k.Namespace + "/" + k.Hostname }

// Service is one hostname of a ServiceEntry. Services held by a Registry
// or a snapshot are shared and must not be altered.
type Service struct {
	Hostname  string
	Namespace string
	// Addresses are the declared addresses, or the allocated IPv4 one
	// when AutoAllocated.
	Addresses     []string
	AutoAllocated bool
	// AutoAllocatedIPv6 is the allocated IPv6 address (2001:2::/48) that
	// goes with an allocated IPv4 one. It is not in Addresses: like
	// istiod without dual stack, generators give an IPv4 proxy only the
	// IPv4 address.
	AutoAllocatedIPv6 string
	Ports             []Port
	Resolution        Resolution
	MeshExternal      bool
	ExportTo          []string
	Labels            map[string]string
	// Selector selects WorkloadEntries (and later Pods) as endpoints.
	Selector        map[string]string
	SubjectAltNames []string
	// Source is the ServiceEntry this service comes from.
	Source config.Key
	// CreationTime is its source's: where services conflict (two on one
	// listener), istiod takes the oldest first.
	CreationTime time.Time
	// TrafficDistribution is its preference for near endpoints.
	TrafficDistribution TrafficDistribution
}

// TrafficDistribution is a service's preference for near endpoints: a
// Kubernetes Service's spec.trafficDistribution, or the annotation
// networking.istio.io/traffic-distribution on a Service or ServiceEntry.
// As istiod, a preference is locality failover by network, region and
// zone (and subzone and node for PreferSameNode) that applies without
// outlier detection, where no DestinationRule sets a locality setting.
type TrafficDistribution uint8

const (
	TrafficDistributionAny TrafficDistribution = iota
	TrafficDistributionPreferSameZone
	TrafficDistributionPreferSameNode
)

// AnnotationTrafficDistribution is istiod's annotation for a service's
// traffic distribution.
const AnnotationTrafficDistribution = "networking.istio.io/traffic-distribution"

// ParseTrafficDistribution reads a service's traffic distribution as
// istiod's GetTrafficDistribution: spec (a Kubernetes Service's field,
// nil for a ServiceEntry) first, then the annotation, whose value is
// read without regard to case; PreferClose is PreferSameZone; anything
// else is Any. (istiod also reads the annotation on the namespace;
// baremesh has no namespace objects for files, and does not.)
func ParseTrafficDistribution(spec *string, annotations map[string]string) TrafficDistribution {
	if spec != nil {
		switch *spec {
		case "PreferClose", "PreferSameZone":
			return TrafficDistributionPreferSameZone
		case "PreferSameNode":
			return TrafficDistributionPreferSameNode
		}
	}
	switch strings.ToLower(annotations[AnnotationTrafficDistribution]) {
	case "preferclose", "prefersamezone":
		return TrafficDistributionPreferSameZone
	case "prefersamenode":
		return TrafficDistributionPreferSameNode
	}
	return TrafficDistributionAny
}

// Key returns the service's key.
func (s *Service) Key() ServiceKey { return ServiceKey{Hostname: s.Hostname, Namespace: s.Namespace} }

// Port returns the port with number n.
func (s *Service) Port(n uint32) (Port, bool) {
	for _, p := range s.Ports {
		if p.Number == n {
			return p, true
		}
	}
	return Port{}, false
}

// Equal reports whether two services are the same in everything a proxy's
// non-endpoint config depends on.
func (s *Service) Equal(o *Service) bool {
	return s.Hostname == o.Hostname && s.Namespace == o.Namespace &&
		slices.Equal(s.Addresses, o.Addresses) && s.AutoAllocated == o.AutoAllocated &&
		s.AutoAllocatedIPv6 == o.AutoAllocatedIPv6 &&
		slices.Equal(s.Ports, o.Ports) && s.Resolution == o.Resolution &&
		s.MeshExternal == o.MeshExternal && slices.Equal(s.ExportTo, o.ExportTo) &&
		maps.Equal(s.Labels, o.Labels) && maps.Equal(s.Selector, o.Selector) &&
		slices.Equal(s.SubjectAltNames, o.SubjectAltNames) && s.Source == o.Source && s.CreationTime.Equal(o.CreationTime) &&
		s.TrafficDistribution == o.TrafficDistribution
}

// Endpoint is one address and port of a service port.
type Endpoint struct {
	Address         string
	Port            uint32
	ServicePortName string
	Labels          map[string]string
	Network         string
	Locality        string
	Weight          uint32
	ServiceAccount  string
	Healthy         bool
	// Workload names the WorkloadEntry behind the endpoint, if any.
	Workload config.Key
}

// WorkloadInstance is one workload (a WorkloadEntry; later a Pod).
type WorkloadInstance struct {
	Name           string
	Namespace      string
	Address        string
	Labels         map[string]string
	Ports          map[string]uint32
	Network        string
	Locality       string
	Weight         uint32
	ServiceAccount string
	Healthy        bool
	Source         config.Key
}
