package rds

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// applyHeaders sets the route's request and response header operations:
// those of h, the HTTP route's, then those of d, its destination's when
// it routes to one cluster (either may be nil), as Istio appends them.
// A request :authority or host becomes the action's host rewrite
// instead (hostRewrite).
func applyHeaders(r *routev3.Route, h, d *networking.Headers) {
	if h == nil && d == nil {
		return
	}
	r.RequestHeadersToAdd = concat(headerOps(h.GetRequest()), headerOps(d.GetRequest()))
	r.RequestHeadersToRemove = concat(dropInternal(h.GetRequest().GetRemove()), dropInternal(d.GetRequest().GetRemove()))
	r.ResponseHeadersToAdd = concat(headerOps(h.GetResponse()), headerOps(d.GetResponse()))
	r.ResponseHeadersToRemove = concat(dropInternal(h.GetResponse().GetRemove()), dropInternal(d.GetResponse().GetRemove()))
}

// clusterHeaders sets the header operations of one of weighted clusters,
// those of its destination, and its host rewrite if they set the
// authority (Istio's processWeightedDestination).
func clusterHeaders(cw *routev3.WeightedCluster_ClusterWeight, h *networking.Headers) {
	if h == nil {
		return
	}
	cw.RequestHeadersToAdd = headerOps(h.GetRequest())
	cw.RequestHeadersToRemove = dropInternal(h.GetRequest().GetRemove())
	cw.ResponseHeadersToAdd = headerOps(h.GetResponse())
	cw.ResponseHeadersToRemove = dropInternal(h.GetResponse().GetRemove())
	if a := authority(h.GetRequest()); a != "" {
		cw.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: a}
	}
}

// hostRewrite is the host a forwarding HTTP route's header operations
// rewrite requests to ("" if none), as Istio derives it when the route
// has no rewrite authority: the route's own request :authority or
// host, else that of its destination when it routes to one cluster
// (one, nil if it splits traffic). Weighted clusters carry theirs
// (clusterHeaders).
func hostRewrite(hr *networking.HTTPRoute, one *networking.HTTPRouteDestination) string {
	if a := authority(hr.GetHeaders().GetRequest()); a != "" {
		return a
	}
	return authority(one.GetHeaders().GetRequest())
}

// authority is the value request header operations set, else add, for
// :authority or host ("" if none), which Envoy takes as a host rewrite
// (Istio's TranslateHeadersOperations). Of several such keys, which
// validation rejects, the last in key order wins, so the output does
// not depend on map order.
func authority(ops *networking.Headers_HeaderOperations) string {
	if a := authorityIn(ops.GetSet()); a != "" {
		return a
	}
	return authorityIn(ops.GetAdd())
}

func authorityIn(m map[string]string) string {
	var key, val string
	for k, v := range m {
		if isAuthority(k) && k >= key {
			key, val = k, v
		}
	}
	return val
}

// isInternal reports whether a header is one Envoy must not be told to
// set, add or remove: a pseudo header or host (Istio's
// isInternalHeader).
func isInternal(k string) bool {
	return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host")
}

// isAuthority reports whether a header names the request's authority.
func isAuthority(k string) bool {
	return strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host")
}

// dropInternal is keys without the internal headers: keys itself when
// it has none (it may belong to the config and is not altered).
func dropInternal(keys []string) []string {
	i := slices.IndexFunc(keys, isInternal)
	if i < 0 {
		return keys
	}
	out := slices.Clone(keys[:i])
	for _, k := range keys[i+1:] {
		if !isInternal(k) {
			out = append(out, k)
		}
	}
	return out
}

// concat is a followed by b: a or b itself when the other is empty, else
// a new slice, so neither is altered (b may belong to the config).
func concat[T any](a, b []T) []T {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	return slices.Concat(a, b)
}

// headerOps translates header operations: set, then add, each sorted by
// name, without internal headers. The options and their headers are
// allocated as one array, and with the list when there is one (Knative
// sets one header per route).
func headerOps(ops *networking.Headers_HeaderOperations) []*corev3.HeaderValueOption {
	n := countExternal(ops.GetSet()) + countExternal(ops.GetAdd())
	var blocks []headerOption
	var out []*corev3.HeaderValueOption
	switch n {
	case 0:
		return nil
	case 1:
		one := &struct {
			b [1]headerOption
			p [1]*corev3.HeaderValueOption
		}{}
		blocks, out = one.b[:], one.p[:0]
	default:
		blocks, out = make([]headerOption, n), make([]*corev3.HeaderValueOption, 0, n)
	}
	add := func(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) {
		if isInternal(k) {
			return
		}
		b := &blocks[len(out)]
		b.h.Key, b.h.Value = k, v
		b.o.Header, b.o.AppendAction = &b.h, a
		out = append(out, &b.o)
	}
	for k, v := range sorted(ops.GetSet()) {
		add(k, v, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	}
	for k, v := range sorted(ops.GetAdd()) {
		add(k, v, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	}
	return out
}

// countExternal counts the headers of m that are not internal.
func countExternal(m map[string]string) int {
	n := 0
	for k := range m {
		if !isInternal(k) {
			n++
		}
	}
	return n
}

// headerOption is a header operation with its header.
type headerOption struct {
	o corev3.HeaderValueOption
	h corev3.HeaderValue
}
