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
// one slash. The routes and their matches are this build's own; an
// action is shared by routes of equal actions, so one that must differ
// per route is copied.
func applyGatewaySemantics(routes []*routev3.Route) {
	for _, r := range routes {
		prefix := ""
		if p, ok := r.GetMatch().GetPathSpecifier().(*routev3.RouteMatch_Prefix); ok && p.Prefix != "/" {
			prefix = strings.TrimSuffix(p.Prefix, "/")
			m := proto.Clone(r.Match).(*routev3.RouteMatch)
			m.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: prefix}
			r.Match = m
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
			a = proto.Clone(a).(*routev3.RouteAction)
			a.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
			r.Action = &routev3.Route_Route{Route: a}
		}
	}
}
