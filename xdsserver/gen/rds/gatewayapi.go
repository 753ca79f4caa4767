package rds

import (
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/config"
)

// gatewaySemantics reports whether c was converted from the Kubernetes
// Gateway API (core/gatewayapi marks it as istiod does).
func gatewaySemantics(c *config.Config) bool {
	return c.Annotations["internal.istio.io/route-semantics"] == "gateway"
}

// applyGatewaySemantics gives the routes of a converted VirtualService
// the Gateway API's meaning, as istiod: a path prefix matches whole
// segments (path_separated_prefix), a backend that does not exist
// answers 500, and a prefix rewritten to "/" drops the prefix and keeps
// one slash. A route's match is this build's own (the shared matchAll
// is "/", left alone). An action may be shared by the routes of equal
// actions of this VirtualService, also with earlier builds of it: every
// one of them wants the 500, and an action from an earlier build has it
// already, so it is set only on one this build made, before anyone else
// can read it. The rewrite depends on the route's prefix: that action is
// copied.
func applyGatewaySemantics(routes []*routev3.Route) {
	for _, r := range routes {
		if p, ok := r.GetMatch().GetPathSpecifier().(*routev3.RouteMatch_Prefix); ok && p.Prefix != "/" {
			r.Match.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: strings.TrimSuffix(p.Prefix, "/")}
		}
		a := r.GetRoute()
		if a == nil {
			continue
		}
		if a.GetPrefixRewrite() == "/" && r.GetMatch().GetPathSeparatedPrefix() != "" {
			a = proto.Clone(a).(*routev3.RouteAction)
			a.PrefixRewrite = ""
			a.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{
				Pattern:      &matcherv3.RegexMatcher{Regex: "^" + regexp.QuoteMeta(r.GetMatch().GetPathSeparatedPrefix()) + `(/?)(.*)`},
				Substitution: `/\2`,
			}
			r.Action = &routev3.Route_Route{Route: a}
		}
		if a.ClusterNotFoundResponseCode != routev3.RouteAction_INTERNAL_SERVER_ERROR {
			a.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
		}
	}
}
