// Package envoyfilter applies Istio's EnvoyFilter patches to generated
// xDS resources, with istiod's semantics (pilot/pkg/networking/core/
// envoyfilter, Istio 1.31): which filters apply to a proxy and in what
// order (Select), and how each applyTo and operation changes listeners,
// route configurations and clusters (Apply). It is pure: resources, proxy
// and compiled filters in, patched copies and problems out; the input
// resources are never altered. A patched resource that fails Envoy's own
// constraints (ValidateAll on it and every Any inside) is not sent: the
// patches that broke it are skipped and named as problems.
//
// It imports core and xdsserver/gen only, never the protocol or sources.
package envoyfilter

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// Problem is a patch that could not be applied: its EnvoyFilter, the
// patch's index in configPatches, the resource it was applied to ("" when
// the patch failed before any resource) and why.
type Problem struct {
	Filter   config.Key
	Source   config.Source
	Patch    int
	Resource string
	Err      string
}

func (p Problem) String() string {
	if p.Filter.Name == "" {
		return "EnvoyFilter patches on " + p.Resource + ": " + p.Err
	}
	s := fmt.Sprintf("EnvoyFilter %s/%s: configPatches[%d]", p.Filter.Namespace, p.Filter.Name, p.Patch)
	if p.Resource != "" {
		s += " on " + p.Resource
	}
	return s + ": " + p.Err
}

// Set is every EnvoyFilter of a snapshot, compiled: patch values decoded
// into their Envoy types, version regexes compiled, each namespace's
// filters in istiod's order. Immutable once made; safe for concurrent use.
type Set struct {
	root     string
	byNS     map[string][]*filter
	metaKeys []string
	problems []Problem
}

// filter is one EnvoyFilter.
type filter struct {
	key      config.Key
	src      config.Source
	priority int32
	created  time.Time
	selector map[string]string
	refs     []*typev1beta1.PolicyTargetReference
	patches  []*patch
}

// patch is one configPatch with its value decoded.
type patch struct {
	f       *filter
	index   int
	applyTo networking.EnvoyFilter_ApplyTo
	op      networking.EnvoyFilter_Patch_Operation
	match   *networking.EnvoyFilter_EnvoyConfigObjectMatch
	value   proto.Message
	version *regexp.Regexp
	// durations: where the value sets a Duration (MERGE replaces those).
	durations [][]protoreflect.FieldDescriptor
	// noMatch: the proxyVersion expression cannot be used (fail closed).
	noMatch bool
}

// maxVersionLen bounds a proxyVersion expression, as istiod does (longer
// ones match no proxy).
const maxVersionLen = 1024

// Compile compiles the EnvoyFilters cs (any order) of a mesh whose root
// namespace is root. A patch whose value does not decode into its
// applyTo's type is left out and reported by Problems.
func Compile(cs []config.Config, root string) *Set {
	s := &Set{root: root, byNS: map[string][]*filter{}}
	keys := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		spec, ok := c.Spec.(*networking.EnvoyFilter)
		if !ok {
			continue
		}
		f := &filter{key: c.Key(), src: c.Source, priority: spec.GetPriority(), created: c.CreationTime,
			selector: spec.GetWorkloadSelector().GetLabels(), refs: spec.GetTargetRefs()}
		for j, cp := range spec.GetConfigPatches() {
			p, err := compilePatch(f, j, cp)
			if err != nil {
				s.problems = append(s.problems, Problem{Filter: f.key, Source: f.src, Patch: j, Err: err.Error()})
				continue
			}
			for k := range p.match.GetProxy().GetMetadata() {
				keys[k] = true
			}
			f.patches = append(f.patches, p)
		}
		s.byNS[c.Namespace] = append(s.byNS[c.Namespace], f)
	}
	for _, fs := range s.byNS {
		slices.SortFunc(fs, func(a, b *filter) int {
			if c := cmp.Compare(a.priority, b.priority); c != 0 {
				return c
			}
			if c := a.created.Compare(b.created); c != 0 {
				return c
			}
			return strings.Compare(a.key.Name, b.key.Name)
		})
	}
	for k := range keys {
		s.metaKeys = append(s.metaKeys, k)
	}
	slices.Sort(s.metaKeys)
	return s
}

func compilePatch(f *filter, j int, cp *networking.EnvoyFilter_EnvoyConfigObjectPatch) (*patch, error) {
	if cp.GetPatch() == nil {
		return nil, fmt.Errorf("no patch")
	}
	p := &patch{f: f, index: j, applyTo: cp.GetApplyTo(), op: cp.GetPatch().GetOperation(), match: cp.GetMatch()}
	if p.match == nil {
		p.match = &networking.EnvoyFilter_EnvoyConfigObjectMatch{Context: networking.EnvoyFilter_ANY}
	}
	if v := p.match.GetProxy().GetProxyVersion(); v != "" {
		if len(v) > maxVersionLen {
			p.noMatch = true
		} else if re, err := regexp.Compile(v); err != nil {
			return nil, fmt.Errorf("match.proxy.proxyVersion %q: %w", v, err)
		} else {
			p.version = re
		}
	}
	if val := cp.GetPatch().GetValue(); val != nil {
		m, err := newValue(p.applyTo)
		if err != nil {
			return nil, err
		}
		js, err := protojson.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("patch.value: %w", err)
		}
		// Unknown fields are ignored, as istiod does (a filter may be
		// written for a newer Envoy API than ours).
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, m); err != nil {
			return nil, fmt.Errorf("patch.value is not a valid %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
		p.value = m
		p.durations = durationPaths(m.ProtoReflect())
		if p.applyTo == networking.EnvoyFilter_EXTENSION_CONFIG {
			// istiod patches the extension configs it serves over ECDS
			// (WasmPlugin); baremesh serves no ECDS, so nothing to patch.
			return nil, fmt.Errorf("applyTo EXTENSION_CONFIG is not applied: baremesh serves no ECDS (extension config discovery)")
		}
	} else if p.op != networking.EnvoyFilter_Patch_REMOVE {
		return nil, fmt.Errorf("patch %s has no value", p.op)
	}
	switch p.op {
	case networking.EnvoyFilter_Patch_INSERT_BEFORE, networking.EnvoyFilter_Patch_INSERT_AFTER, networking.EnvoyFilter_Patch_INSERT_FIRST:
		// Only lists of filters and routes have positions; istiod turns
		// the others into ADD.
		switch p.applyTo {
		case networking.EnvoyFilter_HTTP_FILTER, networking.EnvoyFilter_NETWORK_FILTER, networking.EnvoyFilter_HTTP_ROUTE, networking.EnvoyFilter_LISTENER_FILTER:
		default:
			p.op = networking.EnvoyFilter_Patch_ADD
		}
	}
	return p, nil
}

// newValue is the Envoy type a patch value of applyTo decodes into.
func newValue(a networking.EnvoyFilter_ApplyTo) (proto.Message, error) {
	switch a {
	case networking.EnvoyFilter_CLUSTER:
		return &clusterv3.Cluster{}, nil
	case networking.EnvoyFilter_LISTENER:
		return &listenerv3.Listener{}, nil
	case networking.EnvoyFilter_ROUTE_CONFIGURATION:
		return &routev3.RouteConfiguration{}, nil
	case networking.EnvoyFilter_FILTER_CHAIN:
		return &listenerv3.FilterChain{}, nil
	case networking.EnvoyFilter_HTTP_FILTER:
		return &hcmv3.HttpFilter{}, nil
	case networking.EnvoyFilter_NETWORK_FILTER:
		return &listenerv3.Filter{}, nil
	case networking.EnvoyFilter_VIRTUAL_HOST:
		return &routev3.VirtualHost{}, nil
	case networking.EnvoyFilter_HTTP_ROUTE:
		return &routev3.Route{}, nil
	case networking.EnvoyFilter_EXTENSION_CONFIG:
		return &corev3.TypedExtensionConfig{}, nil
	case networking.EnvoyFilter_LISTENER_FILTER:
		return &listenerv3.ListenerFilter{}, nil
	case networking.EnvoyFilter_BOOTSTRAP:
		// We send no bootstrap: the value is not read (the agent or the
		// operator writes Envoy's bootstrap).
		return nil, fmt.Errorf("applyTo BOOTSTRAP is not applicable: baremesh serves no bootstrap (pilot-agent or the operator writes it)")
	}
	return nil, fmt.Errorf("applyTo %s is not supported", a)
}

// Problems are the patches left out when compiling.
func (s *Set) Problems() []Problem { return s.problems }

// MetadataKeys are the node metadata keys some patch's match reads: the
// proxy traits beside namespace, labels and Istio version that decide
// which patches apply (a cache key must hold their values). Sorted.
func (s *Set) MetadataKeys() []string { return s.metaKeys }

// Empty reports whether s holds no filter.
func (s *Set) Empty() bool { return s == nil || len(s.byNS) == 0 }

// Patches are the patches that apply to one proxy, by applyTo, in order.
type Patches struct {
	by map[networking.EnvoyFilter_ApplyTo][]*patch
	// inbound: the hostnames of the services the proxy serves on each
	// inbound port (WithInboundHosts).
	inbound map[uint32][]string
}

// NeedsInboundHosts reports whether a CLUSTER patch matches by service:
// an inbound cluster's name carries no host, so the caller gives the
// services the proxy serves on each port (WithInboundHosts).
func (ps *Patches) NeedsInboundHosts() bool {
	for _, p := range ps.get(networking.EnvoyFilter_CLUSTER) {
		if p.match.GetCluster().GetService() != "" {
			return true
		}
	}
	return false
}

// WithInboundHosts returns ps with the hostnames of the services the
// proxy serves on each inbound (target) port: a CLUSTER match on service
// matches an inbound cluster when one of them is the service, as istiod.
func (ps *Patches) WithInboundHosts(hosts map[uint32][]string) *Patches {
	if ps == nil {
		return nil
	}
	cp := *ps
	cp.inbound = hosts
	return &cp
}

func (ps *Patches) get(a networking.EnvoyFilter_ApplyTo) []*patch {
	if ps == nil {
		return nil
	}
	return ps.by[a]
}

// Select returns the patches that apply to p in istiod's order: the root
// namespace's filters and the proxy's namespace's, those whose
// workloadSelector (or targetRefs) select p, by priority, root namespace
// first on a tie, then creation time, then name; within a filter, its
// patches in order, each kept if its match.proxy matches p. Nil when none.
func (s *Set) Select(p *model.Proxy) *Patches {
	if s.Empty() {
		return nil
	}
	var fs []*filter
	if s.root != "" {
		fs = s.selected(p, s.root)
	}
	if p.Namespace != s.root {
		fs = append(fs, s.selected(p, p.Namespace)...)
	}
	if len(fs) == 0 {
		return nil
	}
	slices.SortStableFunc(fs, func(a, b *filter) int {
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		if a.key.Namespace != b.key.Namespace && (a.key.Namespace == s.root || b.key.Namespace == s.root) {
			if a.key.Namespace == s.root {
				return -1
			}
			return 1
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.key.Name+"."+a.key.Namespace, b.key.Name+"."+b.key.Namespace)
	})
	out := &Patches{by: map[networking.EnvoyFilter_ApplyTo][]*patch{}}
	for _, f := range fs {
		for _, cp := range f.patches {
			if proxyMatch(p, cp) {
				out.by[cp.applyTo] = append(out.by[cp.applyTo], cp)
			}
		}
	}
	return out
}

// gatewayNameLabel names a Kubernetes Gateway API gateway's deployment.
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// selected are the filters of namespace ns that select p, in order.
func (s *Set) selected(p *model.Proxy, ns string) []*filter {
	var out []*filter
	for _, f := range s.byNS[ns] {
		if attaches(p, f) {
			out = append(out, f)
		}
	}
	return out
}

// attaches is istiod's policy attachment for EnvoyFilter: a proxy that is
// not a Gateway API gateway is selected by workloadSelector (none: all)
// and never by a filter with targetRefs; a Gateway API gateway only by a
// targetRef to its Gateway in its own namespace.
func attaches(p *model.Proxy, f *filter) bool {
	gw, isGateway := p.Labels[gatewayNameLabel]
	if !isGateway {
		if len(f.refs) > 0 {
			return false
		}
		return subset(f.selector, p.Labels)
	}
	if len(f.refs) == 0 {
		// istiod's ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY, on by
		// default: a gateway without targetRefs uses the selector.
		return subset(f.selector, p.Labels)
	}
	for _, r := range f.refs {
		if f.key.Namespace != p.Namespace || (r.GetNamespace() != "" && r.GetNamespace() != p.Namespace) {
			continue
		}
		if r.GetKind() == "Gateway" && (r.GetGroup() == "gateway.networking.k8s.io") && r.GetName() == gw {
			return true
		}
	}
	return false
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func proxyMatch(p *model.Proxy, cp *patch) bool {
	m := cp.match.GetProxy()
	if m == nil {
		return true
	}
	if cp.noMatch {
		return false
	}
	if cp.version != nil && (p.IstioVersion == "" || !cp.version.MatchString(p.IstioVersion)) {
		return false
	}
	for k, v := range m.GetMetadata() {
		if p.Metadata[k] != v {
			return false
		}
	}
	return true
}
