package scope

import (
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// DestinationRule returns the DestinationRule for svc as the proxy sees
// it, as istiod's PushContext.destinationRule and SidecarScope do:
//
//   - looked up in the proxy's namespace (its rules exported to it), then
//     the service's, then the root namespace (their rules exported to the
//     proxy's namespace); a proxy in the root namespace first sees the
//     root's rules private to it. In each, an exact host beats the most
//     specific wildcard; a short host is of the rule's namespace.
//   - Several rules for one host in one namespace are consolidated
//     (istiod's mergeDestinationRule): rules with a workloadSelector first,
//     then oldest first; a rule joins the one before it when their
//     exportTo are the same (or, also kept on its own, when it exports to
//     more) and their selectors agree, adding the subsets the merged rule
//     lacks and its traffic policy only if the merged rule has none.
//   - Of the consolidated rules, one whose workloadSelector matches the
//     proxy (a rule of its namespace) wins; else the last without one.
//
// Nil if none. A merged rule is a new message; others are the
// snapshot's, not to be altered.
func (v *View) DestinationRule(svc *model.Service) *networking.DestinationRule {
	ix := v.destinationRules()
	if !ix.any {
		return nil
	}
	first := drLevelKey{v.Proxy.Namespace, drLocal}
	if v.Proxy.Namespace == ix.root {
		first = drLevelKey{ix.root, drRootPrivate}
	}
	for _, k := range [3]drLevelKey{first, {svc.Namespace, drExported}, {ix.root, drExported}} {
		l := ix.level(v, k.ns, k.kind)
		if entries, ok := l.match(svc.Hostname, ix.meta); ok {
			return v.selectDR(entries)
		}
	}
	return nil
}

// HasDestinationRules reports whether the snapshot has any
// DestinationRule: when not, DestinationRule is nil for every service.
func (v *View) HasDestinationRules() bool { return v.destinationRules().any }

// drIndex holds what DestinationRule looks up on every call: whether the
// snapshot has any DestinationRule, and the rules of each lookup level
// by host, made on first use. Routes and clusters ask once per service.
type drIndex struct {
	ready, any bool
	root       string
	levels     map[drLevelKey]*drLevel
	// meta is the config of each rule DestinationRule may return: a
	// merged rule's is its first (oldest) rule's.
	meta map[*networking.DestinationRule]config.Meta
}

// drKind is a lookup level's kind (istiod's destinationRuleIndex):
// namespaceLocal, exportedByNamespace, rootNamespaceLocal.
type drKind int

const (
	drLocal drKind = iota
	drExported
	drRootPrivate
)

type drLevelKey struct {
	ns   string
	kind drKind
}

// drLevel is one namespace's rules of one kind, by resolved host, in
// istiod's order (with a workloadSelector first, then oldest first);
// consolidated holds each host's merged rules once made.
type drLevel struct {
	exact, wild  map[string][]*config.Config
	consolidated map[string][]drEntry
}

// drEntry is one consolidated rule: the rule (a copy once another is
// merged into it), the first rule's config (its namespace names the
// rule's) and selector, and its exportTo.
type drEntry struct {
	rule     *networking.DestinationRule
	meta     config.Meta
	selector map[string]string
	exportTo []string
	merged   bool
}

func (v *View) destinationRules() *drIndex {
	ix := &v.dr
	if !ix.ready {
		ix.ready = true
		ix.any, ix.root = len(v.Push.Configs(config.DestinationRule)) > 0, RootNamespace(v.Push)
		ix.levels = map[drLevelKey]*drLevel{}
		ix.meta = map[*networking.DestinationRule]config.Meta{}
	}
	return ix
}

// DestinationRuleMeta is the config a rule DestinationRule returned
// comes from (of a merged rule, its oldest rule's, as istiod names it).
func (v *View) DestinationRuleMeta(dr *networking.DestinationRule) (config.Meta, bool) {
	m, ok := v.destinationRules().meta[dr]
	return m, ok
}

// level returns the rules of namespace ns of kind k, collected on first
// use. Exported levels keep only the rules exported to the proxy's
// namespace; a rule with a workloadSelector is private to its namespace.
func (ix *drIndex) level(v *View, ns string, k drKind) *drLevel {
	key := drLevelKey{ns, k}
	if l := ix.levels[key]; l != nil {
		return l
	}
	l := &drLevel{exact: map[string][]*config.Config{}, wild: map[string][]*config.Config{}, consolidated: map[string][]drEntry{}}
	ix.levels[key] = l
	for _, c := range drOrder(v.Push.ConfigsIn(config.DestinationRule, ns)) {
		dr := c.Spec.(*networking.DestinationRule)
		exportTo := drExportTo(dr)
		// No exportTo: the mesh's default, whose "." keeps the rule
		// private (istiod's isPrivateOnly).
		private := (len(exportTo) == 0 && slices.Contains(v.Push.Mesh.GetDefaultDestinationRuleExportTo(), ".")) ||
			(len(exportTo) == 1 && (exportTo[0] == "." || exportTo[0] == c.Namespace))
		switch k {
		case drLocal:
			if !Exported(exportTo, c.Namespace, c.Namespace) {
				continue
			}
		case drExported:
			if private || !drExportedTo(exportTo, v.Proxy.Namespace) {
				continue
			}
		case drRootPrivate:
			if !private {
				continue
			}
		}
		h := v.FQDN(dr.GetHost(), c.Namespace)
		if strings.HasPrefix(h, "*") {
			l.wild[h] = append(l.wild[h], c)
		} else {
			l.exact[h] = append(l.exact[h], c)
		}
	}
	return l
}

// drOrder is istiod's sortConfigBySelectorAndCreationTime: rules with a
// workloadSelector first, then by creation time, then name.
func drOrder(cs []config.Config) []*config.Config {
	out := make([]*config.Config, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	slices.SortStableFunc(out, func(a, b *config.Config) int {
		as := a.Spec.(*networking.DestinationRule).GetWorkloadSelector() != nil
		bs := b.Spec.(*networking.DestinationRule).GetWorkloadSelector() != nil
		if as != bs {
			if as {
				return -1
			}
			return 1
		}
		if d := a.CreationTime.Compare(b.CreationTime); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// drExportTo is a rule's exportTo as istiod indexes it: "." for a rule
// with a workloadSelector.
func drExportTo(dr *networking.DestinationRule) []string {
	if dr.GetWorkloadSelector() != nil {
		return []string{"."}
	}
	return dr.GetExportTo()
}

// drExportedTo: an exported rule reaches namespace ns when it names no
// namespace, "*", or ns (istiod's getExportedDestinationRuleFromNamespace).
func drExportedTo(exportTo []string, ns string) bool {
	return len(exportTo) == 0 || slices.Contains(exportTo, "*") || slices.Contains(exportTo, ns)
}

// match returns the consolidated rules of the exact host, else of the
// most specific wildcard that covers it.
func (l *drLevel) match(host string, meta map[*networking.DestinationRule]config.Meta) ([]drEntry, bool) {
	key := host
	cs := l.exact[host]
	if cs == nil {
		key = ""
		for h := range l.wild {
			if HostMatch(h, host) && (key == "" || len(h) > len(key) || (len(h) == len(key) && h < key)) {
				key = h
			}
		}
		if key == "" {
			return nil, false
		}
		cs = l.wild[key]
	}
	if e, ok := l.consolidated[key]; ok {
		return e, true
	}
	e := consolidate(cs)
	l.consolidated[key] = e
	for _, x := range e {
		meta[x.rule] = x.meta
	}
	return e, true
}

// consolidate merges the rules of one host as istiod's
// mergeDestinationRule (with its enhanced merge, on by default).
func consolidate(cs []*config.Config) []drEntry {
	var out []drEntry
	for _, c := range cs {
		dr := c.Spec.(*networking.DestinationRule)
		exportTo := drExportTo(dr)
		sel := dr.GetWorkloadSelector().GetMatchLabels()
		separate := true
		for i := range out {
			e := &out[i]
			switch {
			case sameSet(exportTo, e.exportTo):
				separate = false
			case len(e.exportTo) > 0 && superset(exportTo, e.exportTo):
				separate = true
			default:
				separate = true
				continue
			}
			bothWithout := dr.GetWorkloadSelector() == nil && e.selector == nil
			bothWith := dr.GetWorkloadSelector() != nil && e.selector != nil
			if bothWith && !maps.Equal(sel, e.selector) {
				separate = true
				continue
			}
			if bothWithout || bothWith {
				separate = false
			}
			e.merge(dr)
		}
		if separate {
			var esel map[string]string
			if dr.GetWorkloadSelector() != nil {
				esel = sel
				if esel == nil {
					esel = map[string]string{}
				}
			}
			out = append(out, drEntry{rule: dr, meta: c.Meta, selector: esel, exportTo: exportTo})
		}
	}
	return out
}

// merge adds dr's subsets that e's rule lacks, and dr's traffic policy
// if e's rule has none.
func (e *drEntry) merge(dr *networking.DestinationRule) {
	if !e.merged {
		e.rule = proto.Clone(e.rule).(*networking.DestinationRule)
		e.merged = true
	}
	for _, s := range dr.GetSubsets() {
		if Subset(e.rule, s.GetName()) == nil {
			e.rule.Subsets = append(e.rule.Subsets, s)
		}
	}
	if e.rule.TrafficPolicy == nil && dr.GetTrafficPolicy() != nil {
		e.rule.TrafficPolicy = dr.GetTrafficPolicy()
	}
}

// selectDR picks, of one host's consolidated rules, the one whose
// workloadSelector matches the proxy (a rule of the proxy's namespace),
// else the last without a selector (istiod's SidecarScope.DestinationRule,
// outbound).
func (v *View) selectDR(entries []drEntry) *networking.DestinationRule {
	var catchAll *networking.DestinationRule
	for _, e := range entries {
		if e.selector == nil {
			catchAll = e.rule
			continue
		}
		if e.meta.Namespace == v.Proxy.Namespace && LabelsMatch(e.selector, v.Proxy.Labels) {
			return e.rule
		}
	}
	return catchAll
}

func sameSet(a, b []string) bool { return superset(a, b) && superset(b, a) }

// superset: every element of b is in a.
func superset(a, b []string) bool {
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

// Subset returns the subset of dr named name, or nil.
func Subset(dr *networking.DestinationRule, name string) *networking.Subset {
	for _, s := range dr.GetSubsets() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// Policy merges the traffic policy of dr for port and subset as istiod's
// MergeSubsetTrafficPolicy: a policy's port-level settings for port
// replace its load balancer, connection pool, outlier detection and TLS
// wholesale (a field they omit is not inherited: the default applies),
// and leave out its retryBudget and proxyProtocol;
// the subset's policy (so resolved for port) then overrides the rule's,
// field by field, or wholesale when it came from the subset's port-level
// settings. The result is a new message (nil when dr is nil).
func Policy(dr *networking.DestinationRule, port uint32, subset string) *networking.TrafficPolicy {
	if dr == nil {
		return nil
	}
	out := &networking.TrafficPolicy{}
	lb, cp, od, tls, portLevel := forPort(dr.GetTrafficPolicy(), port)
	overlay(out, lb, cp, od, tls, true)
	if !portLevel { // port-level settings carry none of these (istiod's shadow copy)
		out.RetryBudget, out.ProxyProtocol = clone(dr.GetTrafficPolicy().GetRetryBudget()), clone(dr.GetTrafficPolicy().GetProxyProtocol())
	}
	if ss := subsetPolicy(dr, subset); ss != nil {
		lb, cp, od, tls, whole := forPort(ss, port)
		overlay(out, lb, cp, od, tls, whole)
		if !whole {
			if rb := ss.GetRetryBudget(); rb != nil {
				out.RetryBudget = clone(rb)
			}
			if pp := ss.GetProxyProtocol(); pp != nil {
				out.ProxyProtocol = clone(pp)
			}
		}
	}
	return out
}

// LoadBalancer is the load balancer settings Policy would merge for port
// and subset (nil if none), found without copying anything: routes need
// only this, once per destination.
func LoadBalancer(dr *networking.DestinationRule, port uint32, subset string) *networking.LoadBalancerSettings {
	lb, _, _, _, _ := forPort(dr.GetTrafficPolicy(), port)
	if ss := subsetPolicy(dr, subset); ss != nil {
		if l, _, _, _, whole := forPort(ss, port); l != nil || whole {
			lb = l
		}
	}
	return lb
}

// subsetPolicy is the traffic policy of dr's subset named name, nil
// for none.
func subsetPolicy(dr *networking.DestinationRule, name string) *networking.TrafficPolicy {
	if name == "" {
		return nil
	}
	return Subset(dr, name).GetTrafficPolicy()
}

// forPort is tp's settings for port: those of its port-level settings
// for port when it has some (portLevel true), else its own (istiod's
// GetPortLevelTrafficPolicy).
func forPort(tp *networking.TrafficPolicy, port uint32) (lb *networking.LoadBalancerSettings, cp *networking.ConnectionPoolSettings,
	od *networking.OutlierDetection, tls *networking.ClientTLSSettings, portLevel bool) {
	for _, pl := range tp.GetPortLevelSettings() {
		if pl.GetPort() != nil && pl.GetPort().GetNumber() == port {
			return pl.GetLoadBalancer(), pl.GetConnectionPool(), pl.GetOutlierDetection(), pl.GetTls(), true
		}
	}
	return tp.GetLoadBalancer(), tp.GetConnectionPool(), tp.GetOutlierDetection(), tp.GetTls(), false
}

// overlay sets out's fields to copies of the given ones: every one when
// whole, else those that are set.
func overlay(out *networking.TrafficPolicy, lb *networking.LoadBalancerSettings, cp *networking.ConnectionPoolSettings,
	od *networking.OutlierDetection, tls *networking.ClientTLSSettings, whole bool) {
	if lb != nil || whole {
		out.LoadBalancer = clone(lb)
	}
	if cp != nil || whole {
		out.ConnectionPool = clone(cp)
	}
	if od != nil || whole {
		out.OutlierDetection = clone(od)
	}
	if tls != nil || whole {
		out.Tls = clone(tls)
	}
}

// clone copies m; a nil m stays a nil of its type.
func clone[M proto.Message](m M) M {
	var zero M
	if !m.ProtoReflect().IsValid() {
		return zero
	}
	return proto.Clone(m).(M)
}
