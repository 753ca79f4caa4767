package authz

import (
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/emptypb"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// GatewayNameLabel marks a Kubernetes Gateway API gateway's proxy: such
// a proxy takes policies by targetRefs (kind Gateway, its name), as
// istiod attaches them.
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// JWTRules returns the jwtRules of the RequestAuthentications that
// select a workload in namespace ns with labels (of ns and of the root
// namespace), sorted by issuer as istiod sorts them.
func JWTRules(pc *push.PushContext, ns string, labels map[string]string) []*security.JWTRule {
	root := scope.RootNamespace(pc)
	nss := []string{ns}
	if ns != root {
		nss = append(nss, root)
	}
	var rules []*security.JWTRule
	for _, n := range nss {
		for _, c := range pc.ConfigsIn(config.RequestAuthentication, n) {
			ra := c.Spec.(*security.RequestAuthentication)
			if attaches(c.Namespace, ns, labels, ra.GetSelector().GetMatchLabels(), ra.GetTargetRef(), ra.GetTargetRefs()) {
				rules = append(rules, ra.GetJwtRules()...)
			}
		}
	}
	slices.SortStableFunc(rules, func(a, b *security.JWTRule) int { return strings.Compare(a.GetIssuer(), b.GetIssuer()) })
	return rules
}

// attaches is istiod's rule for a selector- or targetRef-scoped policy
// in namespace policyNS and a workload in ns with labels: a workload that
// is not a Gateway API gateway takes policies without targetRefs whose
// selector its labels match; a Gateway API gateway also takes those of
// its namespace naming it (kind Gateway) in targetRefs.
func attaches(policyNS, ns string, labels, sel map[string]string, ref *typev1beta1.PolicyTargetReference, refs []*typev1beta1.PolicyTargetReference) bool {
	if ref != nil {
		refs = append(slices.Clip(refs), ref)
	}
	gw, isGW := labels[GatewayNameLabel]
	if len(refs) == 0 {
		return len(sel) == 0 || scope.LabelsMatch(sel, labels)
	}
	if !isGW || policyNS != ns {
		return false
	}
	for _, r := range refs {
		if r.GetGroup() == "gateway.networking.k8s.io" && r.GetKind() == "Gateway" && r.GetName() == gw &&
			(r.GetNamespace() == "" || r.GetNamespace() == ns) {
			return true
		}
	}
	return false
}

// JWTFilter is the jwt_authn filter of the workload's jwtRules, or nil
// when none select it: a token, where present, must verify against one
// of the issuers' keys; a request without one passes (AuthorizationPolicy
// decides on it). Keys come inline, from the rule's jwks or from the keys
// baremeshd fetched for its jwksUri (pc.JWKS); a rule whose keys could
// never be fetched gets jwks.PublicOnly, so its tokens are refused.
// gateway sets clear_route_cache (istiod sets it for all but sidecars).
func JWTFilter(pc *push.PushContext, ns string, labels map[string]string, gateway bool) *hcmv3.HttpFilter {
	rules := JWTRules(pc, ns, labels)
	if len(rules) == 0 {
		return nil
	}
	cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{}, BypassCorsPreflight: true}
	var inner, outer []*jwtv3.JwtRequirement
	for i, r := range rules {
		name := "origins-" + strconv.Itoa(i)
		cfg.Providers[name] = provider1(pc.JWKS, r, gateway)
		byName := &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: name}}
		inner = append(inner, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{
			Requirements: []*jwtv3.JwtRequirement{byName, {RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}}},
		}}})
		outer = append(outer, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: name}})
	}
	// One provider: its token or none. Several: every token present
	// verifies (the AND of "this provider or missing"), or one provider
	// verifies (for providers that read the same header).
	req := inner[0]
	if len(inner) > 1 {
		req = &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{
			Requirements: append(outer, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAll{
				RequiresAll: &jwtv3.JwtRequirementAndList{Requirements: inner},
			}}),
		}}}
	}
	cfg.Rules = []*jwtv3.RequirementRule{{
		Match:           &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		RequirementType: &jwtv3.RequirementRule_Requires{Requires: req},
	}}
	return &hcmv3.HttpFilter{Name: JWTFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: gen.MustAny(cfg)}}
}

func provider1(keys *jwks.Set, r *security.JWTRule, gateway bool) *jwtv3.JwtProvider {
	p := &jwtv3.JwtProvider{
		Issuer: r.GetIssuer(), Audiences: r.GetAudiences(), Forward: r.GetForwardOriginalToken(),
		ForwardPayloadHeader: r.GetOutputPayloadToHeader(), PayloadInMetadata: jwtPayloadKey,
		NormalizePayloadInMetadata: &jwtv3.JwtProvider_NormalizePayload{SpaceDelimitedClaims: spaceDelimited(r.GetSpaceDelimitedClaims())},
		ClearRouteCache:            gateway,
		FromParams:                 r.GetFromParams(),
		FromCookies:                r.GetFromCookies(),
	}
	for _, c := range r.GetOutputClaimToHeaders() {
		p.ClaimToHeaders = append(p.ClaimToHeaders, &jwtv3.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
	}
	for _, h := range r.GetFromHeaders() {
		p.FromHeaders = append(p.FromHeaders, &jwtv3.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
	}
	inline := r.GetJwks()
	if inline == "" {
		if k, ok := keys.Keys(r.GetJwksUri(), r.GetIssuer()); ok {
			inline = k
		} else {
			inline = jwks.PublicOnly
		}
	}
	p.JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: inline}}}
	return p
}

// spaceDelimited is the claims whose space-separated values are split
// into lists (so a rule can match one scope): "permission" and "scope"
// always, with the rule's own, sorted.
func spaceDelimited(extra []string) []string {
	if len(extra) == 0 {
		return []string{"permission", "scope"}
	}
	out := append([]string{"permission", "scope"}, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}
