package rds

import (
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// hostIndex finds the virtual host of a VirtualService host in one
// gateway route config and records the domains its virtual hosts vhs
// (the config's, passed to every method) claimed: Envoy rejects a
// domain used twice. Most configs have one server and a few hosts: those
// are scanned; past smallHosts a map takes over.
type hostIndex struct {
	hosts [smallHosts]string // of the first virtual hosts
	// byDomain: a domain claimed by the virtual host of the same host is
	// its index+1 in vhs; claimed by another, -1.
	byDomain map[string]int32
	hint     int // virtual hosts expected, to size byDomain
	// noAttempts: the proxy's proxyHeaders turn x-envoy-attempt-count off.
	noAttempts bool
}

const smallHosts = 8

// lookup returns the virtual host made for host, or nil.
func (ix *hostIndex) lookup(vhs []*routev3.VirtualHost, host string) *routev3.VirtualHost {
	if ix.byDomain != nil {
		if i := ix.byDomain[host]; i > 0 {
			return vhs[i-1]
		}
		return nil
	}
	for i, vh := range vhs {
		if ix.hosts[i] == host {
			return vh
		}
	}
	return nil
}

// claimed reports whether a virtual host took domain d.
func (ix *hostIndex) claimed(vhs []*routev3.VirtualHost, d string) bool {
	if ix.byDomain != nil {
		_, ok := ix.byDomain[d]
		return ok
	}
	for _, vh := range vhs {
		for _, vd := range vh.Domains {
			if vd == d {
				return true
			}
		}
	}
	return false
}

// gatewayHost is a gateway virtual host with room for its domains,
// allocated as one block.
type gatewayHost struct {
	vh      routev3.VirtualHost
	domains [1]string
}

// add makes the virtual host of host, named "host:port", with the
// domain host if it is still free, for the caller to append to vhs; nil
// if it is not. One domain, as istiod's: the gateway's route configs
// ignore the port in host matching.
func (ix *hostIndex) add(vhs []*routev3.VirtualHost, host string, port uint32) *routev3.VirtualHost {
	if ix.claimed(vhs, host) {
		return nil
	}
	// The name "host:port", as gen.HostPort.
	var buf [128]byte
	b := buf[:0]
	if strings.IndexByte(host, ':') >= 0 {
		b = append(append(append(b, '['), host...), ']')
	} else {
		b = append(b, host...)
	}
	name := string(strconv.AppendUint(append(b, ':'), uint64(port), 10))
	gh := &gatewayHost{}
	domains := append(gh.domains[:0], host)
	gh.vh.IncludeRequestAttemptCount = !ix.noAttempts
	gh.vh.Name, gh.vh.Domains = name, domains
	i := len(vhs)
	switch {
	case ix.byDomain != nil:
		// host is claimed now, by this virtual host.
		ix.byDomain[host] = int32(i + 1)
	case i < smallHosts:
		ix.hosts[i] = host
	default:
		ix.byDomain = make(map[string]int32, 2*max(ix.hint, 2*smallHosts))
		for j, vh := range vhs {
			for _, d := range vh.Domains {
				ix.byDomain[d] = -1
			}
			ix.byDomain[ix.hosts[j]] = int32(j + 1)
		}
		for _, d := range domains {
			ix.byDomain[d] = -1
		}
		ix.byDomain[host] = int32(i + 1)
	}
	return &gh.vh
}

// extension appends one VirtualService's routes to the route lists of
// its virtual hosts. Virtual hosts that held the same list before get
// the same list after: the VirtualServices of one gateway often name the
// same hosts (Knative's four per service, a shared gateway's host set),
// and their lists would otherwise be copies. A list is extended in place
// only by the virtual host that made it; the others hold it clipped to
// its length, so their appends copy.
type extension struct {
	before, after []*routev3.Route
	done          bool
}

// extend returns list with routes appended.
func (e *extension) extend(list, routes []*routev3.Route) []*routev3.Route {
	if e.done && sameList(list, e.before) {
		return e.after[:len(e.after):len(e.after)]
	}
	out := routes // clipped (routesFor): an append copies
	if list != nil {
		out = append(list, routes...)
	}
	e.before, e.after, e.done = list, out, true
	return out
}

// sameList reports whether a and b are the same list: same array, same
// length (a list's elements are never altered once written).
func sameList(a, b []*routev3.Route) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// collapse merges the virtual hosts of a gateway route config whose
// routes are the same (the same built routes, in the same order) into
// one, as istiod's collapseDuplicateRoutes: taken most specific host
// first (longest first, alphabetically, wildcards last), the first of a
// set keeps its name and gets the others' domains. Hosts keep their
// order otherwise. Each virtual host's first domain is its host.
func collapse(vhs []*routev3.VirtualHost) []*routev3.VirtualHost {
	if len(vhs) < 2 {
		return vhs
	}
	order := make([]int, len(vhs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return moreSpecific(vhs[a].GetDomains()[0], vhs[b].GetDomains()[0]) })
	type routesKey struct {
		first *routev3.Route
		n     int
	}
	primaries := make(map[routesKey][]int, len(vhs))
	merged := make([]bool, len(vhs))
	for _, i := range order {
		vh := vhs[i]
		k := routesKey{n: len(vh.Routes)}
		if k.n > 0 {
			k.first = vh.Routes[0]
		}
		into := -1
		for _, p := range primaries[k] {
			if mergeable(vhs[p], vh) {
				into = p
				break
			}
		}
		if into < 0 {
			primaries[k] = append(primaries[k], i)
			continue
		}
		vhs[into].Domains = append(slices.Clip(vhs[into].Domains), vh.Domains...)
		merged[i] = true
	}
	out := vhs[:0]
	for i, vh := range vhs {
		if !merged[i] {
			out = append(out, vh)
		}
	}
	return out
}

// mergeable: istiod's vhostMergeable (the same route objects, attempt
// count and TLS requirement).
func mergeable(a, b *routev3.VirtualHost) bool {
	return a.IncludeRequestAttemptCount == b.IncludeRequestAttemptCount && a.RequireTls == b.RequireTls &&
		slices.Equal(a.Routes, b.Routes)
}

// moreSpecific orders hosts as istiod's host.MoreSpecific: wildcards
// last, longer first, then alphabetically.
func moreSpecific(a, b string) int {
	aw, bw := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	switch {
	case aw != bw:
		if aw {
			return 1
		}
		return -1
	case len(a) != len(b):
		return len(b) - len(a)
	}
	return strings.Compare(a, b)
}
