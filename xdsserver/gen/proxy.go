package gen

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
)

// ParseNode reads a proxy from an xDS Node with Istio's conventions: the
// ID is "TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN", metadata carries
// LABELS, NAMESPACE, INSTANCE_IPS, ISTIO_VERSION, CLUSTER_ID, NETWORK,
// WORKLOAD_NAME, SERVICE_ACCOUNT, GENERATOR, DNS_CAPTURE,
// INTERCEPTION_MODE and PROXY_CONFIG (its gatewayTopology). A Node without an Istio ID
// (a proxyless gRPC client with a plain bootstrap) is a proxyless sidecar
// in the namespace its metadata gives, else "default".
func ParseNode(n *corev3.Node) (*model.Proxy, error) {
	if n == nil || n.GetId() == "" {
		return nil, fmt.Errorf("node: missing id")
	}
	p := &model.Proxy{ID: n.GetId(), Type: model.SidecarProxy, Labels: map[string]string{}, Metadata: map[string]string{}, Locality: n.GetLocality()}
	md := n.GetMetadata().GetFields()
	for k, v := range md {
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			p.Metadata[k] = s.StringValue
		}
	}
	if l := md["LABELS"].GetStructValue(); l != nil {
		for k, v := range l.GetFields() {
			p.Labels[k] = v.GetStringValue()
		}
	}
	parts := strings.Split(n.GetId(), "~")
	if len(parts) == 4 {
		switch model.NodeType(parts[0]) {
		case model.SidecarProxy, model.Router:
			p.Type = model.NodeType(parts[0])
		default:
			return nil, fmt.Errorf("node %q: unknown proxy type %q (want sidecar or router)", n.GetId(), parts[0])
		}
		if parts[1] != "" {
			if _, err := netip.ParseAddr(parts[1]); err != nil {
				return nil, fmt.Errorf("node %q: invalid IP %q", n.GetId(), parts[1])
			}
			p.IPs = []string{parts[1]}
		}
		if i := strings.IndexByte(parts[2], '.'); i >= 0 {
			p.Namespace = parts[2][i+1:]
		}
		p.DNSDomain = parts[3]
	} else {
		p.Proxyless = true
	}
	if ns := p.Metadata["NAMESPACE"]; ns != "" {
		p.Namespace = ns
	}
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	if ips := p.Metadata["INSTANCE_IPS"]; ips != "" {
		p.IPs = nil
		for _, ip := range strings.Split(ips, ",") {
			if _, err := netip.ParseAddr(strings.TrimSpace(ip)); err != nil {
				return nil, fmt.Errorf("node %q: metadata INSTANCE_IPS: invalid IP %q", n.GetId(), ip)
			}
			p.IPs = append(p.IPs, strings.TrimSpace(ip))
		}
	}
	if p.Metadata["GENERATOR"] == "grpc" {
		p.Proxyless = true
	}
	p.IstioVersion = p.Metadata["ISTIO_VERSION"]
	p.IstioProxy = isIstioProxy(p)
	p.ClusterID = p.Metadata["CLUSTER_ID"]
	p.MeshID = p.Metadata["MESH_ID"]
	p.ServiceCluster = n.GetCluster()
	p.Network = p.Metadata["NETWORK"]
	p.WorkloadName = p.Metadata["WORKLOAD_NAME"]
	p.ServiceAccount = p.Metadata["SERVICE_ACCOUNT"]
	p.InterceptionMode = p.Metadata["INTERCEPTION_MODE"]
	if t := md["PROXY_CONFIG"].GetStructValue().GetFields()["gatewayTopology"].GetStructValue(); t != nil {
		p.GatewayTopology = gatewayTopology(t)
	}
	if pc := md["PROXY_CONFIG"].GetStructValue(); pc != nil {
		h := proxyHeadersOfStruct(pc.GetFields()["proxyHeaders"].GetStructValue())
		p.ProxyHeaders = &h
	}
	// As istiod 1.31, whose IP allocation (PILOT_ENABLE_IP_AUTOALLOCATE)
	// is on by default: DNS capture alone consumes allocated addresses;
	// DNS_AUTO_ALLOCATE, the older opt-in, changes nothing on its own.
	p.DNSAutoAllocate = metadataBool(p.Metadata["DNS_CAPTURE"])
	if p.DNSDomain == "" {
		p.DNSDomain = p.Namespace + ".svc.cluster.local"
	}
	return p, nil
}

// istioVersion reads ISTIO_VERSION's major and minor as istiod's
// ParseIstioVersion does (a "release-" prefix dropped; digits at the
// start); ok false when it has none, which istiod takes as the newest.
var istioVersion = regexp.MustCompile(`^([1-9][0-9]*)\.([0-9]+)`)

// IstioAtLeast reports whether p's Istio version is at least
// major.minor, as istiod's VersionGreaterOrEqual: a proxy that sends no
// version it can read counts as the newest.
func IstioAtLeast(p *model.Proxy, major, minor int) bool {
	m := istioVersion.FindStringSubmatch(strings.TrimPrefix(p.IstioVersion, "release-"))
	if m == nil {
		return true
	}
	ma, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	return ma > major || ma == major && mi >= minor
}

// isIstioProxy tells Istio's own proxy from a plain Envoy or a gRPC
// client: pilot-agent always sends ISTIO_VERSION (its own version) in the
// node metadata; a plain Envoy's bootstrap does not, and a proxyless gRPC
// client (GENERATOR=grpc, or no Istio node ID) cannot load Envoy filters
// whatever it sends.
func isIstioProxy(p *model.Proxy) bool {
	return !p.Proxyless && p.IstioVersion != ""
}

// gatewayTopology reads ProxyConfig.gatewayTopology from its JSON form
// in node metadata; fields it cannot read stay zero (Istio's defaults).
func gatewayTopology(t *structpb.Struct) *model.GatewayTopology {
	var topo meshv1alpha1.Topology
	b, err := protojson.Marshal(t)
	if err == nil {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &topo)
	}
	if err != nil {
		return &model.GatewayTopology{}
	}
	return &model.GatewayTopology{NumTrustedProxies: topo.GetNumTrustedProxies(), ForwardClientCertDetails: int32(topo.GetForwardClientCertDetails())}
}

// proxyHeadersOfStruct reads proxyHeaders from its JSON form (nil or
// unreadable: the defaults).
func proxyHeadersOfStruct(t *structpb.Struct) model.ProxyHeaders {
	if t == nil {
		return model.ProxyHeaders{}
	}
	var ph meshv1alpha1.ProxyConfig_ProxyHeaders
	b, err := protojson.Marshal(t)
	if err == nil {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &ph)
	}
	if err != nil {
		return model.ProxyHeaders{}
	}
	return ParseProxyHeaders(&ph)
}

// ParseProxyHeaders reads ProxyConfig.proxyHeaders as istiod's
// GetProxyHeadersFromProxyConfig does.
func ParseProxyHeaders(ph *meshv1alpha1.ProxyConfig_ProxyHeaders) model.ProxyHeaders {
	var h model.ProxyHeaders
	if ph == nil {
		return h
	}
	h.ServerDisabled = ph.GetServer().GetDisabled().GetValue()
	h.ServerValue = ph.GetServer().GetValue()
	h.NoRequestID = ph.GetRequestId().GetDisabled().GetValue()
	h.NoAttemptCount = ph.GetAttemptCount().GetDisabled().GetValue()
	h.NoDebugHeaders = ph.GetEnvoyDebugHeaders().GetDisabled().GetValue()
	h.XForwardedPort = ph.GetXForwardedPort().GetEnabled().GetValue()
	h.XForwardedHost = ph.GetXForwardedHost().GetEnabled().GetValue()
	h.MXInMesh = ph.GetMetadataExchangeHeaders() != nil && ph.GetMetadataExchangeHeaders().GetMode() == meshv1alpha1.ProxyConfig_ProxyHeaders_IN_MESH
	h.PreserveHTTP1Case = ph.GetPreserveHttp1HeaderCase().GetValue()
	h.ForwardedClientCert = int32(ph.GetForwardedClientCert())
	if d := ph.GetSetCurrentClientCertDetails(); d != nil {
		h.HasCertDetails = true
		h.Subject = d.GetSubject() == nil || d.GetSubject().GetValue()
		h.URI = d.GetUri() == nil || d.GetUri().GetValue()
		h.DNS = d.GetDns() == nil || d.GetDns().GetValue()
		h.Cert, h.Chain = d.GetCert().GetValue(), d.GetChain().GetValue()
	}
	return h
}

// ProxyHeadersOf is the proxyHeaders that apply to p, as istiod's
// ProxyConfigOrDefault: its PROXY_CONFIG's when it sent one, else the
// mesh's defaultConfig's.
func ProxyHeadersOf(p *model.Proxy, m *meshv1alpha1.MeshConfig) model.ProxyHeaders {
	if p.ProxyHeaders != nil {
		return *p.ProxyHeaders
	}
	return ParseProxyHeaders(m.GetDefaultConfig().GetProxyHeaders())
}

// metadataBool reads a boolean node metadata value, a string as Istio's
// StringBool takes it ("true", "1", "True", ...); anything else is false.
func metadataBool(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}

// NodeIdleTimeout is the proxy's IDLE_TIMEOUT metadata (a Go duration,
// "1h"), the idle timeout istiod gives its TCP proxies and connection
// managers where nothing else sets one; nil when unset or not a duration.
func NodeIdleTimeout(p *model.Proxy) *durationpb.Duration {
	if s := p.Metadata[IdleTimeoutMetadata]; s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return durationpb.New(d)
		}
	}
	return nil
}

// IdleTimeoutMetadata is the node metadata NodeIdleTimeout reads
// (ISTIO_META_IDLE_TIMEOUT).
const IdleTimeoutMetadata = "IDLE_TIMEOUT"
