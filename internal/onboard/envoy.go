package onboard

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// EnvoyBootstrapFile is what vm bootstrap --envoy writes into --out.
const EnvoyBootstrapFile = "envoy-bootstrap.yaml"

// EnvoyNodeID is the Istio node ID an Envoy on a VM presents:
// sidecar~IP~NAME.NAMESPACE~NAMESPACE.svc.cluster.local.
func EnvoyNodeID(ip, name, namespace string) string {
	return "sidecar~" + ip + "~" + name + "." + namespace + "~" + namespace + ".svc.cluster.local"
}

// EnvoyRootCert is where the Envoy bootstrap expects the CA's
// root-cert.pem on the VM (vm bootstrap --envoy writes it into --out).
const EnvoyRootCert = "/etc/baremesh/root-cert.pem"

// envoyBootstrap writes an Envoy bootstrap for a VM without Istio's agent:
// ADS over TLS to baremeshd's tlsAddr (the server checked against the
// CA's root, EnvoyRootCert, under Istio's name istiod.istio-system.svc
// for an IP address, else the host name), a join token for the group's
// service account as its bearer credential on every stream (Envoy alone
// cannot fetch a certificate; the token is checked, not spent, by xDS,
// and `baremeshctl token revoke` cuts the VM off), the node ID and
// metadata Istio's agent would set from the WorkloadGroup, and an admin
// port on loopback. The bootstrap is checked with go-control-plane's
// ValidateAll before it is written, with root-cert.pem beside it.
func envoyBootstrap(cfg daemonconfig.Config, o vmOptions) (string, error) {
	if net.ParseIP(o.ip) == nil {
		return "", fmt.Errorf("--ip %q: the VM's IP address is required with --envoy (it is in the node ID)", o.ip)
	}
	wg, labels, err := findGroup(cfg.ConfigDirs, o.namespace, o.group)
	if err != nil {
		return "", err
	}
	root, err := os.ReadFile(filepath.Join(cfg.CADir(), identity.RootCertFile))
	if err != nil {
		return "", fmt.Errorf("CA root (does baremeshd run with tlsAddr set, or is caCertsDir right?): %w", err)
	}
	addr := o.address
	if addr == "" {
		_, port, err := net.SplitHostPort(cfg.TLSAddr)
		if err != nil {
			port = "15012"
		}
		host, err := os.Hostname()
		if err != nil {
			return "", err
		}
		addr = net.JoinHostPort(host, port)
	}
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portS, 10, 16)
	if err != nil {
		return "", fmt.Errorf("--address %q: port: %w", addr, err)
	}
	name := o.name
	if name == "" {
		name = o.group + "-" + strings.NewReplacer(".", "-", ":", "-").Replace(o.ip)
	}
	sa := wg.GetTemplate().GetServiceAccount()
	if sa == "" {
		sa = "default"
	}
	lv := map[string]any{}
	for k, v := range labels {
		lv[k] = v
	}
	md, err := structpb.NewStruct(map[string]any{
		"NAMESPACE": o.namespace, "LABELS": lv, "WORKLOAD_NAME": o.group, "SERVICE_ACCOUNT": sa,
		"INSTANCE_IPS": o.ip, "CLUSTER_ID": o.clusterID, "INTERCEPTION_MODE": "REDIRECT", "NETWORK": wg.GetTemplate().GetNetwork(),
	})
	if err != nil {
		return "", err
	}
	h2, err := anypb.New(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})
	if err != nil {
		return "", err
	}
	discoveryType, serverName := clusterv3.Cluster_STRICT_DNS, host
	if net.ParseIP(host) != nil {
		discoveryType, serverName = clusterv3.Cluster_STATIC, istiodHost
	}
	tlsCtx, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: serverName, CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: EnvoyRootCert}},
			MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_DNS,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: serverName}}}},
		}}}})
	if err != nil {
		return "", err
	}
	tok, _, err := (&identity.TokenStore{Dir: tokenDir(cfg)}).Create(identity.TokenSpec{
		Namespace: o.namespace, ServiceAccount: sa, Group: o.group, TTL: o.ttl, MaxUses: o.uses})
	if err != nil {
		return "", err
	}
	sock := func(a string, p uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: a, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}
	}
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}
	b := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: EnvoyNodeID(o.ip, name, o.namespace), Cluster: o.group + "." + o.namespace, Metadata: md},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{ApiType: corev3.ApiConfigSource_GRPC, TransportApiVersion: corev3.ApiVersion_V3, SetNodeOnFirstMessageOnly: true,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds-grpc"}},
					InitialMetadata: []*corev3.HeaderValue{{Key: "authorization", Value: "Bearer " + tok}}}}},
			CdsConfig: ads, LdsConfig: ads,
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{Clusters: []*clusterv3.Cluster{{
			Name: "xds-grpc", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: discoveryType},
			ConnectTimeout:                durationpb.New(time.Second),
			TransportSocket:               &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsCtx}},
			TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": h2},
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "xds-grpc", Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock(host, uint32(port))}}}}}}},
		}}},
		Admin: &bootstrapv3.Admin{Address: sock("127.0.0.1", 15000)},
	}
	if err := b.ValidateAll(); err != nil {
		return "", fmt.Errorf("envoy bootstrap: %w", err)
	}
	j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return "", err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("# Envoy bootstrap for %s (WorkloadGroup %s/%s), written by baremeshctl vm bootstrap --envoy.\n"+
		"# xDS over TLS to %s (server %s, root %s); the join token below is this VM's credential: keep the file private.\n", name, o.namespace, o.group, addr, serverName, EnvoyRootCert)
	if err := os.MkdirAll(o.out, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(o.out, identity.RootCertFile), root, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(o.out, EnvoyBootstrapFile), append([]byte(head), y...), 0o600); err != nil {
		return "", err
	}
	return b.GetNode().GetId(), nil
}
