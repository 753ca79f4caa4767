package gatewayapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
)

// routeError is a rule that cannot be converted or a backend that cannot
// be resolved: the reason goes to the parent's ResolvedRefs or Accepted
// condition.
type routeError struct {
	reason, message string
	// backend: only a backend failed (the route is accepted, the backend
	// gets a 500).
	backend bool
}

func (c *converter) httpRoutes(kind config.Kind, routes []config.Config) {
	for i := range routes {
		r := &routes[i]
		var parents []gwapi.ParentReference
		var hostnames []string
		var convert func(mesh bool) ([]*networking.HTTPRoute, *routeError)
		if kind == config.HTTPRoute {
			s, err := decode[gwapi.HTTPRouteSpec](c, r)
			if err != nil {
				continue
			}
			parents, hostnames = s.ParentRefs, s.Hostnames
			convert = func(mesh bool) ([]*networking.HTTPRoute, *routeError) { return c.convertHTTP(r, s, mesh) }
		} else {
			s, err := decode[gwapi.GRPCRouteSpec](c, r)
			if err != nil {
				continue
			}
			parents, hostnames = s.ParentRefs, s.Hostnames
			convert = func(mesh bool) ([]*networking.HTTPRoute, *routeError) { return c.convertGRPC(r, s, mesh) }
		}
		ps := c.resolveParents(r, parents, hostnames)
		var meshRoutes, gwRoutes []*networking.HTTPRoute
		var meshErr, gwErr *routeError
		for _, p := range ps {
			if p.reason != "" {
				continue
			}
			if p.mesh && meshRoutes == nil && meshErr == nil {
				meshRoutes, meshErr = convert(true)
			}
			if !p.mesh && gwRoutes == nil && gwErr == nil {
				gwRoutes, gwErr = convert(false)
			}
		}
		st := c.status(r)
		for _, p := range ps {
			rerr := gwErr
			routes := gwRoutes
			if p.mesh {
				rerr, routes = meshErr, meshRoutes
			}
			st.Parents = append(st.Parents, parentStatus(p, rerr))
			if p.reason != "" || rerr != nil && !rerr.backend {
				continue
			}
			for _, t := range c.targets(r, p, hostnames) {
				rs := routes
				if t.port != 0 {
					rs = withPort(routes, t.port)
				}
				c.add(t, r.Namespace, vsPart{route: r, http: rs})
			}
		}
	}
}

func parentStatus(p parent, rerr *routeError) RouteParentStat {
	ps := RouteParentStat{ParentRef: p.ref, ControllerName: IstioController}
	switch {
	case p.reason != "":
		ps.Conditions = []Condition{condition{"Accepted", false, p.reason, p.message}.api(),
			condition{"ResolvedRefs", true, "ResolvedRefs", "Resolved all references"}.api()}
	case rerr != nil && !rerr.backend:
		ps.Conditions = []Condition{condition{"Accepted", false, rerr.reason, rerr.message}.api(),
			condition{"ResolvedRefs", true, "ResolvedRefs", "Resolved all references"}.api()}
	case rerr != nil:
		ps.Conditions = []Condition{condition{"Accepted", true, "Accepted", "Route was valid"}.api(),
			condition{"ResolvedRefs", false, rerr.reason, rerr.message}.api()}
	default:
		ps.Conditions = []Condition{condition{"Accepted", true, "Accepted", "Route was valid"}.api(),
			condition{"ResolvedRefs", true, "ResolvedRefs", "Resolved all references"}.api()}
	}
	return ps
}

func withPort(routes []*networking.HTTPRoute, port int32) []*networking.HTTPRoute {
	out := make([]*networking.HTTPRoute, len(routes))
	for i, r := range routes {
		cp := proto.Clone(r).(*networking.HTTPRoute)
		cp.Match = nil
		for _, m := range r.Match {
			mm := &networking.HTTPMatchRequest{Uri: m.Uri, Headers: m.Headers, QueryParams: m.QueryParams, Method: m.Method, Port: uint32(port)}
			cp.Match = append(cp.Match, mm)
		}
		if len(cp.Match) == 0 {
			cp.Match = []*networking.HTTPMatchRequest{{Port: uint32(port)}}
		}
		out[i] = cp
	}
	return out
}

func ruleName(name *string, r *config.Config, n int) string {
	if name != nil {
		return *name
	}
	return r.Namespace + "." + r.Name + "." + strconv.Itoa(n)
}

func (c *converter) convertHTTP(r *config.Config, s *gwapi.HTTPRouteSpec, mesh bool) ([]*networking.HTTPRoute, *routeError) {
	var out []*networking.HTTPRoute
	var backendErr *routeError
	for n, rule := range s.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gwapi.HTTPRouteMatch{{}} // the API server's default
		}
		for _, m := range matches {
			hr := &networking.HTTPRoute{Name: ruleName(rule.Name, r, n)}
			mr := &networking.HTTPMatchRequest{Uri: uriMatch(m.Path), Headers: headerMatches(m.Headers)}
			for _, q := range m.QueryParams {
				if mr.QueryParams == nil {
					mr.QueryParams = map[string]*networking.StringMatch{}
				}
				mr.QueryParams[q.Name] = stringMatch(gwapi.Deref(q.Type, "Exact"), q.Value)
			}
			if m.Method != nil {
				mr.Method = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: *m.Method}}
			}
			hr.Match = []*networking.HTTPMatchRequest{mr}
			if err := c.applyFilters(hr, r, rule.Filters, mesh); err != nil {
				if !err.backend {
					return nil, err
				}
				backendErr = err
			}
			if rt := rule.Retry; rt != nil {
				on := []string{"connect-failure", "refused-stream", "unavailable", "cancelled"}
				for _, code := range rt.Codes {
					on = append(on, strconv.Itoa(code))
				}
				hr.Retries = &networking.HTTPRetry{Attempts: int32(gwapi.Deref(rt.Attempts, 2)), RetryOn: strings.Join(on, ",")}
				if hr.Retries.Attempts == 0 {
					hr.Retries.RetryOn = ""
				}
				if rt.Backoff != nil {
					d, _ := time.ParseDuration(*rt.Backoff)
					hr.Retries.Backoff = durationpb.New(d)
				}
			}
			if t := rule.Timeouts; t != nil {
				if t.Request != nil {
					if d, _ := time.ParseDuration(*t.Request); d != 0 {
						hr.Timeout = durationpb.New(d)
					}
				}
				if t.BackendRequest != nil {
					if d, _ := time.ParseDuration(*t.BackendRequest); d != 0 {
						if hr.Retries != nil {
							hr.Retries.PerTryTimeout = durationpb.New(d)
						} else {
							hr.Timeout = durationpb.New(d)
						}
					}
				}
			}
			if err := c.destinations(hr, r, rule.BackendRefs, mesh); err != nil {
				if !err.backend {
					return nil, err
				}
				backendErr = err
			}
			out = append(out, hr)
		}
	}
	return out, backendErr
}

func (c *converter) convertGRPC(r *config.Config, s *gwapi.GRPCRouteSpec, mesh bool) ([]*networking.HTTPRoute, *routeError) {
	var out []*networking.HTTPRoute
	var backendErr *routeError
	for n, rule := range s.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gwapi.GRPCRouteMatch{{}}
		}
		for _, m := range matches {
			hr := &networking.HTTPRoute{Name: ruleName(rule.Name, r, n)}
			uri, err := grpcMethodMatch(m.Method)
			if err != nil {
				return nil, err
			}
			if uri != nil || len(m.Headers) > 0 {
				hr.Match = []*networking.HTTPMatchRequest{{Uri: uri, Headers: headerMatches(m.Headers)}}
			}
			if err := c.applyFilters(hr, r, rule.Filters, mesh); err != nil {
				if !err.backend {
					return nil, err
				}
				backendErr = err
			}
			if err := c.destinations(hr, r, rule.BackendRefs, mesh); err != nil {
				if !err.backend {
					return nil, err
				}
				backendErr = err
			}
			out = append(out, hr)
		}
	}
	return out, backendErr
}

func grpcMethodMatch(m *gwapi.GRPCMethodMatch) (*networking.StringMatch, *routeError) {
	if m == nil {
		return nil, nil
	}
	if m.Service == nil && m.Method == nil {
		return nil, &routeError{reason: "UnsupportedValue", message: "gRPC match must have method or service defined"}
	}
	exact := gwapi.Deref(m.Type, "Exact") == "Exact"
	switch {
	case m.Method == nil && exact:
		return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/" + *m.Service + "/"}}, nil
	case m.Method == nil:
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/" + *m.Service + "/.+"}}, nil
	case m.Service == nil:
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/[^/]+/" + *m.Method}}, nil
	case exact:
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: "/" + *m.Service + "/" + *m.Method}}, nil
	}
	return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/" + *m.Service + "/" + *m.Method}}, nil
}

func stringMatch(typ, v string) *networking.StringMatch {
	if typ == "RegularExpression" {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: v}}
	}
	return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: v}}
}

func headerMatches(hs []gwapi.HTTPHeaderMatch) map[string]*networking.StringMatch {
	if len(hs) == 0 {
		return nil
	}
	out := make(map[string]*networking.StringMatch, len(hs))
	for _, h := range hs {
		out[h.Name] = stringMatch(gwapi.Deref(h.Type, "Exact"), h.Value)
	}
	return out
}

// uriMatch converts a path match; nil is the API server's default
// (PathPrefix /).
func uriMatch(p *gwapi.HTTPPathMatch) *networking.StringMatch {
	typ, v := "PathPrefix", "/"
	if p != nil {
		typ, v = gwapi.Deref(p.Type, typ), gwapi.Deref(p.Value, v)
	}
	switch typ {
	case "Exact":
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: v}}
	case "RegularExpression":
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: v}}
	}
	if v != "/" {
		v = strings.TrimSuffix(v, "/")
	}
	return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: v}}
}

// destinations sets a rule's weighted destinations, or a 500 when no
// backend has weight, as the API says.
func (c *converter) destinations(hr *networking.HTTPRoute, r *config.Config, refs []gwapi.HTTPBackendRef, mesh bool) *routeError {
	sum := 0
	for _, b := range refs {
		sum += int(gwapi.Deref(b.Weight, 1))
	}
	if sum == 0 && hr.Redirect == nil {
		hr.DirectResponse = &networking.HTTPDirectResponse{Status: 500}
		return nil
	}
	if refs == nil {
		return nil
	}
	var kept []gwapi.HTTPBackendRef
	for _, b := range refs {
		if gwapi.Deref(b.Weight, 1) != 0 {
			kept = append(kept, b)
		}
	}
	var backendErr *routeError
	hr.Route = []*networking.HTTPRouteDestination{}
	for _, b := range kept {
		dst, err := c.destination(b.BackendRef, r, mesh)
		if err != nil {
			if !err.backend {
				return err
			}
			backendErr = err
		}
		w := gwapi.Deref(b.Weight, 1)
		if len(kept) == 1 {
			w = 0
		}
		rd := &networking.HTTPRouteDestination{Destination: dst, Weight: w}
		for _, f := range b.Filters {
			var tmp networking.HTTPRoute
			if err := c.applyFilters(&tmp, r, []gwapi.HTTPRouteFilter{f}, mesh); err != nil {
				return err
			}
			if f.Type != "RequestHeaderModifier" && f.Type != "ResponseHeaderModifier" {
				return &routeError{reason: "UnsupportedValue", message: fmt.Sprintf("unsupported backendRef filter type %q", f.Type)}
			}
			if tmp.Headers != nil {
				if rd.Headers == nil {
					rd.Headers = &networking.Headers{}
				}
				if tmp.Headers.Request != nil {
					rd.Headers.Request = tmp.Headers.Request
				}
				if tmp.Headers.Response != nil {
					rd.Headers.Response = tmp.Headers.Response
				}
			}
		}
		hr.Route = append(hr.Route, rd)
	}
	return backendErr
}

// destination resolves one backendRef: a Service (name.ns.svc.domain)
// or a networking.istio.io Hostname (a ServiceEntry host). A reference
// to another namespace needs a ReferenceGrant (gateway routes; mesh
// routes are not checked, as in istiod).
func (c *converter) destination(b gwapi.BackendRef, r *config.Config, mesh bool) (*networking.Destination, *routeError) {
	group, kind := gwapi.Deref(b.Group, ""), gwapi.Deref(b.Kind, "Service")
	ns := gwapi.Deref(b.Namespace, r.Namespace)
	if !mesh && ns != r.Namespace && !c.allowed(group, kind, b.Name, ns, r.GVK.Kind, r.Namespace) {
		return &networking.Destination{}, &routeError{reason: "RefNotPermitted", backend: true,
			message: fmt.Sprintf("backendRef %s/%s not accessible to a %s in namespace %q (missing a ReferenceGrant?)", b.Name, ns, r.GVK.Kind, r.Namespace)}
	}
	var host string
	switch {
	case group == "" && kind == "Service":
		if strings.Contains(b.Name, ".") {
			return nil, &routeError{reason: "UnsupportedValue", message: "service name invalid; the name of the Service must be used, not the hostname."}
		}
		host = b.Name + "." + ns + ".svc." + c.domain
	case group == config.NetworkingGroup && kind == "Hostname":
		if b.Namespace != nil {
			return nil, &routeError{reason: "UnsupportedValue", message: "namespace may not be set with Hostname type"}
		}
		host = b.Name
	default:
		return &networking.Destination{}, &routeError{reason: "InvalidKind", backend: true, message: fmt.Sprintf("referencing unsupported backendRef: group %q kind %q", group, kind)}
	}
	dst := &networking.Destination{Host: host}
	if b.Port != nil {
		dst.Port = &networking.PortSelector{Number: uint32(*b.Port)}
	}
	if c.in.HasService != nil && !c.in.HasService(host, ns) {
		return dst, &routeError{reason: "BackendNotFound", backend: true, message: fmt.Sprintf("backend(%s) not found", host)}
	}
	return dst, nil
}

// sortHTTPRoutes orders routes by the Gateway API's precedence (each
// has at most one match): exact over prefix over regex paths, longer
// paths, a method, more headers, more query parameters; unmatched last.
func sortHTTPRoutes(routes []*networking.HTTPRoute) {
	sort.SliceStable(routes, func(i, j int) bool {
		if len(routes[i].Match) == 0 {
			return false
		} else if len(routes[j].Match) == 0 {
			return true
		}
		m1, m2 := routes[i].Match[0], routes[j].Match[0]
		r1, r2 := uriRank(m1), uriRank(m2)
		l1, l2 := uriLen(m1), uriLen(m2)
		switch {
		case r1 != r2:
			return r1 > r2
		case l1 != l2:
			return l1 > l2
		case (m1.Method == nil) != (m2.Method == nil):
			return m1.Method != nil
		case len(m1.Headers) != len(m2.Headers):
			return len(m1.Headers) > len(m2.Headers)
		}
		return len(m1.QueryParams) > len(m2.QueryParams)
	})
}

func uriRank(m *networking.HTTPMatchRequest) int {
	switch m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return 3
	case *networking.StringMatch_Prefix:
		return 2
	case *networking.StringMatch_Regex:
		return 1
	}
	return -1
}

func uriLen(m *networking.HTTPMatchRequest) int {
	u := m.GetUri()
	return len(u.GetExact()) + len(u.GetPrefix()) + len(u.GetRegex())
}
