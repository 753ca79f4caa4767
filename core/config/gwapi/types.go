// Package gwapi holds the specs of the Kubernetes Gateway API kinds
// (gateway.networking.k8s.io: GatewayClass, Gateway, HTTPRoute, GRPCRoute,
// TCPRoute, TLSRoute, ReferenceGrant, BackendTLSPolicy, ListenerSet) as plain Go structs with the API's
// JSON names, as of Gateway API v1.6.
//
// They are our own copies, not sigs.k8s.io/gateway-api's: that module
// requires a newer k8s.io/* than the rest of baremesh builds with, and
// baremesh reads the specs only (status is written as generic JSON).
// Fields the API has and baremesh does not act on are kept as raw JSON
// (so a valid manifest decodes strictly) and reported as unsupported
// where it matters. It imports nothing of ours.
package gwapi

import "encoding/json"

// Group is the Gateway API's group.
const Group = "gateway.networking.k8s.io"

// GatewayClassSpec is a GatewayClass's spec.
type GatewayClassSpec struct {
	ControllerName string          `json:"controllerName"`
	ParametersRef  json.RawMessage `json:"parametersRef,omitempty"`
	Description    *string         `json:"description,omitempty"`
}

// GatewaySpec is a Gateway's spec.
type GatewaySpec struct {
	GatewayClassName string            `json:"gatewayClassName"`
	Listeners        []Listener        `json:"listeners"`
	Addresses        []GatewayAddress  `json:"addresses,omitempty"`
	Infrastructure   json.RawMessage   `json:"infrastructure,omitempty"`
	AllowedListeners *AllowedListeners `json:"allowedListeners,omitempty"`
	TLS              json.RawMessage   `json:"tls,omitempty"`
	DefaultScope     string            `json:"defaultScope,omitempty"`
}

// GatewayAddress is one of spec.addresses.
type GatewayAddress struct {
	Type  *string `json:"type,omitempty"`
	Value string  `json:"value,omitempty"`
}

// Listener is one of a Gateway's listeners.
type Listener struct {
	Name          string             `json:"name"`
	Hostname      *string            `json:"hostname,omitempty"`
	Port          int32              `json:"port"`
	Protocol      string             `json:"protocol"`
	TLS           *ListenerTLSConfig `json:"tls,omitempty"`
	AllowedRoutes *AllowedRoutes     `json:"allowedRoutes,omitempty"`
}

// ListenerTLSConfig is a listener's tls.
type ListenerTLSConfig struct {
	Mode            *string                 `json:"mode,omitempty"`
	CertificateRefs []SecretObjectReference `json:"certificateRefs,omitempty"`
	Options         map[string]string       `json:"options,omitempty"`
}

// SecretObjectReference names a Secret (or another certificate holder).
type SecretObjectReference struct {
	Group     *string `json:"group,omitempty"`
	Kind      *string `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace,omitempty"`
}

// AllowedRoutes says which routes may attach to a listener.
type AllowedRoutes struct {
	Namespaces *RouteNamespaces `json:"namespaces,omitempty"`
	Kinds      []RouteGroupKind `json:"kinds,omitempty"`
}

// RouteNamespaces is allowedRoutes.namespaces.
type RouteNamespaces struct {
	From     *string        `json:"from,omitempty"`
	Selector *LabelSelector `json:"selector,omitempty"`
}

// LabelSelector is a Kubernetes label selector.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one matchExpressions entry.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// RouteGroupKind names a route kind.
type RouteGroupKind struct {
	Group *string `json:"group,omitempty"`
	Kind  string  `json:"kind"`
}

// ParentReference is one of a route's parentRefs.
type ParentReference struct {
	Group       *string `json:"group,omitempty"`
	Kind        *string `json:"kind,omitempty"`
	Namespace   *string `json:"namespace,omitempty"`
	Name        string  `json:"name"`
	SectionName *string `json:"sectionName,omitempty"`
	Port        *int32  `json:"port,omitempty"`
}

// CommonRouteSpec is what every route kind has.
type CommonRouteSpec struct {
	ParentRefs         []ParentReference `json:"parentRefs,omitempty"`
	UseDefaultGateways string            `json:"useDefaultGateways,omitempty"`
}

// BackendObjectReference names a backend.
type BackendObjectReference struct {
	Group     *string `json:"group,omitempty"`
	Kind      *string `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace,omitempty"`
	Port      *int32  `json:"port,omitempty"`
}

// BackendRef is a weighted backend.
type BackendRef struct {
	BackendObjectReference `json:",inline"`
	Weight                 *int32 `json:"weight,omitempty"`
}

// HTTPRouteSpec is an HTTPRoute's spec.
type HTTPRouteSpec struct {
	CommonRouteSpec `json:",inline"`
	Hostnames       []string        `json:"hostnames,omitempty"`
	Rules           []HTTPRouteRule `json:"rules,omitempty"`
}

// HTTPRouteRule is one rule.
type HTTPRouteRule struct {
	Name               *string            `json:"name,omitempty"`
	Matches            []HTTPRouteMatch   `json:"matches,omitempty"`
	Filters            []HTTPRouteFilter  `json:"filters,omitempty"`
	BackendRefs        []HTTPBackendRef   `json:"backendRefs,omitempty"`
	Timeouts           *HTTPRouteTimeouts `json:"timeouts,omitempty"`
	Retry              *HTTPRouteRetry    `json:"retry,omitempty"`
	SessionPersistence json.RawMessage    `json:"sessionPersistence,omitempty"`
}

// HTTPRouteTimeouts are a rule's timeouts (Gateway API durations).
type HTTPRouteTimeouts struct {
	Request        *string `json:"request,omitempty"`
	BackendRequest *string `json:"backendRequest,omitempty"`
}

// HTTPRouteRetry is a rule's retry.
type HTTPRouteRetry struct {
	Codes    []int   `json:"codes,omitempty"`
	Attempts *int    `json:"attempts,omitempty"`
	Backoff  *string `json:"backoff,omitempty"`
}

// HTTPRouteMatch is one match.
type HTTPRouteMatch struct {
	Path        *HTTPPathMatch        `json:"path,omitempty"`
	Headers     []HTTPHeaderMatch     `json:"headers,omitempty"`
	QueryParams []HTTPQueryParamMatch `json:"queryParams,omitempty"`
	Method      *string               `json:"method,omitempty"`
}

// HTTPPathMatch matches the path.
type HTTPPathMatch struct {
	Type  *string `json:"type,omitempty"`
	Value *string `json:"value,omitempty"`
}

// HTTPHeaderMatch matches a header.
type HTTPHeaderMatch struct {
	Type  *string `json:"type,omitempty"`
	Name  string  `json:"name"`
	Value string  `json:"value"`
}

// HTTPQueryParamMatch matches a query parameter.
type HTTPQueryParamMatch struct {
	Type  *string `json:"type,omitempty"`
	Name  string  `json:"name"`
	Value string  `json:"value"`
}

// HTTPRouteFilter is one filter.
type HTTPRouteFilter struct {
	Type                   string                     `json:"type"`
	RequestHeaderModifier  *HTTPHeaderFilter          `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HTTPHeaderFilter          `json:"responseHeaderModifier,omitempty"`
	RequestMirror          *HTTPRequestMirrorFilter   `json:"requestMirror,omitempty"`
	RequestRedirect        *HTTPRequestRedirectFilter `json:"requestRedirect,omitempty"`
	URLRewrite             *HTTPURLRewriteFilter      `json:"urlRewrite,omitempty"`
	CORS                   *HTTPCORSFilter            `json:"cors,omitempty"`
	ExternalAuth           json.RawMessage            `json:"externalAuth,omitempty"`
	ExtensionRef           json.RawMessage            `json:"extensionRef,omitempty"`
}

// HTTPCORSFilter is the CORS filter (in v1.6's standard channel).
// MaxAge is 0 when unset (the API server's default is 5).
type HTTPCORSFilter struct {
	AllowOrigins     []string `json:"allowOrigins,omitempty"`
	AllowCredentials *bool    `json:"allowCredentials,omitempty"`
	AllowMethods     []string `json:"allowMethods,omitempty"`
	AllowHeaders     []string `json:"allowHeaders,omitempty"`
	ExposeHeaders    []string `json:"exposeHeaders,omitempty"`
	MaxAge           int32    `json:"maxAge,omitempty"`
}

// HTTPHeader is a name and value.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HTTPHeaderFilter edits headers.
type HTTPHeaderFilter struct {
	Set    []HTTPHeader `json:"set,omitempty"`
	Add    []HTTPHeader `json:"add,omitempty"`
	Remove []string     `json:"remove,omitempty"`
}

// HTTPPathModifier rewrites a path.
type HTTPPathModifier struct {
	Type               string  `json:"type"`
	ReplaceFullPath    *string `json:"replaceFullPath,omitempty"`
	ReplacePrefixMatch *string `json:"replacePrefixMatch,omitempty"`
}

// HTTPRequestRedirectFilter redirects.
type HTTPRequestRedirectFilter struct {
	Scheme     *string           `json:"scheme,omitempty"`
	Hostname   *string           `json:"hostname,omitempty"`
	Path       *HTTPPathModifier `json:"path,omitempty"`
	Port       *int32            `json:"port,omitempty"`
	StatusCode *int              `json:"statusCode,omitempty"`
}

// HTTPURLRewriteFilter rewrites host and path.
type HTTPURLRewriteFilter struct {
	Hostname *string           `json:"hostname,omitempty"`
	Path     *HTTPPathModifier `json:"path,omitempty"`
}

// Fraction is numerator/denominator (default 100).
type Fraction struct {
	Numerator   int32  `json:"numerator"`
	Denominator *int32 `json:"denominator,omitempty"`
}

// HTTPRequestMirrorFilter mirrors requests.
type HTTPRequestMirrorFilter struct {
	BackendRef BackendObjectReference `json:"backendRef"`
	Percent    *int32                 `json:"percent,omitempty"`
	Fraction   *Fraction              `json:"fraction,omitempty"`
}

// HTTPBackendRef is a weighted backend with filters.
type HTTPBackendRef struct {
	BackendRef `json:",inline"`
	Filters    []HTTPRouteFilter `json:"filters,omitempty"`
}

// GRPCRouteSpec is a GRPCRoute's spec.
type GRPCRouteSpec struct {
	CommonRouteSpec `json:",inline"`
	Hostnames       []string        `json:"hostnames,omitempty"`
	Rules           []GRPCRouteRule `json:"rules,omitempty"`
}

// GRPCRouteRule is one rule.
type GRPCRouteRule struct {
	Name               *string           `json:"name,omitempty"`
	Matches            []GRPCRouteMatch  `json:"matches,omitempty"`
	Filters            []HTTPRouteFilter `json:"filters,omitempty"`
	BackendRefs        []HTTPBackendRef  `json:"backendRefs,omitempty"`
	SessionPersistence json.RawMessage   `json:"sessionPersistence,omitempty"`
}

// GRPCRouteMatch is one match.
type GRPCRouteMatch struct {
	Method  *GRPCMethodMatch  `json:"method,omitempty"`
	Headers []HTTPHeaderMatch `json:"headers,omitempty"`
}

// GRPCMethodMatch matches service and method.
type GRPCMethodMatch struct {
	Type    *string `json:"type,omitempty"`
	Service *string `json:"service,omitempty"`
	Method  *string `json:"method,omitempty"`
}

// TCPRouteSpec is a TCPRoute's spec.
type TCPRouteSpec struct {
	CommonRouteSpec `json:",inline"`
	Rules           []L4Rule `json:"rules,omitempty"`
}

// TLSRouteSpec is a TLSRoute's spec.
type TLSRouteSpec struct {
	CommonRouteSpec `json:",inline"`
	Hostnames       []string `json:"hostnames,omitempty"`
	Rules           []L4Rule `json:"rules,omitempty"`
}

// L4Rule is a TCPRoute or TLSRoute rule.
type L4Rule struct {
	Name        *string      `json:"name,omitempty"`
	BackendRefs []BackendRef `json:"backendRefs,omitempty"`
}

// ReferenceGrantSpec is a ReferenceGrant's spec.
type ReferenceGrantSpec struct {
	From []ReferenceGrantFrom `json:"from"`
	To   []ReferenceGrantTo   `json:"to"`
}

// ReferenceGrantFrom is who may refer.
type ReferenceGrantFrom struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
}

// ReferenceGrantTo is what may be referred to.
type ReferenceGrantTo struct {
	Group string  `json:"group"`
	Kind  string  `json:"kind"`
	Name  *string `json:"name,omitempty"`
}

// AllowedListeners says which namespaces' ListenerSets may attach to a
// Gateway (none when unset).
type AllowedListeners struct {
	Namespaces *RouteNamespaces `json:"namespaces,omitempty"`
}

// ListenerSetSpec is a ListenerSet's spec: listeners added to a Gateway.
// Its listeners are ListenerEntries: a Listener whose port may be unset.
type ListenerSetSpec struct {
	ParentRef ParentGatewayReference `json:"parentRef"`
	Listeners []Listener             `json:"listeners"`
}

// ParentGatewayReference names a ListenerSet's Gateway.
type ParentGatewayReference struct {
	Group     *string `json:"group,omitempty"`
	Kind      *string `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace,omitempty"`
}

// BackendTLSPolicySpec is a BackendTLSPolicy's spec: how proxies
// originate TLS to the targeted services.
type BackendTLSPolicySpec struct {
	TargetRefs []PolicyTargetReference `json:"targetRefs,omitempty"`
	Validation BackendTLSValidation    `json:"validation"`
	Options    map[string]string       `json:"options,omitempty"`
}

// PolicyTargetReference is a policy's target in its own namespace
// (LocalPolicyTargetReferenceWithSectionName).
type PolicyTargetReference struct {
	Group       string  `json:"group"`
	Kind        string  `json:"kind"`
	Name        string  `json:"name"`
	SectionName *string `json:"sectionName,omitempty"`
}

// BackendTLSValidation is how the backend's certificate is checked.
type BackendTLSValidation struct {
	CACertificateRefs       []LocalObjectReference `json:"caCertificateRefs,omitempty"`
	WellKnownCACertificates *string                `json:"wellKnownCACertificates,omitempty"`
	Hostname                string                 `json:"hostname"`
	SubjectAltNames         []SubjectAltName       `json:"subjectAltNames,omitempty"`
}

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// SubjectAltName is one accepted name of the backend's certificate.
type SubjectAltName struct {
	Type     string `json:"type"`
	Hostname string `json:"hostname,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// Deref returns *p, or def when p is nil.
func Deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
