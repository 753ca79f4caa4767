package envoyfilter

import (
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// patchRouteConfig applies ROUTE_CONFIGURATION, VIRTUAL_HOST and
// HTTP_ROUTE patches to rc. A route configuration is never removed.
func patchRouteConfig(r *run, rc *routev3.RouteConfiguration) bool {
	for _, p := range r.patches(networking.EnvoyFilter_ROUTE_CONFIGURATION) {
		if !isMerge(p.op) || !routeConfigMatch(r.ctx, rc, p) {
			continue
		}
		r.mark(p)
		if err := p.merge(rc); err != nil {
			r.fail(p, err)
		}
	}
	removed := false
	for i := range rc.VirtualHosts {
		if patchVirtualHost(r, rc, i) {
			rc.VirtualHosts[i] = nil
			removed = true
		}
	}
	for _, p := range r.patches(networking.EnvoyFilter_VIRTUAL_HOST) {
		if p.op == networking.EnvoyFilter_Patch_ADD && routeConfigMatch(r.ctx, rc, p) {
			r.mark(p)
			rc.VirtualHosts = append(rc.VirtualHosts, clone(p.value.(*routev3.VirtualHost)))
		}
	}
	if removed {
		rc.VirtualHosts = slices.DeleteFunc(rc.VirtualHosts, func(vh *routev3.VirtualHost) bool { return vh == nil })
	}
	return true
}

// patchVirtualHost patches rc's i-th virtual host; true when removed.
func patchVirtualHost(r *run, rc *routev3.RouteConfiguration, i int) bool {
	for _, p := range r.patches(networking.EnvoyFilter_VIRTUAL_HOST) {
		if !routeConfigMatch(r.ctx, rc, p) || !vhostMatch(rc.VirtualHosts[i], p) {
			continue
		}
		switch {
		case p.op == networking.EnvoyFilter_Patch_REMOVE:
			r.mark(p)
			return true
		case isMerge(p.op):
			r.mark(p)
			if err := p.merge(rc.VirtualHosts[i]); err != nil {
				r.fail(p, err)
			}
		case p.op == networking.EnvoyFilter_Patch_REPLACE:
			r.mark(p)
			rc.VirtualHosts[i] = clone(p.value.(*routev3.VirtualHost))
		}
	}
	patchRoutes(r, rc, rc.VirtualHosts[i])
	return false
}

func patchRoutes(r *run, rc *routev3.RouteConfiguration, vh *routev3.VirtualHost) {
	ps := r.patches(networking.EnvoyFilter_HTTP_ROUTE)
	if len(ps) == 0 {
		return
	}
	removed := false
	for i := range vh.Routes {
		for _, p := range ps {
			if vh.Routes[i] == nil || !routeConfigMatch(r.ctx, rc, p) || !vhostMatch(vh, p) || !routeMatch(vh.Routes[i], p) {
				continue
			}
			switch {
			case p.op == networking.EnvoyFilter_Patch_REMOVE:
				r.mark(p)
				vh.Routes[i] = nil
				removed = true
			case isMerge(p.op):
				r.mark(p)
				if err := p.merge(vh.Routes[i]); err != nil {
					r.fail(p, err)
				}
			}
		}
	}
	for _, p := range ps {
		if !routeConfigMatch(r.ctx, rc, p) || !vhostMatch(vh, p) {
			continue
		}
		named := p.match.GetRouteConfiguration().GetVhost().GetRoute() != nil
		matches := func(rt *routev3.Route) bool { return rt != nil && routeMatch(rt, p) }
		val := func() *routev3.Route { return clone(p.value.(*routev3.Route)) }
		switch p.op {
		case networking.EnvoyFilter_Patch_ADD, networking.EnvoyFilter_Patch_INSERT_AFTER, networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if rs, ok := listOp(p.op, named, vh.Routes, matches, val); ok {
				vh.Routes = rs
				r.mark(p)
			}
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			// istiod: first, if some route matches (or none is named).
			if !named || indexOf(vh.Routes, matches) >= 0 {
				vh.Routes = insertAt(vh.Routes, 0, val())
				r.mark(p)
			}
		}
	}
	if removed {
		vh.Routes = slices.DeleteFunc(vh.Routes, func(rt *routev3.Route) bool { return rt == nil })
	}
}

// routeConfigMatch is istiod's: name and port (of the name: "8080",
// "inbound|8080||", or a gateway's "https.443.server.gw.ns"), and for
// gateways the port name and gateway of the name.
func routeConfigMatch(ctx networking.EnvoyFilter_PatchContext, rc *routev3.RouteConfiguration, p *patch) bool {
	m := p.match.GetRouteConfiguration()
	if m == nil {
		return true
	}
	if m.GetName() != "" && m.GetName() != rc.GetName() {
		return false
	}
	if ctx != networking.EnvoyFilter_GATEWAY {
		return m.GetPortNumber() == 0 || int(m.GetPortNumber()) == routePort(rc.GetName())
	}
	port, portName, gateway := gatewayRouteName(rc.GetName())
	if m.GetPortName() != "" && m.GetPortName() != portName {
		return false
	}
	if m.GetGateway() != "" && m.GetGateway() != gateway {
		return false
	}
	// istiod also matches a Gateway server's service port through the
	// gateway's port map; ours names the server port only.
	return m.GetPortNumber() == 0 || int(m.GetPortNumber()) == port
}

// routePort is the port in a sidecar's route name.
func routePort(name string) int {
	if strings.HasPrefix(name, "inbound|") {
		parts := strings.Split(name, "|")
		if len(parts) > 1 {
			n, _ := strconv.Atoi(parts[1])
			return n
		}
		return 0
	}
	n, _ := strconv.Atoi(name)
	return n
}

// gatewayRouteName reads istiod's gateway route names: "http.80" (plain
// HTTP servers merged by port) and "https.443.portName.gateway.namespace".
func gatewayRouteName(name string) (port int, portName, gateway string) {
	if rest, ok := strings.CutPrefix(name, "http."); ok {
		port, _ = strconv.Atoi(rest)
		return port, "", ""
	}
	if rest, ok := strings.CutPrefix(name, "https."); ok && strings.Count(name, ".") == 4 {
		parts := strings.Split(rest, ".")
		port, _ = strconv.Atoi(parts[0])
		return port, parts[1], parts[3] + "/" + parts[2]
	}
	return 0, "", ""
}

func vhostMatch(vh *routev3.VirtualHost, p *patch) bool {
	m := p.match.GetRouteConfiguration().GetVhost()
	if m == nil {
		return true
	}
	return (m.GetName() == "" || m.GetName() == vh.GetName()) && (m.GetDomainName() == "" || slices.Contains(vh.GetDomains(), m.GetDomainName()))
}

func routeMatch(rt *routev3.Route, p *patch) bool {
	m := p.match.GetRouteConfiguration().GetVhost().GetRoute()
	if m == nil {
		return true
	}
	if m.GetName() != "" && m.GetName() != rt.GetName() {
		return false
	}
	switch m.GetAction() {
	case networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ANY:
		return true
	case networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ROUTE:
		return rt.GetRoute() != nil
	case networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_REDIRECT:
		return rt.GetRedirect() != nil
	case networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_DIRECT_RESPONSE:
		return rt.GetDirectResponse() != nil
	}
	return false // an action this API version does not know matches nothing
}
