package generation

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/envoyfilter"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// The patch stage: EnvoyFilters are applied to a generation's output
// before it is encoded (and cached): the shape key holds every proxy
// trait a filter's selection reads (namespace, labels, Istio version,
// and the node metadata some match names: shapeKey.efMeta), so a cached
// output is the patched output of its key. The generators' resources are
// never altered (envoyfilter.Apply patches copies).

// efState is the compiled EnvoyFilters of the latest snapshot, reused
// while they do not change, and the problems found applying them.
type efState struct {
	mu       sync.Mutex
	version  uint64
	cfgs     []config.Config
	root     string
	set      *envoyfilter.Set
	problems map[string]store.Problem
}

// envoyFilters returns pc's EnvoyFilters compiled.
func (b *Builder) envoyFilters(pc *push.PushContext) *envoyfilter.Set {
	st := &b.ef
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.set != nil && pc.Version == st.version {
		return st.set
	}
	cfgs, root := pc.Configs(config.EnvoyFilter), pc.Mesh.GetRootNamespace()
	if st.set != nil && root == st.root && sameConfigs(cfgs, st.cfgs) {
		if pc.Version > st.version {
			st.version = pc.Version
		}
		return st.set
	}
	set := envoyfilter.Compile(cfgs, root)
	if st.set != nil && pc.Version < st.version {
		return set // an older snapshot: not kept
	}
	st.version, st.cfgs, st.root, st.set = pc.Version, cfgs, root, set
	st.problems = map[string]store.Problem{}
	st.note(set, set.Problems())
	return set
}

// sameConfigs: the same EnvoyFilters (keys, creation times, specs).
func sameConfigs(a, b []config.Config) bool {
	return slices.EqualFunc(a, b, func(x, y config.Config) bool {
		return x.Key() == y.Key() && x.CreationTime.Equal(y.CreationTime) && x.Source == y.Source && proto.Equal(x.Spec, y.Spec)
	})
}

// note records problems found with set, if it is still the current one.
// Caller holds st.mu.
func (st *efState) note(set *envoyfilter.Set, ps []envoyfilter.Problem) {
	if set != st.set {
		return
	}
	for _, p := range ps {
		k := p.String()
		if _, ok := st.problems[k]; ok {
			continue
		}
		origin := p.Source.File
		if origin == "" {
			origin = p.Source.Name
		}
		res := p.Filter.String()
		if p.Filter.Name == "" {
			res = "EnvoyFilter" // a failure not tied to one filter
		}
		st.problems[k] = store.Problem{Source: p.Source.Name, Origin: origin, Line: p.Source.Line, Resource: res,
			Error: p.String(), Since: time.Now()}
	}
}

// EnvoyFilterProblems are the EnvoyFilter patches that could not be
// applied as written with the current filters: values that do not decode,
// patches that failed or made a resource invalid (skipped, the resource
// sent without them). Sorted by resource and error.
func (b *Builder) EnvoyFilterProblems() []store.Problem {
	b.ef.mu.Lock()
	defer b.ef.mu.Unlock()
	out := slices.Collect(maps.Values(b.ef.problems))
	slices.SortFunc(out, func(a, b store.Problem) int {
		if c := strings.Compare(a.Resource, b.Resource); c != 0 {
			return c
		}
		return strings.Compare(a.Error, b.Error)
	})
	return out
}

// patch applies the EnvoyFilters of in.Push that select in.Proxy to res,
// the output of t's generator.
func (b *Builder) patch(t *xdstype.Type, in gen.Input, res []gen.Resource) []gen.Resource {
	if !envoyfilter.Applies(t.URL) || in.Proxy.Proxyless || len(in.Push.Configs(config.EnvoyFilter)) == 0 {
		return res
	}
	set := b.envoyFilters(in.Push)
	ps := set.Select(in.Proxy)
	if t == xdstype.Cluster && ps.NeedsInboundHosts() {
		// The services behind each inbound cluster, as cds builds them
		// (scope.Inbound reads only what the shape key holds).
		hosts := map[uint32][]string{}
		for _, inst := range scope.Inbound(in.Push, in.Proxy) {
			if inst.Service != nil {
				hosts[inst.TargetPort] = append(hosts[inst.TargetPort], inst.Service.Hostname)
			}
		}
		ps = ps.WithInboundHosts(hosts)
	}
	out, problems := envoyfilter.Apply(t.URL, res, in.Proxy, ps)
	if len(problems) > 0 {
		b.ef.mu.Lock()
		b.ef.note(set, problems)
		b.ef.mu.Unlock()
	}
	return out
}

// envoyFilterMeta is the part of p's node metadata that some EnvoyFilter
// match of pc reads (shapeKey.efMeta): key, NUL, value, NUL, in key order.
func (b *Builder) envoyFilterMeta(pc *push.PushContext, p *model.Proxy) string {
	if len(pc.Configs(config.EnvoyFilter)) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, k := range b.envoyFilters(pc).MetadataKeys() {
		if v, ok := p.Metadata[k]; ok {
			sb.WriteString(k + "\x00" + v + "\x00")
		}
	}
	return sb.String()
}

// parseMeta reads envoyFilterMeta's encoding into md.
func parseMeta(s string, md map[string]string) {
	parts := strings.Split(s, "\x00")
	for i := 0; i+1 < len(parts); i += 2 {
		md[parts[i]] = parts[i+1]
	}
}
