package rds

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// routeBuilder turns VirtualService HTTP routes into Envoy routes for one
// listener port, as seen by one proxy through one gateway ("mesh" for
// sidecars and proxyless clients).
type routeBuilder struct {
	v         *scope.View
	port      uint32
	gateway   string
	proxyless bool
}

// vsRoutes translates every HTTP route of a VirtualService: one Envoy
// route per match condition that applies (Istio's expansion). The Envoy
// routes of one HTTP route differ only in their match: the rest (name,
// action, per-filter config, header operations) is built once and shared
// by them, which is safe because outputs are never altered.
func (b *routeBuilder) vsRoutes(c *config.Config) []*routev3.Route {
	vs := c.Spec.(*networking.VirtualService)
	var out []*routev3.Route
	for i, hr := range vs.GetHttp() {
		if len(hr.GetMatch()) == 0 {
			r := b.route(c.Namespace, hr, i)
			r.Match = matchAll
			out = append(out, r)
			continue
		}
		var first *routev3.Route
		for _, m := range hr.GetMatch() {
			if !b.applies(m) {
				continue
			}
			if first == nil {
				first = b.route(c.Namespace, hr, i)
				first.Match = routeMatch(m)
				out = append(out, first)
			} else {
				out = append(out, withMatch(first, routeMatch(m)))
			}
		}
	}
	return out
}

// withMatch is a copy of r with another match: every field is copied
// (TestWithMatchCopiesEveryField checks), so none route sets can be lost.
func withMatch(r *routev3.Route, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{
		Name: r.Name, Match: m, Action: r.Action, Metadata: r.Metadata, Decorator: r.Decorator,
		TypedPerFilterConfig: r.TypedPerFilterConfig,
		RequestHeadersToAdd:  r.RequestHeadersToAdd, RequestHeadersToRemove: r.RequestHeadersToRemove,
		ResponseHeadersToAdd: r.ResponseHeadersToAdd, ResponseHeadersToRemove: r.ResponseHeadersToRemove,
		Tracing: r.Tracing, PerRequestBufferLimitBytes: r.PerRequestBufferLimitBytes, StatPrefix: r.StatPrefix,
		RequestBodyBufferLimit: r.RequestBodyBufferLimit, RouteSpecifiers: r.RouteSpecifiers,
	}
}

// route translates an HTTP route but for its match, which the caller
// sets.
func (b *routeBuilder) route(ns string, hr *networking.HTTPRoute, i int) *routev3.Route {
	r := &routev3.Route{Name: hr.GetName()}
	if r.Name == "" {
		r.Name = unnamedRoute(i)
	}
	switch {
	case hr.GetRedirect() != nil:
		r.Action = &routev3.Route_Redirect{Redirect: redirect(hr.GetRedirect())}
	case hr.GetDirectResponse() != nil:
		r.Action = &routev3.Route_DirectResponse{DirectResponse: directResponse(hr.GetDirectResponse())}
	default:
		r.Action = &routev3.Route_Route{Route: b.action(ns, hr)}
		if f := hr.GetFault(); f != nil {
			r.TypedPerFilterConfig = map[string]*anypb.Any{FaultFilterName: gen.MustAny(fault(f))}
		}
	}
	if !b.proxyless {
		applyHeaders(r, hr.GetHeaders())
	}
	return r
}

// routeNames are the names of the first unnamed HTTP routes, spelled out
// so most routes need no string built. Never altered.
var routeNames = [...]string{"route-0", "route-1", "route-2", "route-3", "route-4", "route-5", "route-6", "route-7"}

// unnamedRoute names the i-th HTTP route of a VirtualService that has no
// name, as Istio does.
func unnamedRoute(i int) string {
	if i < len(routeNames) {
		return routeNames[i]
	}
	return "route-" + strconv.Itoa(i)
}

// defaultRoute sends everything to cluster: the route of a service
// without a VirtualService.
func (b *routeBuilder) defaultRoute(cluster, host string) *routev3.Route {
	ra := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}
	if !b.proxyless {
		ra.Timeout = noTimeout
		ra.RetryPolicy = defaultRetryPolicy
		ra.HashPolicy = b.hashPolicy(host, b.port, "")
	}
	return &routev3.Route{Name: "default", Match: matchAll, Action: &routev3.Route_Route{Route: ra}}
}

// action builds the forwarding part of a route.
func (b *routeBuilder) action(ns string, hr *networking.HTTPRoute) *routev3.RouteAction {
	ra := &routev3.RouteAction{}
	// A single destination is live whatever its weight; of several, those
	// with a weight.
	live := hr.GetRoute()
	if len(live) > 1 {
		live = nil
		for _, d := range hr.GetRoute() {
			if d.GetWeight() > 0 {
				live = append(live, d)
			}
		}
	}
	if len(live) == 1 {
		ra.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: b.cluster(ns, live[0].GetDestination())}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, d := range live {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: b.cluster(ns, d.GetDestination()), Weight: gen.U32(uint32(d.GetWeight()))})
		}
		ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if len(live) > 0 {
		d := live[0].GetDestination()
		host := b.v.FQDN(d.GetHost(), ns)
		ra.HashPolicy = b.hashPolicy(host, b.destPort(host, d.GetPort().GetNumber()), d.GetSubset())
	}
	if b.proxyless {
		if t := hr.GetTimeout(); t != nil {
			ra.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: t, GrpcTimeoutHeaderMax: t}
		}
		ra.RetryPolicy = grpcRetry(hr.GetRetries())
	} else {
		ra.Timeout = hr.GetTimeout()
		if ra.Timeout == nil {
			ra.Timeout = noTimeout
		}
		ra.RetryPolicy = retry(hr.GetRetries())
	}
	for _, mp := range mirrors(hr) {
		ra.RequestMirrorPolicies = append(ra.RequestMirrorPolicies, &routev3.RouteAction_RequestMirrorPolicy{
			Cluster: b.cluster(ns, mp.GetDestination()), RuntimeFraction: fraction(mp.GetPercentage(), 100),
		})
	}
	if rw := hr.GetRewrite(); rw != nil {
		if rw.GetUri() != "" {
			ra.PrefixRewrite = rw.GetUri()
		}
		if rr := rw.GetUriRegexRewrite(); rr != nil {
			ra.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: rr.GetMatch()}, Substitution: rr.GetRewrite()}
		}
		if a := rw.GetAuthority(); a != "" {
			ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: a}
		}
	}
	return ra
}

func mirrors(hr *networking.HTTPRoute) []*networking.HTTPMirrorPolicy {
	out := hr.GetMirrors()
	if m := hr.GetMirror(); m != nil {
		out = append([]*networking.HTTPMirrorPolicy{{Destination: m, Percentage: hr.GetMirrorPercentage()}}, out...)
	}
	return out
}

// destPort is the service port a destination to host means.
func (b *routeBuilder) destPort(host string, port uint32) uint32 {
	if svc := b.v.ServiceFor(host); svc != nil {
		if p, ok := scope.DestinationPort(svc, port, b.port); ok {
			return p.Number
		}
	}
	if port != 0 {
		return port
	}
	return b.port
}

// cluster names the cluster of a destination (short hosts are relative
// to the VirtualService's namespace).
func (b *routeBuilder) cluster(ns string, d *networking.Destination) string {
	host := b.v.FQDN(d.GetHost(), ns)
	return gen.ClusterName(gen.Outbound, b.destPort(host, d.GetPort().GetNumber()), d.GetSubset(), host)
}

// fraction is a percentage (default def when unset) as a runtime
// fraction per million, as Istio writes it.
func fraction(p *networking.Percent, def float64) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: percent(p, def)}
}
