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

// Policy merges the traffic policy of dr for port and subset as istiod's
// MergeSubsetTrafficPolicy: a policy's port-level settings for port
// replace its load balancer, connection pool, outlier detection and TLS
// wholesale (a field they omit is not inherited: the default applies);
// the subset's policy (so resolved for port) then overrides the rule's,
// field by field, or wholesale when it came from the subset's port-level
// settings. The result is a new message (nil when dr is nil).
func Policy(dr *networking.DestinationRule, port uint32, subset string) *networking.TrafficPolicy {
	if dr == nil {
		return nil
	}
	out := &networking.TrafficPolicy{}
	lb, cp, od, tls, _ := forPort(dr.GetTrafficPolicy(), port)
	overlay(out, lb, cp, od, tls, true)
	if ss := subsetPolicy(dr, subset); ss != nil {
		lb, cp, od, tls, whole := forPort(ss, port)
		overlay(out, lb, cp, od, tls, whole)
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
