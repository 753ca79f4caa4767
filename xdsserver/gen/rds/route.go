package rds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
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
	tls       bool // a gateway server's port with TLS settings (redirects' default scheme https)
	proxyless bool
	// meshRetry is the mesh's defaultHttpRetryPolicy for Envoy, made
	// once and shared by the default routes (never altered).
	meshRetry *routev3.RetryPolicy
}

// vsRoutes translates every HTTP route of a VirtualService: one Envoy
// route per match condition that applies (Istio's expansion). The Envoy
// routes of one HTTP route differ only in their match: the rest (name,
// action, per-filter config, header operations) is built once and shared
// by them, and HTTP routes whose actions would be equal share one, which
// is safe because outputs are never altered. acts, if not nil, holds the
// actions of earlier builds of c that this one can share (same proxy;
// no destination depends on the listener port). A route and its prefix
// match are allocated as one block, as are the routes after the first of
// one HTTP route.
func (b *routeBuilder) vsRoutes(c *config.Config, acts *actions) []*routev3.Route {
	vs := c.Spec.(*networking.VirtualService)
	n := 0
	for _, hr := range vs.GetHttp() {
		n += max(1, len(hr.GetMatch()))
	}
	if n == 0 {
		return nil
	}
	out := make([]*routev3.Route, 0, n)
	if acts == nil {
		acts = &actions{}
	}
	// As istiod: routes after one that matches every request are never
	// reached, and left out.
	catchAll := false
	for _, hr := range vs.GetHttp() {
		if catchAll {
			break
		}
		ms := hr.GetMatch()
		if len(ms) == 0 {
			out = append(out, b.route(c.Namespace, hr, nil, acts))
			catchAll = true
			continue
		}
		var first *routev3.Route
		var rest []routev3.Route       // the other routes of hr, one block
		var restMatched []matchedRoute // or, if all have a prefix match, with them
		for j, m := range ms {
			if catchAll {
				break
			}
			if !b.applies(c.Namespace, m) {
				continue
			}
			if first == nil {
				first = b.route(c.Namespace, hr, m, acts)
				out = append(out, first)
				catchAll = isCatchAll(first)
				if k, prefixes := b.countApplying(c.Namespace, ms[j+1:]); k > 0 && prefixes {
					restMatched = make([]matchedRoute, 0, k)
				} else if k > 0 {
					rest = make([]routev3.Route, 0, k)
				}
				continue
			}
			var r *routev3.Route
			if restMatched != nil {
				restMatched = restMatched[:len(restMatched)+1]
				mr := &restMatched[len(restMatched)-1]
				r = &mr.r
				copyWithMatch(r, first, mr.match.init(m, nil, nil))
			} else {
				rest = rest[:len(rest)+1]
				r = &rest[len(rest)-1]
				copyWithMatch(r, first, routeMatch(m))
			}
			r.Name = routeName(hr, m)
			out = append(out, r)
			catchAll = isCatchAll(r)
		}
	}
	if gatewaySemantics(c) {
		applyGatewaySemantics(out)
	}
	vsTelemetry(c, b.port, out) // telemetry.go
	return out
}

// isCatchAll reports whether r matches every request (istiod's
// IsCatchAllRoute): the path prefix "/" or the regex ".*", and no header,
// query or metadata condition.
func isCatchAll(r *routev3.Route) bool {
	m := r.GetMatch()
	all := m.GetPrefix() == "/" || m.GetPathSeparatedPrefix() == "/" || m.GetSafeRegex().GetRegex() == ".*"
	return all && len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0 && len(m.GetDynamicMetadata()) == 0
}

// routeName is the name of hr's route for match m, as istiod's: the HTTP
// route's name (none when it has none), and the match's after a dot when
// the match is named.
func routeName(hr *networking.HTTPRoute, m *networking.HTTPMatchRequest) string {
	if mn := m.GetName(); mn != "" {
		return hr.GetName() + "." + mn
	}
	return hr.GetName()
}

// countApplying counts the match conditions of ms that apply and
// reports whether they all match a prefix.
func (b *routeBuilder) countApplying(ns string, ms []*networking.HTTPMatchRequest) (n int, prefixes bool) {
	prefixes = true
	for _, m := range ms {
		if b.applies(ns, m) {
			n++
			prefixes = prefixes && isPrefix(m)
		}
	}
	return n, prefixes
}

// copyWithMatch makes dst, a zero Route, a copy of r with another match:
// every field is copied (TestCopyWithMatchCopiesEveryField checks), so
// none route sets can be lost.
func copyWithMatch(dst, r *routev3.Route, m *routev3.RouteMatch) {
	dst.Name, dst.Match, dst.Action, dst.Metadata, dst.Decorator = r.Name, m, r.Action, r.Metadata, r.Decorator
	dst.TypedPerFilterConfig = r.TypedPerFilterConfig
	dst.RequestHeadersToAdd, dst.RequestHeadersToRemove = r.RequestHeadersToAdd, r.RequestHeadersToRemove
	dst.ResponseHeadersToAdd, dst.ResponseHeadersToRemove = r.ResponseHeadersToAdd, r.ResponseHeadersToRemove
	//lint:ignore SA1019 copies a route's fields through unchanged
	dst.Tracing, dst.PerRequestBufferLimitBytes, dst.StatPrefix = r.Tracing, r.PerRequestBufferLimitBytes, r.StatPrefix
	dst.RequestBodyBufferLimit, dst.RouteSpecifiers = r.RequestBodyBufferLimit, r.RouteSpecifiers
}

// matchedRoute is a route with its match, when that matches a prefix
// (isPrefix), allocated as one block: most routes. matchedRoute1 and
// matchedRoute2 have room for a match's one or two header matchers
// (Knative matches an authority and a header).
type (
	matchedRoute struct {
		r     routev3.Route
		match prefixMatch
	}
	matchedRoute1 struct {
		matchedRoute
		hb [1]headerBlock
		hp [1]*routev3.HeaderMatcher
	}
	matchedRoute2 struct {
		matchedRoute
		hb [2]headerBlock
		hp [2]*routev3.HeaderMatcher
	}
)

// newRoute allocates a route with the translation of m as its match (nil:
// every request).
func newRoute(m *networking.HTTPMatchRequest) *routev3.Route {
	if m == nil || !isPrefix(m) {
		return &routev3.Route{Match: routeMatch(m)}
	}
	var b *matchedRoute
	switch headerCount(m) {
	case 1:
		b1 := &matchedRoute1{}
		b1.r.Match = b1.match.init(m, b1.hb[:], b1.hp[:0])
		b = &b1.matchedRoute
	case 2:
		b2 := &matchedRoute2{}
		b2.r.Match = b2.match.init(m, b2.hb[:], b2.hp[:0])
		b = &b2.matchedRoute
	default:
		b = &matchedRoute{}
		b.r.Match = b.match.init(m, nil, nil)
	}
	return &b.r
}

// forwardRoute is a forwarding route with its action and their oneof
// wrappers, allocated as one block: the route of a service without a
// VirtualService.
type forwardRoute struct {
	r routev3.Route
	actionBlock
}

// actionBlock is a route action with the oneof wrappers that hold it
// and its cluster, allocated as one block.
type actionBlock struct {
	wrap    routev3.Route_Route
	action  routev3.RouteAction
	cluster routev3.RouteAction_Cluster
}

// actions are the actions built for the first forwarding HTTP routes of
// a VirtualService, for the next ones to share when equal (Knative, for
// one, splits a destination's traffic into several HTTP routes that
// differ only in their matches and header operations).
type actions struct {
	n     int
	built [8]struct {
		hr   *networking.HTTPRoute
		wrap *routev3.Route_Route
	}
}

// route translates an HTTP route for its match condition m (nil: it has
// none).
func (b *routeBuilder) route(ns string, hr *networking.HTTPRoute, m *networking.HTTPMatchRequest, acts *actions) *routev3.Route {
	r := newRoute(m)
	switch {
	case hr.GetRedirect() != nil:
		r.Action = &routev3.Route_Redirect{Redirect: redirect(hr.GetRedirect(), b.port, b.tls)}
	case hr.GetDirectResponse() != nil:
		r.Action = &routev3.Route_DirectResponse{DirectResponse: directResponse(hr.GetDirectResponse())}
	default:
		r.Action = b.forward(ns, hr, acts)
		if f := hr.GetFault(); f != nil {
			r.TypedPerFilterConfig = map[string]*anypb.Any{FaultFilterName: gen.MustAny(fault(f))}
		}
	}
	if c := hr.GetCorsPolicy(); c != nil && !b.proxyless {
		// On every kind of route, as Istio; grpc-go would reject the
		// config of a filter it does not know.
		if r.TypedPerFilterConfig == nil {
			r.TypedPerFilterConfig = make(map[string]*anypb.Any, 1)
		}
		r.TypedPerFilterConfig[CORSFilterName] = gen.MustAny(corsPolicy(c))
	}
	r.Name = routeName(hr, m)
	// A forwarding route to one cluster also takes its destination's
	// header operations, after its own (Istio's processDestination);
	// weighted clusters carry theirs (action). gRPC ignores both; istiod
	// sends them to proxyless clients too.
	var dh *networking.Headers
	if r.GetRoute() != nil {
		dh = singleLive(hr).GetHeaders()
	}
	applyHeaders(r, hr.GetHeaders(), dh)
	return r
}

// forward is the action of a forwarding HTTP route: one already built
// for an HTTP route of acts with an equal action, else a new one.
func (b *routeBuilder) forward(ns string, hr *networking.HTTPRoute, acts *actions) *routev3.Route_Route {
	for _, a := range acts.built[:acts.n] {
		if sameAction(a.hr, hr) {
			return a.wrap
		}
	}
	ab := &actionBlock{}
	ab.wrap.Route = &ab.action
	b.action(&ab.action, &ab.cluster, ns, hr)
	if acts.n < len(acts.built) {
		acts.built[acts.n].hr, acts.built[acts.n].wrap = hr, &ab.wrap
		acts.n++
	}
	return &ab.wrap
}

// sameAction reports whether action builds the same action for a and b,
// HTTP routes of one VirtualService: every field it reads is equal.
func sameAction(a, b *networking.HTTPRoute) bool {
	if a == b {
		return true
	}
	ad, bd := a.GetRoute(), b.GetRoute()
	if len(ad) != len(bd) {
		return false
	}
	for i, x := range ad {
		y := bd[i]
		xd, yd := x.GetDestination(), y.GetDestination()
		if x.GetWeight() != y.GetWeight() || xd.GetHost() != yd.GetHost() || xd.GetSubset() != yd.GetSubset() || xd.GetPort().GetNumber() != yd.GetPort().GetNumber() {
			return false
		}
		// Weighted clusters carry their destinations' header operations
		// (one cluster's go on the route instead).
		// One cluster's request authority is a host rewrite (hostRewrite).
		if len(ad) > 1 && !sameMessage(x.GetHeaders(), y.GetHeaders()) ||
			len(ad) == 1 && authority(x.GetHeaders().GetRequest()) != authority(y.GetHeaders().GetRequest()) {
			return false
		}
	}
	at, bt := a.GetTimeout(), b.GetTimeout()
	if (at == nil) != (bt == nil) || at.GetSeconds() != bt.GetSeconds() || at.GetNanos() != bt.GetNanos() {
		return false
	}
	if len(a.GetMirrors()) != len(b.GetMirrors()) {
		return false
	}
	for i, x := range a.GetMirrors() {
		if !sameMessage(x, b.GetMirrors()[i]) {
			return false
		}
	}
	if authority(a.GetHeaders().GetRequest()) != authority(b.GetHeaders().GetRequest()) {
		return false
	}
	return sameMessage(a.GetRetries(), b.GetRetries()) && sameMessage(a.GetMirror(), b.GetMirror()) &&
		sameMessage(a.GetMirrorPercentage(), b.GetMirrorPercentage()) && sameMessage(a.GetRewrite(), b.GetRewrite())
}

// sameMessage reports whether x and y are both nil or equal.
func sameMessage[M interface {
	comparable
	proto.Message
}](x, y M) bool {
	var none M
	if x == none || y == none || x == y {
		return x == y
	}
	return proto.Equal(x, y)
}

// defaultRoute makes f the route that sends everything to cluster: the
// route of a service without a VirtualService.
func (b *routeBuilder) defaultRoute(f *forwardRoute, cluster, host string) *routev3.Route {
	r, ra := &f.r, &f.action
	r.Name, r.Match, r.Action = "default", matchAll, &f.wrap
	f.wrap.Route = ra
	f.cluster.Cluster = cluster
	ra.ClusterSpecifier = &f.cluster
	// A proxyless client's too, as istiod's BuildDefaultHTTPOutboundRoute
	// (gRPC reads the retry policy, not the timeouts).
	ra.Timeout = noTimeout
	//lint:ignore SA1019 deprecated, what istiod sets (see action)
	ra.MaxGrpcTimeout = noTimeout
	ra.RetryPolicy = defaultRetryPolicy
	if m := b.v.Push.Mesh.GetDefaultHttpRetryPolicy(); m != nil {
		if b.meshRetry == nil {
			b.meshRetry = retry(m, false)
		}
		ra.RetryPolicy = b.meshRetry
	}
	// The DestinationRule's consistent hash goes on the default route too,
	// proxyless or not, as istiod's BuildSidecarVirtualHostWrapper does
	// (grpcgen builds its routes the same way): without a hash policy a
	// RING_HASH cluster hashes every request afresh.
	if b.v.HasDestinationRules() {
		ra.HashPolicy = b.hashPolicy(b.v.ServiceFor(host), b.port, "")
	}
	return r
}

// action fills ra, the forwarding part of a route; cl is its cluster
// specifier when there is one destination.
func (b *routeBuilder) action(ra *routev3.RouteAction, cl *routev3.RouteAction_Cluster, ns string, hr *networking.HTTPRoute) {
	one := singleLive(hr)
	if one != nil {
		d := one.GetDestination()
		host, svc, port := b.dest(ns, d)
		cl.Cluster = gen.ClusterName(gen.Outbound, port, d.GetSubset(), host)
		ra.ClusterSpecifier = cl
		ra.HashPolicy = b.hashPolicy(svc, port, d.GetSubset())
	} else {
		wc := &routev3.WeightedCluster{Clusters: make([]*routev3.WeightedCluster_ClusterWeight, 0, len(hr.GetRoute()))}
		for _, d := range hr.GetRoute() {
			if d.GetWeight() <= 0 {
				continue
			}
			host, svc, port := b.dest(ns, d.GetDestination())
			cw := &routev3.WeightedCluster_ClusterWeight{Name: gen.ClusterName(gen.Outbound, port, d.GetDestination().GetSubset(), host), Weight: gen.U32(uint32(d.GetWeight()))}
			clusterHeaders(cw, d.GetHeaders())
			// Every weighted destination's hash policy, as istiod's
			// processWeightedDestination.
			ra.HashPolicy = append(ra.HashPolicy, b.hashPolicy(svc, port, d.GetDestination().GetSubset())...)
			wc.Clusters = append(wc.Clusters, cw)
		}
		ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	ra.Timeout = hr.GetTimeout()
	if ra.Timeout == nil {
		ra.Timeout = noTimeout
	}
	if b.proxyless {
		// gRPC reads max_stream_duration (0: none), as istiod's setTimeout
		// gives a proxyless client.
		ra.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: ra.Timeout}
	} else {
		// A gRPC request's grpc-timeout header bounded by the route's
		// timeout (none: no bound), as istiod's setTimeout; without it
		// Envoy ignores the header.
		//lint:ignore SA1019 deprecated; istiod keeps it, max_stream_duration has regressions
		ra.MaxGrpcTimeout = ra.Timeout
	}
	// gRPC reads the retry conditions it knows and ignores the others
	// and the host predicate, so a proxyless client gets istiod's policy
	// too (Istio's default when the route sets none).
	retries := hr.GetRetries()
	if retries == nil { // istiod: the mesh's defaultHttpRetryPolicy, if any
		retries = b.v.Push.Mesh.GetDefaultHttpRetryPolicy()
	}
	ra.RetryPolicy = retry(retries, one != nil && len(ra.HashPolicy) > 0)
	for _, mp := range mirrors(hr) {
		// As istiod: the mirrored request keeps its Host (Envoy would
		// append "-shadow", so the mirror's virtual hosts would not match)
		// and starts no trace of its own.
		ra.RequestMirrorPolicies = append(ra.RequestMirrorPolicies, &routev3.RouteAction_RequestMirrorPolicy{
			Cluster: b.cluster(ns, mp.GetDestination()), RuntimeFraction: mirrorFraction(mp.GetPercentage()),
			TraceSampled: notSampled, DisableShadowHostSuffixAppend: true,
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
	// A request :authority or host in the header operations rewrites the
	// host unless the rewrite does (Istio).
	if ra.HostRewriteSpecifier == nil {
		if a := hostRewrite(hr, one); a != "" {
			ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: a}
		}
	}
}

// singleLive is the destination of a forwarding HTTP route with exactly
// one destination, nil for several: as istiod, several destinations
// become weighted clusters even when only one of them has a weight (the
// others, weight 0, are left out), so their header operations stay on
// the cluster weight.
func singleLive(hr *networking.HTTPRoute) *networking.HTTPRouteDestination {
	if ds := hr.GetRoute(); len(ds) == 1 {
		return ds[0]
	}
	return nil
}

func mirrors(hr *networking.HTTPRoute) []*networking.HTTPMirrorPolicy {
	out := hr.GetMirrors()
	if m := hr.GetMirror(); m != nil {
		out = append([]*networking.HTTPMirrorPolicy{{Destination: m, Percentage: hr.GetMirrorPercentage()}}, out...)
	}
	return out
}

// dest resolves a destination (short hosts are relative to the
// VirtualService's namespace): its host, the visible service of that
// host (nil if none) and the service port it means.
func (b *routeBuilder) dest(ns string, d *networking.Destination) (string, *model.Service, uint32) {
	host := b.v.FQDN(d.GetHost(), ns)
	svc := b.v.ServiceFor(host)
	return host, svc, destPort(svc, d.GetPort().GetNumber(), b.port)
}

// destPort is the service port a destination to svc (nil: no visible
// service) with port means on a listener port.
func destPort(svc *model.Service, port, listener uint32) uint32 {
	if svc != nil {
		if p, ok := scope.DestinationPort(svc, port, listener); ok {
			return p.Number
		}
	}
	if port != 0 {
		return port
	}
	return listener
}

// cluster names the cluster of a destination.
func (b *routeBuilder) cluster(ns string, d *networking.Destination) string {
	host, _, port := b.dest(ns, d)
	return gen.ClusterName(gen.Outbound, port, d.GetSubset(), host)
}

// mirrorFraction is a mirror's share, as istiod's MirrorPercent: a
// percentage per million; none, all of it (100 per hundred).
func mirrorFraction(p *networking.Percent) *corev3.RuntimeFractionalPercent {
	if p == nil {
		return mirrorAll
	}
	return fraction(p, 100)
}

// mirrorAll is shared and never altered.
var mirrorAll = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}

// fraction is a percentage (default def when unset) as a runtime
// fraction per million, as Istio writes it.
func fraction(p *networking.Percent, def float64) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: percent(p, def)}
}
