package envoyfilter

import (
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Applies reports whether typeURL is a type EnvoyFilters patch (LDS, RDS,
// CDS). ECDS (EXTENSION_CONFIG) is not served, and there is no bootstrap.
func Applies(typeURL string) bool {
	switch typeURL {
	case resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType:
		return true
	}
	return false
}

// Apply patches res, the generated resources of typeURL for proxy p, with
// ps (from Set.Select for p). res is not altered: a patched resource is a
// copy. A patched resource that fails validation is rebuilt patch by
// patch from the original, and each patch that breaks it is skipped and
// reported; an added resource that fails validation is left out and
// reported. Proxyless gRPC clients get no patches (as with istiod).
func Apply(typeURL string, res []gen.Resource, p *model.Proxy, ps *Patches) ([]gen.Resource, []Problem) {
	if ps == nil || p.Proxyless || !Applies(typeURL) {
		return res, nil
	}
	a := &applier{proxy: p, ps: ps}
	out := make([]gen.Resource, 0, len(res))
	for _, r := range res {
		ctx := a.context(r.Resource)
		m, keep := a.safeOne(ctx, r.Name, r.Resource)
		if keep {
			out = append(out, gen.Resource{Name: r.Name, Resource: m})
		}
	}
	for _, m := range a.added(typeURL) {
		out = append(out, gen.Resource{Name: resourceName(m), Resource: m})
	}
	return out, a.problems
}

// applier applies one proxy's patches to its resources.
type applier struct {
	proxy    *model.Proxy
	ps       *Patches
	problems []Problem
}

func (a *applier) problem(p *patch, resource string, err error) {
	a.problems = append(a.problems, Problem{Filter: p.f.key, Source: p.f.src, Patch: p.index, Resource: resource, Err: err.Error()})
}

// context is the patch context istiod builds m in.
func (a *applier) context(m proto.Message) networking.EnvoyFilter_PatchContext {
	if a.proxy.Type == model.Router {
		return networking.EnvoyFilter_GATEWAY
	}
	switch r := m.(type) {
	case *listenerv3.Listener:
		if r.GetTrafficDirection() == corev3.TrafficDirection_INBOUND || r.GetName() == gen.VirtualInboundListener {
			return networking.EnvoyFilter_SIDECAR_INBOUND
		}
	case *routev3.RouteConfiguration:
		if strings.HasPrefix(r.GetName(), "inbound|") {
			return networking.EnvoyFilter_SIDECAR_INBOUND
		}
	case *clusterv3.Cluster:
		if strings.HasPrefix(r.GetName(), "inbound|") || strings.HasPrefix(r.GetName(), "InboundPassthroughCluster") {
			return networking.EnvoyFilter_SIDECAR_INBOUND
		}
	}
	return networking.EnvoyFilter_SIDECAR_OUTBOUND
}

// run is one application of patches to one resource: the patches it may
// use (all of the proxy's, or one when rebuilding), those that changed
// something, and those that failed.
type run struct {
	ctx    networking.EnvoyFilter_PatchContext
	ps     *Patches
	only   *patch
	hit    []*patch
	failed map[*patch]error
}

// patches are the patches of applyTo t for r's context, in order.
func (r *run) patches(t networking.EnvoyFilter_ApplyTo) []*patch {
	all := r.ps.get(t)
	out := make([]*patch, 0, len(all))
	for _, p := range all {
		if (r.only == nil || p == r.only) && contextMatch(r.ctx, p) {
			out = append(out, p)
		}
	}
	return out
}

func contextMatch(ctx networking.EnvoyFilter_PatchContext, p *patch) bool {
	return p.match.GetContext() == ctx || p.match.GetContext() == networking.EnvoyFilter_ANY
}

func (r *run) mark(p *patch) {
	for _, h := range r.hit {
		if h == p {
			return
		}
	}
	r.hit = append(r.hit, p)
}

func (r *run) fail(p *patch, err error) {
	if r.failed == nil {
		r.failed = map[*patch]error{}
	}
	if _, ok := r.failed[p]; !ok {
		r.failed[p] = err
	}
	r.mark(p)
}

// patchFunc patches m (a copy) in place; false when m is removed.
type patchFunc func(r *run, m proto.Message) bool

func patcherFor(m proto.Message) patchFunc {
	switch m.(type) {
	case *listenerv3.Listener:
		return func(r *run, m proto.Message) bool { return patchListener(r, m.(*listenerv3.Listener)) }
	case *routev3.RouteConfiguration:
		return func(r *run, m proto.Message) bool { return patchRouteConfig(r, m.(*routev3.RouteConfiguration)) }
	case *clusterv3.Cluster:
		return func(r *run, m proto.Message) bool { return patchCluster(r, m.(*clusterv3.Cluster)) }
	}
	return nil
}

// safeOne is one, with a panic in patching (a bug, or input no check
// foresaw) turned into a problem and the generated resource sent
// unpatched, as istiod recovers from a patch that panics.
func (a *applier) safeOne(ctx networking.EnvoyFilter_PatchContext, name string, m proto.Message) (out proto.Message, keep bool) {
	defer func() {
		if r := recover(); r != nil {
			a.problems = append(a.problems, Problem{Resource: name, Err: fmt.Sprintf("patching panicked, the resource is sent unpatched: %v", r)})
			out, keep = m, true
		}
	}()
	return a.one(ctx, name, m)
}

// one patches resource m named name in context ctx: the patched copy (or
// m itself when nothing applied) and whether it stays.
func (a *applier) one(ctx networking.EnvoyFilter_PatchContext, name string, m proto.Message) (proto.Message, bool) {
	f := patcherFor(m)
	if f == nil {
		return m, true
	}
	r := &run{ctx: ctx, ps: a.ps}
	c := proto.Clone(m)
	keep := f(r, c)
	if len(r.hit) == 0 {
		return m, true
	}
	if len(r.failed) == 0 {
		if !keep {
			return nil, false
		}
		if check(c) == nil {
			return c, true
		}
	}
	// Something failed: rebuild from the original, one patch at a time,
	// keeping each that leaves a valid resource.
	cur := m
	for _, p := range r.hit {
		one := &run{ctx: ctx, ps: a.ps, only: p}
		c := proto.Clone(cur)
		keep := f(one, c)
		if err := one.failed[p]; err != nil {
			a.problem(p, name, err)
			continue
		}
		if !keep {
			return nil, false
		}
		if err := check(c); err != nil {
			a.problem(p, name, fmt.Errorf("the patched resource is invalid, patch skipped: %w", err))
			continue
		}
		cur = c
	}
	return cur, true
}

// added are the resources ADD patches of typeURL's applyTo add, for the
// proxy's contexts (an ANY patch adds once: in the outbound or gateway
// context, as istiod). Invalid ones are reported here.
func (a *applier) added(typeURL string) []proto.Message {
	var t networking.EnvoyFilter_ApplyTo
	switch typeURL {
	case resourcev3.ListenerType:
		t = networking.EnvoyFilter_LISTENER
	case resourcev3.ClusterType:
		t = networking.EnvoyFilter_CLUSTER
	default:
		return nil
	}
	ctxs := []networking.EnvoyFilter_PatchContext{networking.EnvoyFilter_SIDECAR_OUTBOUND, networking.EnvoyFilter_SIDECAR_INBOUND}
	if a.proxy.Type == model.Router {
		ctxs = []networking.EnvoyFilter_PatchContext{networking.EnvoyFilter_GATEWAY}
	}
	var out []proto.Message
	for _, ctx := range ctxs {
		for _, p := range a.ps.get(t) {
			if p.op != networking.EnvoyFilter_Patch_ADD || !contextMatch(ctx, p) {
				continue
			}
			if p.match.GetContext() == networking.EnvoyFilter_ANY && ctx == networking.EnvoyFilter_SIDECAR_INBOUND {
				continue
			}
			m := proto.Clone(p.value)
			if err := check(m); err != nil {
				a.problem(p, resourceName(m), fmt.Errorf("the added resource is invalid, not added: %w", err))
				continue
			}
			out = append(out, m)
		}
	}
	return out
}

func resourceName(m proto.Message) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	return ""
}
