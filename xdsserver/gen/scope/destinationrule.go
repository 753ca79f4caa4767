package scope

import (
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// DestinationRule returns the DestinationRule for svc as the proxy sees
// it: looked up in the proxy's namespace, then the service's, then the
// root namespace (Istio's order); in each, an exact host beats the most
// specific wildcard; a short host is of the rule's namespace; exportTo is
// honoured. Nil if none.
func (v *View) DestinationRule(svc *model.Service) *networking.DestinationRule {
	ix := v.destinationRules()
	if !ix.any {
		return nil
	}
	for i, ns := range [3]string{v.Proxy.Namespace, svc.Namespace, ix.root} {
		var best *networking.DestinationRule
		bestLen := 0
		cs := ix.proxyNS
		switch i {
		case 1:
			cs = v.Push.ConfigsIn(config.DestinationRule, ns)
		case 2:
			cs = ix.rootNS
		}
		for _, c := range cs {
			dr := c.Spec.(*networking.DestinationRule)
			if !Exported(dr.GetExportTo(), c.Namespace, v.Proxy.Namespace) {
				continue
			}
			// A short host ("reviews") names a service of the rule's
			// namespace, as Istio's ResolveShortnameToFQDN makes it.
			h := v.FQDN(dr.GetHost(), c.Namespace)
			if h == svc.Hostname {
				return dr
			}
			if strings.HasPrefix(h, "*") && HostMatch(h, svc.Hostname) && (best == nil || len(h) > bestLen) {
				best, bestLen = dr, len(h)
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// HasDestinationRules reports whether the snapshot has any
// DestinationRule: when not, DestinationRule is nil for every service.
func (v *View) HasDestinationRules() bool { return v.destinationRules().any }

// drIndex holds what DestinationRule looks up on every call: whether
// the snapshot has any DestinationRule, and those of the proxy's and the
// root namespace. Routes and clusters ask once per service.
type drIndex struct {
	ready, any      bool
	root            string
	proxyNS, rootNS []config.Config
}

func (v *View) destinationRules() *drIndex {
	ix := &v.dr
	if !ix.ready {
		ix.ready = true
		ix.any, ix.root = len(v.Push.Configs(config.DestinationRule)) > 0, RootNamespace(v.Push)
		if ix.any {
			ix.proxyNS = v.Push.ConfigsIn(config.DestinationRule, v.Proxy.Namespace)
			ix.rootNS = v.Push.ConfigsIn(config.DestinationRule, ix.root)
		}
	}
	return ix
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

// Policy merges the traffic policy of dr for port and subset as Istio
// does: the top-level policy, overridden field by field (load balancer,
// connection pool, outlier detection, TLS) by its port-level settings,
// then by the subset's policy and the subset's port-level settings. The
// result is a new message (nil when dr is nil).
func Policy(dr *networking.DestinationRule, port uint32, subset string) *networking.TrafficPolicy {
	if dr == nil {
		return nil
	}
	out := &networking.TrafficPolicy{}
	apply := func(tp *networking.TrafficPolicy) {
		if tp == nil {
			return
		}
		overlay(out, tp.GetLoadBalancer(), tp.GetConnectionPool(), tp.GetOutlierDetection(), tp.GetTls())
		for _, pl := range tp.GetPortLevelSettings() {
			if pl.GetPort().GetNumber() == port {
				overlay(out, pl.GetLoadBalancer(), pl.GetConnectionPool(), pl.GetOutlierDetection(), pl.GetTls())
			}
		}
	}
	apply(dr.GetTrafficPolicy())
	if subset != "" {
		if ss := Subset(dr, subset); ss != nil {
			apply(ss.GetTrafficPolicy())
		}
	}
	return out
}

// LoadBalancer is the load balancer settings Policy would merge for port
// and subset (nil if none), found without copying anything: routes need
// only this, once per destination.
func LoadBalancer(dr *networking.DestinationRule, port uint32, subset string) *networking.LoadBalancerSettings {
	var lb *networking.LoadBalancerSettings
	apply := func(tp *networking.TrafficPolicy) {
		if l := tp.GetLoadBalancer(); l != nil {
			lb = l
		}
		for _, pl := range tp.GetPortLevelSettings() {
			if l := pl.GetLoadBalancer(); l != nil && pl.GetPort().GetNumber() == port {
				lb = l
			}
		}
	}
	apply(dr.GetTrafficPolicy())
	if subset != "" {
		if ss := Subset(dr, subset); ss != nil {
			apply(ss.GetTrafficPolicy())
		}
	}
	return lb
}

func overlay(out *networking.TrafficPolicy, lb *networking.LoadBalancerSettings, cp *networking.ConnectionPoolSettings, od *networking.OutlierDetection, tls *networking.ClientTLSSettings) {
	if lb != nil {
		out.LoadBalancer = proto.Clone(lb).(*networking.LoadBalancerSettings)
	}
	if cp != nil {
		out.ConnectionPool = proto.Clone(cp).(*networking.ConnectionPoolSettings)
	}
	if od != nil {
		out.OutlierDetection = proto.Clone(od).(*networking.OutlierDetection)
	}
	if tls != nil {
		out.Tls = proto.Clone(tls).(*networking.ClientTLSSettings)
	}
}
