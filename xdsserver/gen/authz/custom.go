package authz

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	extauthznetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Filter names of external authorization.
const (
	ExtAuthzHTTPFilterName    = "envoy.filters.http.ext_authz"
	ExtAuthzNetworkFilterName = "envoy.filters.network.ext_authz"
)

// CUSTOM policies work as istiod builds them: per provider, an RBAC
// filter whose shadow rules are the provider's CUSTOM rules (prefixed
// "istio-ext-authz-PROVIDER-"), so it enforces nothing and only records
// which rule matched in its dynamic metadata; then the ext_authz filter,
// enabled only when that metadata names one of the provider's rules. So
// only the requests a policy selects are sent for a check.
const (
	extAuthzPrefix     = "istio-ext-authz"
	extAuthzStatPrefix = "istio_ext_authz_"
	shadowEffectiveID  = "shadow_effective_policy_id"
	badCustomSuffix    = "-deny-due-to-bad-CUSTOM-action"
)

// provider is a resolved extension provider: the ext_authz config, or
// why it cannot be used.
type provider struct {
	http *extauthzv3.ExtAuthz
	tcp  *extauthznetv3.ExtAuthz
	err  error
}

// CustomHTTPFilters are the HTTP filters of the CUSTOM policies, to go
// first among the HTTP filters (before jwt_authn and RBAC, istiod's
// order). A policy whose provider cannot be used (unknown, invalid, its
// service not found, or several providers on one workload) becomes a
// DENY RBAC filter of what it selects.
func (p Policies) CustomHTTPFilters(pc *push.PushContext) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	p.custom1(pc, false, func(name string, rules *rbacv3.RBAC, prov *provider, bad bool) {
		if bad {
			out = append(out, rbacHTTP(&rbachttpv3.RBAC{Rules: rules}))
			return
		}
		out = append(out, rbacHTTP(&rbachttpv3.RBAC{ShadowRules: rules, ShadowRulesStatPrefix: extAuthzStatPrefix}),
			&hcmv3.HttpFilter{Name: ExtAuthzHTTPFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(withEnabled(prov.http, HTTPFilterName, name))}})
	})
	return out
}

// CustomNetworkFilters are the network filters of the CUSTOM policies
// for a TCP port, to go before the network RBAC filters. An HTTP
// provider cannot check a TCP connection: its policies are left out
// there, as istiod leaves them.
func (p Policies) CustomNetworkFilters(pc *push.PushContext) []*listenerv3.Filter {
	var out []*listenerv3.Filter
	p.custom1(pc, true, func(name string, rules *rbacv3.RBAC, prov *provider, bad bool) {
		if bad {
			out = append(out, rbacNet(&rbacnetv3.RBAC{Rules: rules, StatPrefix: "tcp."}))
			return
		}
		if prov.tcp == nil {
			return
		}
		out = append(out, rbacNet(&rbacnetv3.RBAC{ShadowRules: rules, StatPrefix: "tcp.", ShadowRulesStatPrefix: extAuthzStatPrefix}),
			&listenerv3.Filter{Name: ExtAuthzNetworkFilterName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(withEnabledNet(prov.tcp, NetworkFilterName, name))}})
	})
	return out
}

// custom1 builds each provider's rules in name order and hands them to
// emit: bad when the provider cannot be used (rules then deny).
func (p Policies) custom1(pc *push.PushContext, tcp bool, emit func(name string, rules *rbacv3.RBAC, prov *provider, bad bool)) {
	if len(p.custom) == 0 {
		return
	}
	byProvider := map[string][]policy{}
	for _, pol := range p.custom {
		n := pol.ap.GetProvider().GetName()
		byProvider[n] = append(byProvider[n], pol)
	}
	names := slices.Sorted(maps.Keys(byProvider))
	provs := providers(pc)
	b := builder{tcp: tcp, td: p.trustDomain}
	for _, name := range names {
		rules := &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{}}
		for _, pol := range byProvider[name] {
			prefix := extAuthzPrefix + "-" + name + "-" + pol.name
			if name == "" {
				prefix = extAuthzPrefix + "-" + pol.name
			}
			for i, r := range pol.ap.GetRules() {
				if r == nil {
					continue
				}
				if rp, ok := b.rule(r); ok {
					rules.Policies[prefix+"-rule["+strconv.Itoa(i)+"]"] = rp
				}
			}
			if len(pol.ap.GetRules()) == 0 {
				rules.Policies[prefix+"-rule[0]"] = matchNever()
			}
		}
		prov := provs[name]
		if len(names) > 1 || prov == nil || prov.err != nil {
			bad := &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: make(map[string]*rbacv3.Policy, len(rules.Policies))}
			for k, v := range rules.Policies {
				bad.Policies[k+badCustomSuffix] = v
			}
			emit(name, bad, nil, true)
			continue
		}
		emit(name, rules, prov, false)
	}
}

// CustomProblem is a CUSTOM policy that denies what it selects because
// its provider cannot be used.
type CustomProblem struct {
	Policy   string `json:"policy"`
	Provider string `json:"provider"`
	Error    string `json:"error"`
}

// CustomProblems lists the CUSTOM policies of pc whose extension
// provider cannot be used, for /debug/configz. (Several providers on one
// workload are a per-workload problem and not listed here.)
func CustomProblems(pc *push.PushContext) []CustomProblem {
	out := []CustomProblem{}
	if pc == nil {
		return out
	}
	provs := providers(pc)
	for _, c := range pc.Configs(config.AuthorizationPolicy) {
		pol, ok := c.Spec.(*security.AuthorizationPolicy)
		if !ok || pol.GetAction() != security.AuthorizationPolicy_CUSTOM {
			continue
		}
		name := pol.GetProvider().GetName()
		var err error
		switch prov := provs[name]; {
		case prov == nil:
			known := slices.Sorted(maps.Keys(provs))
			err = fmt.Errorf("no extension provider %q in the mesh config (ext_authz providers: %v)", name, known)
		case prov.err != nil:
			err = prov.err
		}
		if err != nil {
			out = append(out, CustomProblem{Policy: c.Namespace + "/" + c.Name, Provider: name,
				Error: err.Error() + "; the policy denies what it selects"})
		}
	}
	return out
}

// providers resolves the mesh config's ext_authz extension providers
// (istiod's processExtensionProvider): by name, each with its filter
// config or its error.
func providers(pc *push.PushContext) map[string]*provider {
	out := map[string]*provider{}
	if pc == nil || pc.Mesh == nil {
		return out
	}
	for i, ep := range pc.Mesh.GetExtensionProviders() {
		name := ep.GetName()
		var prov *provider
		switch c := ep.GetProvider().(type) {
		case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzHttp:
			prov = httpProvider(pc, c.EnvoyExtAuthzHttp)
		case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExtAuthzGrpc:
			prov = grpcProvider(pc, c.EnvoyExtAuthzGrpc)
		default:
			continue
		}
		switch {
		case name == "":
			prov.err = fmt.Errorf("extensionProviders[%d]: no name", i)
		case out[name] != nil:
			prov.err = fmt.Errorf("extension provider %q: the name is used twice", name)
		}
		if prov.err != nil {
			prov.err = fmt.Errorf("extension provider %q: %w", name, prov.err)
		}
		out[name] = prov
	}
	return out
}

// lookupCluster finds the provider's service ("host" or "ns/host") and
// names its outbound cluster, as istiod's LookupCluster: a host in more
// than one namespace must name the namespace.
func lookupCluster(pc *push.PushContext, service string, port uint32) (host, cluster string, err error) {
	if port < 1 || port > 65535 {
		return "", "", fmt.Errorf("port must be in [1, 65535], found %d", port)
	}
	if service == "" {
		return "", "", fmt.Errorf("no service")
	}
	if ns, h, ok := strings.Cut(service, "/"); ok {
		if s := pc.Service(h, ns); s != nil {
			return s.Hostname, gen.ClusterName(gen.Outbound, port, "", s.Hostname), nil
		}
	} else if ss := pc.ServicesByHost(service); len(ss) == 1 {
		return ss[0].Hostname, gen.ClusterName(gen.Outbound, port, "", ss[0].Hostname), nil
	} else if len(ss) > 1 {
		return "", "", fmt.Errorf("service %s is in %d namespaces: name one as NAMESPACE/HOST", service, len(ss))
	}
	return "", "", fmt.Errorf("service %s not found in the registry", service)
}

func statusOnError(s string) (*typev3.HttpStatus, error) {
	if s == "" {
		return nil, nil
	}
	code, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("statusOnError %q: %w", s, err)
	}
	if _, ok := typev3.StatusCode_name[int32(code)]; !ok {
		return nil, fmt.Errorf("statusOnError %s is not an HTTP status Envoy knows", s)
	}
	return &typev3.HttpStatus{Code: typev3.StatusCode(code)}, nil
}

func timeoutOr(d *durationpb.Duration) *durationpb.Duration {
	if d == nil {
		return &durationpb.Duration{Seconds: 600}
	}
	return d
}

func bodySettings(b *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationRequestBody) *extauthzv3.BufferSettings {
	if b == nil {
		return nil
	}
	return &extauthzv3.BufferSettings{MaxRequestBytes: b.GetMaxRequestBytes(), AllowPartialMessage: b.GetAllowPartialMessage(), PackAsBytes: b.GetPackAsBytes()}
}

func httpProvider(pc *push.PushContext, c *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider) *provider {
	host, cluster, err := lookupCluster(pc, c.GetService(), c.GetPort())
	if err != nil {
		return &provider{err: err}
	}
	status, err := statusOnError(c.GetStatusOnError())
	if err != nil {
		return &provider{err: err}
	}
	if pp := c.GetPathPrefix(); pp != "" {
		if _, err := url.Parse(pp); err != nil || !strings.HasPrefix(pp, "/") {
			return &provider{err: fmt.Errorf("pathPrefix %q must be a path beginning with '/'", pp)}
		}
	}
	//lint:ignore SA1019 the deprecated field is still honoured, as istiod does
	for _, hs := range [][]string{c.GetIncludeRequestHeadersInCheck(), c.GetIncludeHeadersInCheck(), c.GetHeadersToDownstreamOnDeny(),
		c.GetHeadersToDownstreamOnAllow(), c.GetHeadersToUpstreamOnAllow()} {
		if slices.Contains(hs, "*") {
			return &provider{err: fmt.Errorf("a header pattern of a single '*' is not supported (use a prefix or a suffix)")}
		}
	}
	svc := &extauthzv3.HttpService{
		PathPrefix: c.GetPathPrefix(),
		ServerUri: &corev3.HttpUri{Uri: "http://" + host, Timeout: timeoutOr(c.GetTimeout()),
			HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}},
	}
	if add := c.GetIncludeAdditionalHeadersInCheck(); len(add) > 0 {
		req := &extauthzv3.AuthorizationRequest{}
		for _, k := range slices.Sorted(maps.Keys(add)) {
			req.HeadersToAdd = append(req.HeadersToAdd, &corev3.HeaderValue{Key: k, Value: add[k]})
		}
		svc.AuthorizationRequest = req
	}
	if len(c.GetHeadersToUpstreamOnAllow())+len(c.GetHeadersToDownstreamOnDeny())+len(c.GetHeadersToDownstreamOnAllow()) > 0 {
		svc.AuthorizationResponse = &extauthzv3.AuthorizationResponse{
			AllowedUpstreamHeaders:        headerList(c.GetHeadersToUpstreamOnAllow()),
			AllowedClientHeaders:          headerList(c.GetHeadersToDownstreamOnDeny()),
			AllowedClientHeadersOnSuccess: headerList(c.GetHeadersToDownstreamOnAllow()),
		}
	}
	h := &extauthzv3.ExtAuthz{
		StatusOnError: status, FailureModeAllow: c.GetFailOpen(), TransportApiVersion: corev3.ApiVersion_V3,
		Services:        &extauthzv3.ExtAuthz_HttpService{HttpService: svc},
		WithRequestBody: bodySettings(c.GetIncludeRequestBodyInCheck()),
	}
	if hs := c.GetIncludeRequestHeadersInCheck(); len(hs) > 0 {
		h.AllowedHeaders = headerList(hs)
		//lint:ignore SA1019 the deprecated field is still honoured, as istiod does
	} else if hs := c.GetIncludeHeadersInCheck(); len(hs) > 0 {
		h.AllowedHeaders = headerList(hs)
	}
	return &provider{http: h}
}

func grpcProvider(pc *push.PushContext, c *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationGrpcProvider) *provider {
	host, cluster, err := lookupCluster(pc, c.GetService(), c.GetPort())
	if err != nil {
		return &provider{err: err}
	}
	status, err := statusOnError(c.GetStatusOnError())
	if err != nil {
		return &provider{err: err}
	}
	grpc := &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster, Authority: host}},
		Timeout:         timeoutOr(c.GetTimeout()),
	}
	return &provider{
		http: &extauthzv3.ExtAuthz{StatusOnError: status, FailureModeAllow: c.GetFailOpen(), TransportApiVersion: corev3.ApiVersion_V3,
			Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: grpc}, WithRequestBody: bodySettings(c.GetIncludeRequestBodyInCheck())},
		tcp: &extauthznetv3.ExtAuthz{StatPrefix: "tcp.", FailureModeAllow: c.GetFailOpen(), TransportApiVersion: corev3.ApiVersion_V3, GrpcService: grpc},
	}
}

func headerList(hs []string) *matcherv3.ListStringMatcher {
	if len(hs) == 0 {
		return nil
	}
	out := &matcherv3.ListStringMatcher{}
	for _, h := range hs {
		m := &matcherv3.StringMatcher{IgnoreCase: true}
		switch {
		case strings.HasPrefix(h, "*"):
			m.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: h[1:]}
		case strings.HasSuffix(h, "*"):
			m.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: h[:len(h)-1]}
		default:
			m.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: h}
		}
		out.Patterns = append(out.Patterns, m)
	}
	return out
}

// enabledMatcher matches the RBAC filter's shadow effective policy ID
// when it is one of provider's rules.
func enabledMatcher(rbacFilter, provider string) *matcherv3.MetadataMatcher {
	return &matcherv3.MetadataMatcher{
		Filter: rbacFilter,
		Path:   metadataPath(extAuthzStatPrefix + shadowEffectiveID),
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: extAuthzPrefix + "-" + provider},
		}}},
	}
}

// withEnabled sets h (built for this generation only) to run for
// provider's rules only.
func withEnabled(h *extauthzv3.ExtAuthz, rbacFilter, provider string) *extauthzv3.ExtAuthz {
	h.FilterEnabledMetadata = enabledMatcher(rbacFilter, provider)
	return h
}

func withEnabledNet(t *extauthznetv3.ExtAuthz, rbacFilter, provider string) *extauthznetv3.ExtAuthz {
	t.FilterEnabledMetadata = enabledMatcher(rbacFilter, provider)
	return t
}

func rbacHTTP(r *rbachttpv3.RBAC) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: HTTPFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(r)}}
}

func rbacNet(r *rbacnetv3.RBAC) *listenerv3.Filter {
	return &listenerv3.Filter{Name: NetworkFilterName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(r)}}
}

// matchNever is istiod's rule of a policy without rules: it matches
// nothing.
func matchNever() *rbacv3.Policy {
	return &rbacv3.Policy{
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_NotRule{NotRule: anyPerm()}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_NotId{NotId: anyID()}}},
	}
}
