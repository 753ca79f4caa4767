package scope

import (
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// VirtualService delegation, as istiod's mergeVirtualServices: an HTTP
// route of a VirtualService with hosts (the root) that names a delegate
// (a VirtualService without hosts) is replaced by the delegate's routes,
// each merged with it: the matches combined (a delegate's match must
// narrow one of the root route's, else that delegate route is dropped),
// and what the delegate route leaves unset (timeout, retries, rewrite,
// headers, fault, mirror, CORS, direct response) taken from the root
// route. A delegate that does not exist, has hosts or is not exported to
// the root's namespace drops the route.

// VirtualServicesByAge returns the VirtualServices oldest first
// (push.ConfigsByAge), delegation resolved. Without delegating routes in
// the snapshot (most meshes) it is ConfigsByAge itself.
func (v *View) VirtualServicesByAge() []*config.Config {
	all := v.Push.ConfigsByAge(config.VirtualService)
	roots := v.Push.DelegatingVirtualServices()
	if len(roots) == 0 {
		return all
	}
	if v.vsMerged != nil {
		return v.vsMerged
	}
	isRoot := make(map[*config.Config]bool, len(roots))
	for _, c := range roots {
		isRoot[c] = true
	}
	out := make([]*config.Config, len(all))
	for i, c := range all {
		out[i] = c
		if isRoot[c] {
			m := *c
			m.Spec = v.mergeDelegates(c)
			out[i] = &m
		}
	}
	v.vsMerged = out
	return out
}

// mergeDelegates is the root VirtualService c with its delegating routes
// replaced (a new message; c is not altered).
func (v *View) mergeDelegates(c *config.Config) *networking.VirtualService {
	root := proto.Clone(c.Spec.(*networking.VirtualService)).(*networking.VirtualService)
	var routes []*networking.HTTPRoute
	for _, r := range root.GetHttp() {
		d := r.GetDelegate()
		if d == nil {
			routes = append(routes, r)
			continue
		}
		ns := d.GetNamespace()
		if ns == "" {
			ns = c.Namespace
		}
		dc := v.Push.VirtualService(ns, d.GetName())
		if dc == nil {
			continue
		}
		dvs := dc.Spec.(*networking.VirtualService)
		if len(dvs.GetHosts()) > 0 || !Exported(OrDefault(dvs.GetExportTo(), v.Push.Mesh.GetDefaultVirtualServiceExportTo()), ns, c.Namespace) {
			continue
		}
		sub := proto.Clone(dvs).(*networking.VirtualService)
		v.resolveDestinations(sub, ns)
		r.Delegate = nil
		for _, dr := range sub.GetHttp() {
			if m := mergeRoute(r, dr); m != nil {
				routes = append(routes, m)
			}
		}
	}
	root.Http = routes
	return root
}

// resolveDestinations makes the short hosts of a delegate's destinations
// and mirrors full names in the delegate's namespace ns (istiod resolves
// a delegate by its own namespace, not the root's).
func (v *View) resolveDestinations(vs *networking.VirtualService, ns string) {
	for _, r := range vs.GetHttp() {
		for _, w := range r.GetRoute() {
			if w.GetDestination() != nil {
				w.Destination.Host = v.FQDN(w.GetDestination().GetHost(), ns)
			}
		}
		if r.GetMirror() != nil {
			r.Mirror.Host = v.FQDN(r.GetMirror().GetHost(), ns)
		}
		for _, m := range r.GetMirrors() {
			if m.GetDestination() != nil {
				m.Destination.Host = v.FQDN(m.GetDestination().GetHost(), ns)
			}
		}
	}
}

// mergeRoute merges a delegate route d (altered and returned) under the
// root route r; nil when d's matches conflict with r's.
func mergeRoute(r, d *networking.HTTPRoute) *networking.HTTPRoute {
	match, ok := mergeMatches(r.GetMatch(), d.GetMatch())
	if !ok {
		return nil
	}
	d.Match = match
	switch {
	case d.GetName() == "":
		d.Name = r.GetName()
	case r.GetName() != "":
		d.Name = r.GetName() + "-" + d.GetName()
	}
	if d.Rewrite == nil {
		d.Rewrite = r.Rewrite
	}
	if d.DirectResponse == nil {
		d.DirectResponse = r.DirectResponse
	}
	if d.Timeout == nil {
		d.Timeout = r.Timeout
	}
	if d.Retries == nil {
		d.Retries = r.Retries
	}
	if d.Fault == nil {
		d.Fault = r.Fault
	}
	if d.Mirror == nil {
		d.Mirror = r.Mirror
	}
	if d.MirrorPercentage == nil {
		d.MirrorPercentage = r.MirrorPercentage
	}
	if d.CorsPolicy == nil {
		d.CorsPolicy = r.CorsPolicy
	}
	if d.Mirrors == nil {
		d.Mirrors = r.Mirrors
	}
	if d.Headers == nil {
		d.Headers = r.Headers
	}
	return d
}

// mergeMatches combines the root route's matches with a delegate
// route's: each delegate match joins every root match it does not
// conflict with; a delegate match that joins none (or no result at all)
// is a conflict (ok false).
func mergeMatches(root, sub []*networking.HTTPMatchRequest) (out []*networking.HTTPMatchRequest, ok bool) {
	if len(root) == 0 {
		return sub, true
	}
	if len(sub) == 0 {
		return root, true
	}
	for _, s := range sub {
		joined := false
		for _, r := range root {
			if matchConflict(r, s) {
				continue
			}
			out = append(out, mergeMatch(r, s))
			joined = true
		}
		if !joined {
			return nil, false
		}
	}
	return out, len(out) > 0
}

// mergeMatch is the delegate match s with what it leaves unset taken
// from the root match r; maps (headers, query parameters, source labels)
// are the union, s's value winning.
func mergeMatch(r, s *networking.HTTPMatchRequest) *networking.HTTPMatchRequest {
	out := proto.Clone(s).(*networking.HTTPMatchRequest)
	switch {
	case out.Name == "":
		out.Name = r.GetName()
	case r.GetName() != "":
		out.Name = r.GetName() + "-" + out.Name
	}
	if out.Uri == nil {
		out.Uri = r.Uri
	}
	if out.Scheme == nil {
		out.Scheme = r.Scheme
	}
	if out.Method == nil {
		out.Method = r.Method
	}
	if out.Authority == nil {
		out.Authority = r.Authority
	}
	out.Headers = union(r.GetHeaders(), s.GetHeaders())
	out.WithoutHeaders = union(r.GetWithoutHeaders(), s.GetWithoutHeaders())
	out.QueryParams = union(r.GetQueryParams(), s.GetQueryParams())
	out.SourceLabels = union(r.GetSourceLabels(), s.GetSourceLabels())
	if out.Port == 0 {
		out.Port = r.GetPort()
	}
	if out.SourceNamespace == "" {
		out.SourceNamespace = r.GetSourceNamespace()
	}
	if len(out.Gateways) == 0 {
		out.Gateways = r.GetGateways()
	}
	if out.StatPrefix == "" {
		out.StatPrefix = r.GetStatPrefix()
	}
	return out
}

// union is a and b in one new map (nil when both are empty), b winning.
func union[V any](a, b map[string]V) map[string]V {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]V, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// matchConflict reports whether the delegate match s cannot narrow the
// root match r (istiod's hasConflict).
func matchConflict(r, s *networking.HTTPMatchRequest) bool {
	for _, p := range [][2]*networking.StringMatch{{r.Uri, s.Uri}, {r.Scheme, s.Scheme}, {r.Method, s.Method}, {r.Authority, s.Authority}} {
		if stringConflict(p[0], p[1]) {
			return true
		}
	}
	for k, sv := range s.GetHeaders() {
		if stringConflict(r.GetHeaders()[k], sv) {
			return true
		}
	}
	for k, sv := range s.GetWithoutHeaders() {
		if stringConflict(r.GetWithoutHeaders()[k], sv) {
			return true
		}
	}
	for k, sv := range s.GetQueryParams() {
		if stringConflict(r.GetQueryParams()[k], sv) {
			return true
		}
	}
	if r.GetIgnoreUriCase() != s.GetIgnoreUriCase() {
		return true
	}
	if r.GetPort() > 0 && s.GetPort() > 0 && r.GetPort() != s.GetPort() {
		return true
	}
	if r.GetSourceNamespace() != "" && s.GetSourceNamespace() != r.GetSourceNamespace() {
		return true
	}
	for k, sv := range s.GetSourceLabels() {
		if rv, ok := r.GetSourceLabels()[k]; ok && rv != sv {
			return true
		}
	}
	if len(r.GetGateways()) > 0 && len(s.GetGateways()) > 0 {
		for _, g := range s.GetGateways() {
			if !slices.Contains(r.GetGateways(), g) {
				return true
			}
		}
	}
	return false
}

// stringConflict reports whether the delegate's string match s cannot
// narrow the root's r: none set is no conflict; a regex goes with no
// other kind; an exact root takes only the same exact; a prefix root
// takes a prefix or exact value under it.
func stringConflict(r, s *networking.StringMatch) bool {
	if r == nil || s == nil {
		return false
	}
	if r.GetRegex() != "" && (s.GetRegex() != "" || s.GetPrefix() != "" || s.GetExact() != "") {
		return true
	}
	if s.GetRegex() != "" && (r.GetRegex() != "" || r.GetPrefix() != "" || r.GetExact() != "") {
		return true
	}
	if e := r.GetExact(); e != "" {
		return s.GetPrefix() != "" || s.GetExact() != e
	}
	if p := r.GetPrefix(); p != "" {
		if s.GetPrefix() != "" {
			return !strings.HasPrefix(s.GetPrefix(), p)
		}
		if s.GetExact() != "" {
			return !strings.HasPrefix(s.GetExact(), p)
		}
	}
	return true
}
