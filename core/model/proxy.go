package model

import (
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// NodeType is the kind of proxy, from the first field of Istio's node ID.
type NodeType string

// Node types.
const (
	SidecarProxy NodeType = "sidecar"
	Router       NodeType = "router"
)

// Proxy is a connected xDS client: who it says it is (its node: ID,
// type, addresses, namespace, labels, metadata) and, once a later stage
// fills it in, who it proved to be (Identity). The xDS server builds it
// once per connection (from the Envoy node, xdsserver/gen.ParseNode) and
// never alters it afterwards; generators and the controllers beside the
// server (registration, health) read it.
type Proxy struct {
	ID        string
	Type      NodeType
	IPs       []string
	Namespace string
	// DNSDomain is the fourth node ID field ("ns.svc.cluster.local").
	DNSDomain string
	Labels    map[string]string
	// Proxyless is set for gRPC clients and servers without Envoy
	// (metadata GENERATOR=grpc, or no Istio node ID at all).
	Proxyless bool
	// IstioProxy is set for Istio's own proxy (istio-proxy: Envoy built
	// with Istio's extensions, started by pilot-agent), which the agent
	// tells by the ISTIO_VERSION it puts in the node metadata; a
	// proxyless gRPC client never is one, whatever its metadata says.
	// Only such a proxy gets Istio's telemetry filters (metadata
	// exchange, peer metadata, istio.stats, istio.alpn), which a plain
	// Envoy cannot load.
	IstioProxy   bool
	IstioVersion string
	ClusterID    string
	// ServiceCluster is the node's cluster field (pilot-agent's service
	// cluster): the span service name of Datadog and OpenTelemetry tracers.
	ServiceCluster string
	// MeshID is metadata MESH_ID (tracing tags name it).
	MeshID         string
	Network        string
	WorkloadName   string
	ServiceAccount string
	Locality       *corev3.Locality
	// DNSAutoAllocate is set when the proxy resolves names itself
	// (metadata DNS_CAPTURE true, ISTIO_META_DNS_CAPTURE in its
	// environment): it then sees the address allocated to a ServiceEntry
	// without addresses, as with istiod 1.31, whose IP allocation is on by
	// default (nodeUsesAutoallocatedIPs); to any other proxy the service
	// has none (istiod's Service.GetAddressForProxy).
	DNSAutoAllocate bool
	// Families, when not 0, are the address families of the proxy's
	// addresses (FamilyIPv4, FamilyIPv6) where IPs does not list them all
	// (a cached generation's proxy carries only the IPs it needs).
	Families uint8
	// InterceptionMode is metadata INTERCEPTION_MODE: "REDIRECT" (the
	// default when empty), "TPROXY" or "NONE".
	InterceptionMode string
	// GatewayTopology is the gatewayTopology of the ProxyConfig in the
	// node's PROXY_CONFIG metadata (Istio's agent sends its merged
	// ProxyConfig there); nil when the node sends none, and then the mesh
	// config's defaultConfig applies.
	GatewayTopology *GatewayTopology
	// ProxyHeaders is the proxyHeaders of the node's PROXY_CONFIG; nil
	// when the node sends no PROXY_CONFIG (the mesh's defaultConfig then
	// applies; a PROXY_CONFIG without proxyHeaders means the defaults).
	ProxyHeaders *ProxyHeaders
	// Metadata is the raw node metadata, for fields generators need later.
	Metadata map[string]string
	// Identity is the caller's authenticated identity, nil for an
	// unauthenticated stream. A proxy's node fields are what it claims;
	// only Identity is proven.
	Identity *Identity
}

// GatewayTopology is what a gateway proxy trusts of the hops in front of
// it (Istio's ProxyConfig.gatewayTopology).
type GatewayTopology struct {
	// NumTrustedProxies is how many X-Forwarded-For hops to trust.
	NumTrustedProxies uint32
	// ForwardClientCertDetails is Istio's meshconfig
	// ForwardClientCertDetails enum value (0: undefined).
	ForwardClientCertDetails int32
}

// ProxyHeaders is ProxyConfig.proxyHeaders as istiod reads it
// (util.GetProxyHeadersFromProxyConfig): the headers a proxy adds and
// keeps. The zero value is Istio's defaults. Comparable: it keys cached
// generations.
type ProxyHeaders struct {
	// ServerValue replaces the server header's value; ServerDisabled
	// passes the upstream's through and adds none.
	ServerValue    string
	ServerDisabled bool
	// NoRequestID, NoAttemptCount, NoDebugHeaders: x-request-id,
	// x-envoy-attempt-count and Envoy's debug headers turned off.
	NoRequestID, NoAttemptCount, NoDebugHeaders bool
	// XForwardedPort, XForwardedHost: those headers appended.
	XForwardedPort, XForwardedHost bool
	// MXInMesh: metadata exchange headers only toward mesh clusters.
	MXInMesh bool
	// PreserveHTTP1Case keeps HTTP/1 header case.
	PreserveHTTP1Case bool
	// ForwardedClientCert is meshconfig's ForwardClientCertDetails (0:
	// the listener class's default).
	ForwardedClientCert int32
	// CertDetails is setCurrentClientCertDetails (HasCertDetails: set);
	// each field nil-able in the API: subject, URI and DNS default on,
	// cert and chain off.
	HasCertDetails                 bool
	Subject, URI, DNS, Cert, Chain bool
}

// Identity is an authenticated workload identity: the trust domain,
// namespace and service account of a SPIFFE ID
// spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT, plus how it was
// proven.
type Identity struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
	// Method says how the identity was proven ("mtls", "token", ...).
	Method string
}

// SPIFFEID returns the identity's SPIFFE ID.
func (id *Identity) SPIFFEID() string {
	return "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// SPIFFEIDOrEmpty is the SPIFFE ID of id, or "" for a nil (unauthenticated)
// identity.
func (id *Identity) SPIFFEIDOrEmpty() string {
	if id == nil {
		return ""
	}
	return id.SPIFFEID()
}

// Address families of Proxy.Families.
const (
	FamilyIPv4 uint8 = 1 << iota
	FamilyIPv6
)

// IPFamilies reports which address families the proxy is in: Families
// when set, else those of its IPs. With both it is dual-stack: Istio
// (ISTIO_DUAL_STACK) then gives its listeners an address of each family.
func (p *Proxy) IPFamilies() (v4, v6 bool) {
	if p.Families != 0 {
		return p.Families&FamilyIPv4 != 0, p.Families&FamilyIPv6 != 0
	}
	for _, ip := range p.IPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			if a.Unmap().Is4() {
				v4 = true
			} else {
				v6 = true
			}
		}
	}
	return v4, v6
}
