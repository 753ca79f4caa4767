package gatewayapi

import (
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
)

// parent is one resolved parentRef of a route: a gateway listener, or
// the mesh (GAMMA: a Service or ServiceEntry).
type parent struct {
	ref ParentRef
	// listeners the route attaches to (gateway parents).
	listeners []*listener
	// mesh parents: the hosts routed and the port (0: all).
	mesh  bool
	hosts []string
	port  int32
	// why the parent is not attached ("" when it is).
	reason, message string
}

func normalizeRef(p gwapi.ParentReference, routeNS string) ParentRef {
	return ParentRef{Group: gwapi.Deref(p.Group, gwapi.Group), Kind: gwapi.Deref(p.Kind, "Gateway"),
		Namespace: gwapi.Deref(p.Namespace, routeNS), Name: p.Name, SectionName: gwapi.Deref(p.SectionName, ""), Port: gwapi.Deref(p.Port, 0)}
}

// resolveParents resolves a route's parentRefs. hostnames are the route's
// (HTTP, gRPC and TLS routes), kind its kind.
func (c *converter) resolveParents(route *config.Config, refs []gwapi.ParentReference, hostnames []string) []parent {
	kind := string(route.Key().Kind)
	var out []parent
	for _, r := range refs {
		p := parent{ref: normalizeRef(r, route.Namespace)}
		switch {
		case p.ref.Group == gwapi.Group && p.ref.Kind == "Gateway":
			c.attachGateway(&p, route, kind, hostnames, p.ref.Namespace+"/"+p.ref.Name)
		case p.ref.Group == gwapi.Group && p.ref.Kind == "ListenerSet":
			c.attachGateway(&p, route, kind, hostnames, "ListenerSet/"+p.ref.Namespace+"/"+p.ref.Name)
		case p.ref.Group == "" && p.ref.Kind == "Service":
			p.mesh, p.port = true, p.ref.Port
			p.hosts = []string{p.ref.Name + "." + p.ref.Namespace + ".svc." + c.domain}
			if c.in.HasService != nil && !c.in.HasService(p.hosts[0], p.ref.Namespace) {
				p.reason, p.message = "BackendNotFound", "parent service "+p.hosts[0]+" not found"
			}
		case p.ref.Group == config.NetworkingGroup && p.ref.Kind == "ServiceEntry":
			p.mesh, p.port = true, p.ref.Port
			for _, se := range c.in.ServiceEntries {
				if se.Namespace == p.ref.Namespace && se.Name == p.ref.Name {
					p.hosts = se.Spec.(*networking.ServiceEntry).GetHosts()
				}
			}
			if len(p.hosts) == 0 {
				p.reason, p.message = "BackendNotFound", "parent ServiceEntry "+p.ref.Namespace+"/"+p.ref.Name+" not found"
			}
		default:
			p.reason, p.message = "InvalidKind", "parentRef kind "+p.ref.Group+"/"+p.ref.Kind+" is not supported"
		}
		out = append(out, p)
	}
	return out
}

func (c *converter) attachGateway(p *parent, route *config.Config, kind string, hostnames []string, key string) {
	ls, ok := c.listeners[key]
	if !ok {
		p.reason, p.message = "NoMatchingParent", strings.ToLower(p.ref.Kind)+" "+p.ref.Namespace+"/"+p.ref.Name+" not found or not of an istio class"
		return
	}
	reason := "NoMatchingParent"
	for _, l := range ls {
		if p.ref.SectionName != "" && l.spec.Name != p.ref.SectionName {
			continue
		}
		if p.ref.Port != 0 && l.spec.Port != p.ref.Port {
			continue
		}
		if !contains(l.kinds, kind) {
			reason = "NotAllowedByListeners"
			continue
		}
		if !namespaceAllowed(l, route.Namespace) {
			reason = "NotAllowedByListeners"
			continue
		}
		if kind != "TCPRoute" && !hostnamesIntersect(gwapi.Deref(l.spec.Hostname, ""), hostnames) {
			reason = "NoMatchingListenerHostname"
			continue
		}
		p.listeners = append(p.listeners, l)
		l.attached++
	}
	if len(p.listeners) == 0 {
		p.reason = reason
		p.message = "no listener of gateway " + p.ref.Namespace + "/" + p.ref.Name + " accepts this route (" + reason + ")"
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func namespaceAllowed(l *listener, ns string) bool {
	from := "Same"
	var sel *gwapi.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		from = gwapi.Deref(ar.Namespaces.From, "Same")
		sel = ar.Namespaces.Selector
	}
	switch from {
	case "All":
		return true
	case "Same":
		return ns == l.gw.Namespace
	case "Selector":
		// Only the name label is known for a namespace here.
		if sel == nil {
			return false
		}
		labels := map[string]string{"kubernetes.io/metadata.name": ns}
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				return false
			}
		}
		for _, e := range sel.MatchExpressions {
			v, has := labels[e.Key]
			switch e.Operator {
			case "In":
				if !has || !contains(e.Values, v) {
					return false
				}
			case "NotIn":
				if has && contains(e.Values, v) {
					return false
				}
			case "Exists":
				if !has {
					return false
				}
			case "DoesNotExist":
				if has {
					return false
				}
			}
		}
		return true
	}
	return false
}

// hostnamesIntersect reports whether a route's hostnames can match a
// listener's hostname (either empty: any).
func hostnamesIntersect(listener string, route []string) bool {
	if listener == "" || len(route) == 0 {
		return true
	}
	for _, h := range route {
		if hostMatches(listener, h) || hostMatches(h, listener) {
			return true
		}
	}
	return false
}

// hostMatches reports whether pattern ("*.example.com" or exact) covers h.
func hostMatches(pattern, h string) bool {
	if pattern == h {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(h, suffix) && len(h) > len(suffix)
	}
	return false
}

// routeKeyHosts returns, for an attached parent, the keys ("parent/host")
// of the VirtualServices its routes merge into, with their gateway and
// namespace.
type vsTarget struct {
	key, gateway, host string
	port               int32
	// consumer: a mesh route in another namespace than its parent
	// service's (GAMMA's consumer route): it routes the route's
	// namespace's proxies only, as istiod.
	consumer bool
}

func (c *converter) targets(route *config.Config, p parent, hostnames []string) []vsTarget {
	var out []vsTarget
	if p.mesh {
		key := route.Namespace
		if p.port != 0 {
			key += "/" + strconv.Itoa(int(p.port))
		}
		for _, h := range p.hosts {
			out = append(out, vsTarget{key: key + "/" + h, gateway: "mesh", host: h, port: p.port, consumer: p.ref.Namespace != route.Namespace})
		}
		return out
	}
	hosts := hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, l := range p.listeners {
		for _, h := range hosts {
			if !c.allowedByIsolation(l, h) {
				continue
			}
			out = append(out, vsTarget{key: l.internal + "/" + h, gateway: l.internal, host: h})
		}
	}
	return out
}

// allowedByIsolation reports whether a route hostname bound to a
// wildcard listener is left to it: a hostname a more specific listener
// of the same gateway, port and protocol covers belongs to that one
// (the API's listener isolation, as istiod).
func (c *converter) allowedByIsolation(l *listener, routeHost string) bool {
	ours := gwapi.Deref(l.spec.Hostname, "")
	if ours != "" && !strings.HasPrefix(ours, "*") {
		return true
	}
	if ours != "" && !hostMatches(ours, routeHost) && !hostMatches(routeHost, ours) && routeHost != "*" {
		return false
	}
	for _, other := range c.listeners[l.key] {
		theirs := gwapi.Deref(other.spec.Hostname, "")
		if other == l || other.spec.Port != l.spec.Port || other.spec.Protocol != l.spec.Protocol || theirs == ours {
			continue
		}
		if len(ours) > len(theirs) {
			continue
		}
		if subsetOf(routeHost, theirs) {
			return false
		}
	}
	return true
}

// subsetOf reports whether every name a matches, b matches ("" and "*"
// match everything).
func subsetOf(a, b string) bool {
	if b == "" || b == "*" || a == b {
		return true
	}
	if suffix, ok := strings.CutPrefix(b, "*"); ok {
		return strings.HasSuffix(a, suffix) && len(a) > len(suffix)
	}
	return false
}

func (c *converter) add(t vsTarget, ns string, part vsPart) {
	if c.vs == nil {
		c.vs = map[string]*mergedVS{}
	}
	m := c.vs[t.key]
	if m == nil {
		m = &mergedVS{key: t.key, ns: ns, gateway: t.gateway, host: t.host, consumer: t.consumer}
		c.vs[t.key] = m
	}
	m.parts = append(m.parts, part)
}
