package gen

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	preservecasev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/header_formatters/preserve_case/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/baremesh/baremesh/core/model"
)

// MustAny packs m into an Any. Marshalling a well-formed message fails
// only on invalid UTF-8 in a string field, which config decoding already
// rejects, so a failure is a programming error and panics.
//
// It packs as anypb.New does, but takes the type URL of the messages
// packed per resource from typeURLs rather than building it each time.
func MustAny(m proto.Message) *anypb.Any {
	// Deterministic: map fields (RBAC policies, Struct metadata) in key
	// order, so the same config always packs to the same bytes (the wire
	// layer versions and caches resources by their bytes).
	b, err := deterministic.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("gen: packing %T: %v", m, err))
	}
	name := m.ProtoReflect().Descriptor().FullName()
	url, ok := typeURLs[name]
	if !ok {
		url = typeURLPrefix + string(name)
	}
	return &anypb.Any{TypeUrl: url, Value: b}
}

const typeURLPrefix = "type.googleapis.com/"

var deterministic = proto.MarshalOptions{Deterministic: true}

// typeURLs are the type URLs of the configs packed once or more per
// resource. Built at init, never altered.
var typeURLs = func() map[protoreflect.FullName]string {
	out := map[protoreflect.FullName]string{}
	for _, m := range []proto.Message{
		&hcmv3.HttpConnectionManager{}, &tcpproxyv3.TcpProxy{}, &tlsv3.DownstreamTlsContext{},
		&tlsv3.UpstreamTlsContext{}, &faultv3.HTTPFault{}, &httpv3.HttpProtocolOptions{},
	} {
		name := m.ProtoReflect().Descriptor().FullName()
		out[name] = typeURLPrefix + string(name)
	}
	return out
}()

// ADS is a ConfigSource pointing at the ADS stream, version 3, with
// initial_fetch_timeout 0s, as istiod writes every config source of
// resources it always serves (a cluster's EDS, an HTTP connection
// manager's RDS, the workload certificate): Envoy waits for them instead
// of warming the cluster or listener without its endpoints, routes or
// certificate after its default 15s. Secrets named by a credentialName
// take CredentialSDS instead.
func ADS() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		InitialFetchTimeout:   waitForever,
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// waitForever is initial_fetch_timeout 0s, shared by every config source
// and never altered.
var waitForever = &durationpb.Duration{}

// CredentialSDS is the ADS ConfigSource of a secret named by a
// DestinationRule's or Gateway's credentialName: Envoy's default initial
// fetch timeout (15s), as istiod's SDSAdsConfig, because the secret may
// not exist, and waiting for it forever would keep the whole listener or
// cluster from warming.
func CredentialSDS() *corev3.ConfigSource { return ADSDefaultTimeout() }

// ADSDefaultTimeout is ADS without initial_fetch_timeout (Envoy's
// default 15s; gRPC reads none): for credentialName secrets
// (CredentialSDS) and proxyless clients, as istiod.
func ADSDefaultTimeout() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// SocketAddress is an Envoy TCP address.
// The four messages (two of them oneof wrappers) are allocated as one
// block: every listener and DNS endpoint has an address, and allocation,
// not building, is what they cost. Nothing here is copied afterwards.
func SocketAddress(ip string, port uint32) *corev3.Address {
	b := &struct {
		addr corev3.Address
		sa   corev3.Address_SocketAddress
		s    corev3.SocketAddress
		pv   corev3.SocketAddress_PortValue
	}{}
	b.pv.PortValue = port
	b.s.Address, b.s.PortSpecifier = ip, &b.pv
	b.sa.SocketAddress = &b.s
	b.addr.Address = &b.sa
	return &b.addr
}

// Duration converts a time.Duration.
func Duration(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// U32 wraps a uint32.
func U32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }

// Bool wraps a bool.
func Bool(v bool) *wrapperspb.BoolValue { return wrapperspb.Bool(v) }

// SDSClusterName is the cluster an Istio agent's bootstrap defines for
// its local SDS server, which serves the workload certificate ("default")
// and the root ("ROOTCA").
const SDSClusterName = "sds-grpc"

// Istio's SDS resource names for the workload identity.
const (
	SDSDefault = "default"
	SDSRootCA  = "ROOTCA"
)

// WorkloadSDS is where a proxy fetches its workload certificate and
// root: an Istio agent (node metadata ISTIO_VERSION set) serves them on
// its "sds-grpc" bootstrap cluster, exactly as istiod configures it;
// any other Envoy gets them over ADS.
func WorkloadSDS(p *model.Proxy) *corev3.ConfigSource {
	if p.IstioVersion == "" {
		return ADS()
	}
	return &corev3.ConfigSource{
		ResourceApiVersion:  corev3.ApiVersion_V3,
		InitialFetchTimeout: waitForever,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:                   corev3.ApiConfigSource_GRPC,
			TransportApiVersion:       corev3.ApiVersion_V3,
			SetNodeOnFirstMessageOnly: true,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: SDSClusterName},
			}}},
		}},
	}
}

// GRPCCertProvider is the certificate provider instance Istio's
// proxyless gRPC bootstrap defines (file watcher over the agent's
// certificates): "default" for the workload certificate, "ROOTCA" for
// the root.
const GRPCCertProvider = "default"

// GRPCTLSContext is the CommonTlsContext of proxyless gRPC mTLS, as
// istiod's grpcgen writes it: the certificate of the bootstrap's
// certificate provider instance "default" in the current field
// (tls_certificate_provider_instance) and in the deprecated one gRPC
// clients before 1.66 read (tls_certificate_certificate_provider_instance);
// the root in the validation context's ca_certificate_provider_instance;
// sans, if any, checked on the server's certificate (a client only:
// grpc-go refuses SAN matchers on a server). istiod puts the root in a
// combined validation context (its default and the deprecated
// validation_context_certificate_provider_instance), which Envoy's
// schema refuses without an SDS secret config; ours is the plain
// validation context every output can pass.
func GRPCTLSContext(sans []*matcherv3.StringMatcher) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: GRPCCertProvider, CertificateName: SDSDefault},
		//lint:ignore SA1019 deprecated; istiod keeps it for older gRPC clients
		TlsCertificateCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: GRPCCertProvider, CertificateName: SDSDefault},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: GRPCCertProvider, CertificateName: SDSRootCA},
			//lint:ignore SA1019 what istiod's grpcgen sets: grpc-go reads the SANs from here
			MatchSubjectAltNames: sans,
		}},
	}
}

// ConfigMetadata is the metadata istiod puts on what it built from a
// config: filter_metadata.istio.config, its ConfigPath.
func ConfigMetadata(path string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": {Fields: map[string]*structpb.Value{
		"config": structpb.NewStringValue(path),
	}}}}
}

// PreserveCaseHeaderFormat keeps HTTP/1 header case (Envoy's
// preserve_case stateful formatter), for connection managers and
// clusters when proxyHeaders.preserveHttp1HeaderCase is set. Shared,
// never altered.
var PreserveCaseHeaderFormat = &corev3.Http1ProtocolOptions_HeaderKeyFormat{
	HeaderFormat: &corev3.Http1ProtocolOptions_HeaderKeyFormat_StatefulFormatter{StatefulFormatter: &corev3.TypedExtensionConfig{
		Name: "preserve_case", TypedConfig: MustAny(&preservecasev3.PreserveCaseFormatterConfig{}),
	}},
}
