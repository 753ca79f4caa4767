package gatewayapi

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
)

// l4Routes converts TCPRoutes and TLSRoutes: TCP and TLS (SNI) routes of
// the VirtualServices of their parents.
func (c *converter) l4Routes(kind config.Kind, routes []config.Config) {
	for i := range routes {
		r := &routes[i]
		var common gwapi.CommonRouteSpec
		var hostnames []string
		var rules []gwapi.L4Rule
		if kind == config.TCPRoute {
			s, err := decode[gwapi.TCPRouteSpec](c, r)
			if err != nil {
				continue
			}
			common, rules = s.CommonRouteSpec, s.Rules
		} else {
			s, err := decode[gwapi.TLSRouteSpec](c, r)
			if err != nil {
				continue
			}
			common, rules, hostnames = s.CommonRouteSpec, s.Rules, s.Hostnames
		}
		ps := c.resolveParents(r, common.ParentRefs, hostnames)
		st := c.status(r)
		for _, p := range ps {
			var dests [][]*networking.RouteDestination
			var rerr *routeError
			if p.reason == "" {
				for _, rule := range rules {
					d, err := c.l4Destinations(rule.BackendRefs, r, p.mesh)
					if err != nil {
						rerr = err
					}
					dests = append(dests, d)
				}
			}
			st.Parents = append(st.Parents, parentStatus(p, rerr))
			if p.reason != "" || rerr != nil && !rerr.backend {
				continue
			}
			var ts []vsTarget
			if kind == config.TCPRoute && !p.mesh {
				for _, l := range p.listeners {
					ts = append(ts, vsTarget{key: l.internal + "/*", gateway: l.internal, host: "*"})
				}
			} else {
				ts = c.targets(r, p, hostnames)
			}
			for _, t := range ts {
				var part vsPart
				part.route = r
				for _, d := range dests {
					if kind == config.TCPRoute {
						tr := &networking.TCPRoute{Route: d}
						if t.port != 0 {
							tr.Match = []*networking.L4MatchAttributes{{Port: uint32(t.port)}}
						}
						part.tcp = append(part.tcp, tr)
					} else {
						tr := &networking.TLSRoute{Route: d, Match: []*networking.TLSMatchAttributes{{SniHosts: sniHosts(hostnames)}}}
						if t.port != 0 {
							tr.Match[0].Port = uint32(t.port)
						}
						part.tls = append(part.tls, tr)
					}
				}
				c.add(t, r.Namespace, part)
			}
		}
	}
}

func sniHosts(h []string) []string {
	if len(h) == 0 {
		return []string{"*"}
	}
	return h
}

func (c *converter) l4Destinations(refs []gwapi.BackendRef, r *config.Config, mesh bool) ([]*networking.RouteDestination, *routeError) {
	sum := 0
	for _, b := range refs {
		sum += int(gwapi.Deref(b.Weight, 1))
	}
	if sum == 0 {
		// No backend: traffic goes nowhere, as istiod's placeholder.
		return []*networking.RouteDestination{{Destination: &networking.Destination{Host: "internal.cluster.local", Subset: "zero-weight",
			Port: &networking.PortSelector{Number: 65535}}}}, nil
	}
	var kept []gwapi.BackendRef
	for _, b := range refs {
		if gwapi.Deref(b.Weight, 1) != 0 {
			kept = append(kept, b)
		}
	}
	var out []*networking.RouteDestination
	var backendErr *routeError
	for _, b := range kept {
		dst, err := c.destination(b, r, mesh)
		if err != nil {
			if !err.backend {
				return nil, err
			}
			backendErr = err
		}
		w := gwapi.Deref(b.Weight, 1)
		if len(kept) == 1 {
			w = 0
		}
		out = append(out, &networking.RouteDestination{Destination: dst, Weight: w})
	}
	return out, backendErr
}
