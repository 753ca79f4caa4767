package config

import (
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/baremesh/baremesh/core/config/gwapi"
)

// Kind is a resource kind, unique across the groups baremesh knows.
type Kind string

// The kinds baremesh reads.
const (
	ServiceEntry        Kind = "ServiceEntry"
	WorkloadEntry       Kind = "WorkloadEntry"
	WorkloadGroup       Kind = "WorkloadGroup"
	VirtualService      Kind = "VirtualService"
	DestinationRule     Kind = "DestinationRule"
	Gateway             Kind = "Gateway"
	Sidecar             Kind = "Sidecar"
	PeerAuthentication  Kind = "PeerAuthentication"
	AuthorizationPolicy Kind = "AuthorizationPolicy"
	// RequestAuthentication: end-user JWT rules (issue #29).
	RequestAuthentication Kind = "RequestAuthentication"
	// EnvoyFilter: patches applied after generation (issue #29).
	EnvoyFilter Kind = "EnvoyFilter"
	// Telemetry: metrics, access logging and tracing (issue #27).
	Telemetry  Kind = "Telemetry"
	MeshConfig Kind = "MeshConfig"
	// The Kubernetes Gateway API (issue #28), converted to Gateways and
	// VirtualServices by core/gatewayapi. Their specs are
	// google.protobuf.Struct (as istiod serves them over MCP); gwapi has
	// the typed forms (DecodeSpec). KubernetesGateway is written "Gateway"
	// in manifests (istiod's name for it too).
	GatewayClass      Kind = "GatewayClass"
	KubernetesGateway Kind = "KubernetesGateway"
	HTTPRoute         Kind = "HTTPRoute"
	GRPCRoute         Kind = "GRPCRoute"
	TCPRoute          Kind = "TCPRoute"
	TLSRoute          Kind = "TLSRoute"
	ReferenceGrant    Kind = "ReferenceGrant"
	BackendTLSPolicy  Kind = "BackendTLSPolicy"
	ListenerSet       Kind = "ListenerSet"
)

// Group names.
const (
	NetworkingGroup = "networking.istio.io"
	SecurityGroup   = "security.istio.io"
	MeshGroup       = "mesh.istio.io"
	TelemetryGroup  = "telemetry.istio.io"
	GatewayAPIGroup = gwapi.Group
)

// Schema describes one kind: its group, the API versions accepted for it
// (the first is preferred), how to make an empty spec and how to validate
// one.
type Schema struct {
	Kind     Kind
	Group    string
	Versions []string
	New      func() proto.Message
	// Validate checks a spec with Istio's rules; nil means no rules.
	Validate func(c *Config) Errors
	// ManifestKind is the kind as manifests write it when it differs from
	// Kind (KubernetesGateway is "Gateway"); empty: Kind.
	ManifestKind string

	// Traits: what the rest of baremesh may assume of the kind. They are
	// declared here only; the pipeline, the serving layer and the Istio
	// config types ask (Kind.FeedsModel, Kind.ControllersOnly).

	// FeedsModel: the service model (core/model) builds services and
	// endpoints from the kind, so a change of it is judged by the services
	// and endpoints it changes, not by its kind (an endpoint-only change
	// is an endpoint push).
	FeedsModel bool
	// ControllersOnly: the kind is read by controllers beside the
	// pipeline (auto-registration), never by a generator.
	ControllersOnly bool
}

// FeedsModel reports whether the service model is built from the kind
// (Schema.FeedsModel); false for an unknown kind.
func (k Kind) FeedsModel() bool {
	s := registry[k]
	return s != nil && s.FeedsModel
}

// ControllersOnly reports whether only controllers beside the pipeline
// read the kind (Schema.ControllersOnly); false for an unknown kind.
func (k Kind) ControllersOnly() bool {
	s := registry[k]
	return s != nil && s.ControllersOnly
}

// GVK returns the schema's preferred GroupVersionKind.
func (s *Schema) GVK() GroupVersionKind {
	return GroupVersionKind{Group: s.Group, Version: s.Versions[0], Kind: s.manifestKind()}
}

func (s *Schema) manifestKind() string {
	if s.ManifestKind != "" {
		return s.ManifestKind
	}
	return string(s.Kind)
}

// KindOf returns the kind of a manifest's group and kind
// (gateway.networking.k8s.io Gateway is KubernetesGateway).
func KindOf(g GroupVersionKind) Kind {
	if g.Group == GatewayAPIGroup && g.Kind == "Gateway" {
		return KubernetesGateway
	}
	return Kind(g.Kind)
}

var networkingVersions = []string{"v1", "v1beta1", "v1alpha3"}
var securityVersions = []string{"v1", "v1beta1"}
var telemetryVersions = []string{"v1", "v1alpha1"}
var gatewayAPIVersions = []string{"v1", "v1beta1", "v1alpha2"}

func newStruct() proto.Message { return &structpb.Struct{} }

// registry is built once and never altered.
var registry = func() map[Kind]*Schema {
	all := []*Schema{
		{Kind: ServiceEntry, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.ServiceEntry{} }, Validate: validateServiceEntry, FeedsModel: true},
		{Kind: WorkloadEntry, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.WorkloadEntry{} }, Validate: validateWorkloadEntry, FeedsModel: true},
		{Kind: WorkloadGroup, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.WorkloadGroup{} }, Validate: validateWorkloadGroup, ControllersOnly: true},
		{Kind: VirtualService, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.VirtualService{} }, Validate: validateVirtualService},
		{Kind: DestinationRule, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.DestinationRule{} }, Validate: validateDestinationRule},
		{Kind: Gateway, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.Gateway{} }, Validate: validateGateway},
		{Kind: Sidecar, Group: NetworkingGroup, Versions: networkingVersions, New: func() proto.Message { return &networking.Sidecar{} }, Validate: validateSidecar},
		{Kind: PeerAuthentication, Group: SecurityGroup, Versions: securityVersions, New: func() proto.Message { return &security.PeerAuthentication{} }, Validate: validatePeerAuthentication},
		{Kind: AuthorizationPolicy, Group: SecurityGroup, Versions: securityVersions, New: func() proto.Message { return &security.AuthorizationPolicy{} }, Validate: validateAuthorizationPolicy},
		{Kind: RequestAuthentication, Group: SecurityGroup, Versions: securityVersions, New: func() proto.Message { return &security.RequestAuthentication{} }, Validate: validateRequestAuthentication},
		{Kind: EnvoyFilter, Group: NetworkingGroup, Versions: []string{"v1alpha3"}, New: func() proto.Message { return &networking.EnvoyFilter{} }, Validate: validateEnvoyFilter},
		{Kind: Telemetry, Group: TelemetryGroup, Versions: telemetryVersions, New: func() proto.Message { return &telemetry.Telemetry{} }, Validate: validateTelemetry},
		{Kind: GatewayClass, Group: GatewayAPIGroup, Versions: gatewayAPIVersions, New: newStruct, Validate: validateGatewayClass},
		{Kind: KubernetesGateway, ManifestKind: "Gateway", Group: GatewayAPIGroup, Versions: gatewayAPIVersions, New: newStruct, Validate: validateKubernetesGateway},
		{Kind: HTTPRoute, Group: GatewayAPIGroup, Versions: gatewayAPIVersions, New: newStruct, Validate: validateHTTPRouteKind},
		{Kind: GRPCRoute, Group: GatewayAPIGroup, Versions: []string{"v1", "v1alpha2"}, New: newStruct, Validate: validateGRPCRoute},
		{Kind: TCPRoute, Group: GatewayAPIGroup, Versions: []string{"v1", "v1alpha2"}, New: newStruct, Validate: validateTCPRoute},
		{Kind: TLSRoute, Group: GatewayAPIGroup, Versions: []string{"v1", "v1alpha3", "v1alpha2"}, New: newStruct, Validate: validateTLSRoute},
		{Kind: ReferenceGrant, Group: GatewayAPIGroup, Versions: []string{"v1beta1", "v1", "v1alpha2"}, New: newStruct, Validate: validateReferenceGrant},
		{Kind: BackendTLSPolicy, Group: GatewayAPIGroup, Versions: []string{"v1", "v1alpha3"}, New: newStruct, Validate: validateBackendTLSPolicy},
		{Kind: ListenerSet, Group: GatewayAPIGroup, Versions: []string{"v1"}, New: newStruct, Validate: validateListenerSet},
	}
	m := make(map[Kind]*Schema, len(all))
	for _, s := range all {
		m[s.Kind] = s
	}
	return m
}()

// SchemaFor returns the schema of kind, or nil.
func SchemaFor(kind Kind) *Schema { return registry[kind] }

// Kinds returns every kind the store holds, sorted.
func Kinds() []Kind {
	out := make([]Kind, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Lookup finds the schema for an apiVersion ("group/version") and kind. It
// returns ErrUnknownKind or ErrUnknownVersion, wrapped with the names.
func Lookup(apiVersion, kind string) (*Schema, error) {
	group, _, _ := strings.Cut(apiVersion, "/")
	s := registry[KindOf(GroupVersionKind{Group: group, Kind: kind})]
	if s == nil || s.ManifestKind != "" && s.ManifestKind != kind {
		return nil, unknownKindError(apiVersion, kind)
	}
	for _, v := range s.Versions {
		if apiVersion == s.Group+"/"+v {
			return s, nil
		}
	}
	return nil, unknownVersionError(s, apiVersion)
}
