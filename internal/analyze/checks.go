package analyze

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// vsDestinations: every destination (and mirror) of every HTTP, TLS and
// TCP route names a host some ServiceEntry declares, and a subset some
// DestinationRule for that host defines (Istio's DestinationHostAnalyzer
// and DestinationRuleAnalyzer).
func vsDestinations(ix *index) []Message {
	var out []Message
	for _, c := range ix.byKind[config.VirtualService] {
		vs := c.Spec.(*networking.VirtualService)
		check := func(d *networking.Destination, what string) {
			if d == nil {
				return
			}
			if !ix.hostExists(d.GetHost()) {
				out = append(out, notFound(c, what, d.GetHost()))
				return
			}
			if s := d.GetSubset(); s != "" && !ix.hasSubset(d.GetHost(), s) {
				out = append(out, notFound(c, what+"+subset in destinationrule", d.GetHost()+"+"+s))
			}
		}
		for _, r := range vs.GetHttp() {
			for _, d := range r.GetRoute() {
				check(d.GetDestination(), "host")
			}
			check(r.GetMirror(), "mirror host")
			for _, m := range r.GetMirrors() {
				check(m.GetDestination(), "mirror host")
			}
		}
		for _, r := range vs.GetTls() {
			for _, d := range r.GetRoute() {
				check(d.GetDestination(), "host")
			}
		}
		for _, r := range vs.GetTcp() {
			for _, d := range r.GetRoute() {
				check(d.GetDestination(), "host")
			}
		}
	}
	return out
}

// gatewayRef resolves a VirtualService's gateway name ("name" in its own
// namespace, or "ns/name") to a key; "mesh" is not a Gateway.
func gatewayRef(vsNamespace, ref string) (config.Key, bool) {
	if ref == "mesh" {
		return config.Key{}, false
	}
	ns, name := vsNamespace, ref
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		ns, name = ref[:i], ref[i+1:]
	}
	return config.Key{Kind: config.Gateway, Namespace: ns, Name: name}, true
}

// vsGateways: every gateway a VirtualService binds to exists (Istio's
// GatewayAnalyzer for VirtualServices).
func vsGateways(ix *index) []Message {
	gws := map[config.Key]bool{}
	for _, g := range ix.byKind[config.Gateway] {
		gws[g.Key()] = true
	}
	var out []Message
	for _, c := range ix.byKind[config.VirtualService] {
		for _, ref := range c.Spec.(*networking.VirtualService).GetGateways() {
			if k, ok := gatewayRef(c.Namespace, ref); ok && !gws[k] {
				out = append(out, notFound(c, "gateway", k.Namespace+"/"+k.Name))
			}
		}
	}
	return out
}

// gatewaysWithoutVS: a Gateway that no VirtualService binds to (Istio has
// no message for it; its listeners answer 404 for every host).
func gatewaysWithoutVS(ix *index) []Message {
	bound := map[config.Key]bool{}
	for _, c := range ix.byKind[config.VirtualService] {
		for _, ref := range c.Spec.(*networking.VirtualService).GetGateways() {
			if k, ok := gatewayRef(c.Namespace, ref); ok {
				bound[k] = true
			}
		}
	}
	var out []Message
	for _, g := range ix.byKind[config.Gateway] {
		if !bound[g.Key()] {
			out = append(out, msg(g, GatewayWithoutVirtualService, "No VirtualService binds to this Gateway (gateways: [%s/%s]); its servers route nothing", g.Namespace, g.Name))
		}
	}
	return out
}

// selectorsMatchWorkloads: a Sidecar's or Gateway's selector selects some
// workload (IST0101 "selector", as Istio's sidecar and gateway analyzers),
// and an AuthorizationPolicy's (IST0127, as Istio's authz analyzer).
func selectorsMatchWorkloads(ix *index) []Message {
	var out []Message
	for _, c := range ix.byKind[config.Sidecar] {
		sel := c.Spec.(*networking.Sidecar).GetWorkloadSelector().GetLabels()
		if len(sel) > 0 && len(ix.selected(c.Namespace, sel)) == 0 {
			out = append(out, notFound(c, "selector", selectorString(sel)))
		}
	}
	for _, c := range ix.byKind[config.Gateway] {
		sel := c.Spec.(*networking.Gateway).GetSelector()
		if len(sel) > 0 && len(ix.selectedAnywhere(sel)) == 0 {
			out = append(out, notFound(c, "selector", selectorString(sel)))
		}
	}
	for _, c := range ix.byKind[config.AuthorizationPolicy] {
		sel := c.Spec.(*security.AuthorizationPolicy).GetSelector().GetMatchLabels()
		if len(sel) > 0 && len(ix.selected(c.Namespace, sel)) == 0 {
			out = append(out, msg(c, NoMatchingWorkloadsFound, "No matching workloads for this resource with the following labels: %s", selectorString(sel)))
		}
	}
	return out
}

// dryRunAnnotation is the annotation that makes an AuthorizationPolicy
// a dry run (xdsserver/gen/authz, which this package does not import).
const dryRunAnnotation = "istio.io/dry-run"

// authzDryRun: an istio.io/dry-run value that is no boolean, or one on a
// CUSTOM policy, leaves the policy enforced (IST0125): the author meant
// it to change no traffic. istiod reads the value alike and only logs.
func authzDryRun(ix *index) []Message {
	var out []Message
	for _, c := range ix.byKind[config.AuthorizationPolicy] {
		v, ok := c.Annotations[dryRunAnnotation]
		if !ok {
			continue
		}
		on, err := strconv.ParseBool(v)
		switch {
		case err != nil:
			out = append(out, msg(c, InvalidAnnotation, "Invalid annotation %s: %q is not a boolean (true or false); the policy is enforced", dryRunAnnotation, v))
		case on && c.Spec.(*security.AuthorizationPolicy).GetAction() == security.AuthorizationPolicy_CUSTOM:
			out = append(out, msg(c, InvalidAnnotation, "Invalid annotation %s: a CUSTOM policy has no dry run; the policy is enforced (its authorizer decides)", dryRunAnnotation))
		}
	}
	return out
}

// trafficDistribution: a ServiceEntry's traffic distribution that
// core/model reads as no preference although it is set means none of
// istiod's values (IST0125); istiod only logs it.
func trafficDistribution(ix *index) []Message {
	var out []Message
	for _, c := range ix.byKind[config.ServiceEntry] {
		v, ok := c.Annotations[model.AnnotationTrafficDistribution]
		if ok && model.ParseTrafficDistribution(nil, c.Annotations) == model.TrafficDistributionAny {
			out = append(out, msg(c, InvalidAnnotation, "Invalid annotation %s: %q is none of PreferClose, PreferSameZone, PreferSameNode; endpoints get no preference", model.AnnotationTrafficDistribution, v))
		}
	}
	return out
}

// unsupportedFields: fields istiod acts on that baremeshd accepts but
// does not (BM0006), so that a config relying on them is not silently
// weaker: a Sidecar ingress listener's tls (no TLS terminated at the
// sidecar), bind and captureMode, a Sidecar egress listener's bind and
// captureMode (listeners are always captured ones), a Gateway server's
// bind (listeners on 0.0.0.0), and a DestinationRule's
// zoneAwareLbSetting (needs Envoy's local cluster) and tunnel.
func unsupportedFields(ix *index) []Message {
	var out []Message
	add := func(c *config.Config, field, effect string) {
		out = append(out, msg(c, FieldNotSupported, "%s is not supported by baremeshd; %s", field, effect))
	}
	for _, c := range ix.byKind[config.Sidecar] {
		sc := c.Spec.(*networking.Sidecar)
		for i, in := range sc.GetIngress() {
			if in.GetTls() != nil {
				add(c, fmt.Sprintf("spec.ingress[%d].tls", i), "the sidecar terminates no TLS on this port")
			}
			if in.GetBind() != "" {
				add(c, fmt.Sprintf("spec.ingress[%d].bind", i), "the listener is a captured one")
			}
			if in.GetCaptureMode() != networking.CaptureMode_DEFAULT {
				add(c, fmt.Sprintf("spec.ingress[%d].captureMode", i), "the proxy's interception mode applies")
			}
		}
		for i, eg := range sc.GetEgress() {
			if eg.GetBind() != "" {
				add(c, fmt.Sprintf("spec.egress[%d].bind", i), "the listener is a captured one")
			}
			if eg.GetCaptureMode() != networking.CaptureMode_DEFAULT {
				add(c, fmt.Sprintf("spec.egress[%d].captureMode", i), "the proxy's interception mode applies")
			}
		}
	}
	for _, c := range ix.byKind[config.Gateway] {
		for i, s := range c.Spec.(*networking.Gateway).GetServers() {
			if s.GetBind() != "" {
				add(c, fmt.Sprintf("spec.servers[%d].bind", i), "the server listens on every address of its port")
			}
		}
	}
	for _, c := range ix.byKind[config.DestinationRule] {
		dr := c.Spec.(*networking.DestinationRule)
		policies := []*networking.TrafficPolicy{dr.GetTrafficPolicy()}
		for _, ss := range dr.GetSubsets() {
			policies = append(policies, ss.GetTrafficPolicy())
		}
		for _, tp := range policies {
			lbs := []*networking.LoadBalancerSettings{tp.GetLoadBalancer()}
			for _, pl := range tp.GetPortLevelSettings() {
				lbs = append(lbs, pl.GetLoadBalancer())
			}
			if slices.ContainsFunc(lbs, func(lb *networking.LoadBalancerSettings) bool { return lb.GetZoneAwareLbSetting() != nil }) {
				add(c, "loadBalancer.zoneAwareLbSetting", "no zone-aware routing (it needs Envoy's local cluster)")
			}
			if tp.GetTunnel() != nil {
				add(c, "trafficPolicy.tunnel", "connections are not tunnelled")
			}
		}
	}
	return out
}

// selectedAnywhere: a Gateway selects workloads in every namespace (Istio's
// default PILOT_SCOPE_GATEWAY_TO_NAMESPACE=false).
func (ix *index) selectedAnywhere(sel map[string]string) []workload {
	var out []workload
	for _, w := range ix.workloads {
		if matches(sel, w.labels) {
			out = append(out, w)
		}
	}
	return out
}

// sidecarConflicts: at most one Sidecar without a selector per namespace
// (IST0111) and at most one selecting each workload (IST0110), as Istio's
// SelectorAnalyzer for Sidecars.
func sidecarConflicts(ix *index) []Message {
	var out []Message
	unselected := map[string][]*config.Config{}
	selecting := map[string][]*config.Config{} // workload name -> sidecars
	var order []string
	for _, c := range ix.byKind[config.Sidecar] {
		sel := c.Spec.(*networking.Sidecar).GetWorkloadSelector().GetLabels()
		if len(sel) == 0 {
			unselected[c.Namespace] = append(unselected[c.Namespace], c)
			continue
		}
		for _, w := range ix.selected(c.Namespace, sel) {
			if selecting[w.name] == nil {
				order = append(order, w.name)
			}
			selecting[w.name] = append(selecting[w.name], c)
		}
	}
	for ns, scs := range unselected {
		if len(scs) > 1 {
			for _, c := range scs {
				out = append(out, msg(c, MultipleSidecarsWithoutSelectors, "The Sidecars %v in namespace %q have no workload selector, which can lead to undefined behavior.", names(scs), ns))
			}
		}
	}
	sort.Strings(order)
	for _, w := range order {
		scs := selecting[w]
		if len(scs) > 1 {
			for _, c := range scs {
				out = append(out, msg(c, ConflictingSidecarWorkloadSelectors, "The Sidecars %v in namespace %q select the same workload %q, which can lead to undefined behavior.", names(scs), c.Namespace, w))
			}
		}
	}
	return out
}

func names(cs []*config.Config) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Namespace+"/"+c.Name)
	}
	sort.Strings(out)
	return out
}

// protocols are the names Istio infers a protocol from, as a port name
// or its prefix before "-" (Istio's protocol.Parse).
var protocols = map[string]bool{"grpc": true, "grpc-web": true, "http": true, "http_proxy": true, "http2": true,
	"https": true, "tcp": true, "tls": true, "udp": true, "mongo": true, "redis": true, "mysql": true}

// inferable reports whether Istio can tell a port's protocol from its name.
func inferable(name string) bool {
	n := strings.ToLower(name)
	if protocols[n] {
		return true
	}
	if i := strings.IndexByte(n, '-'); i > 0 {
		return protocols[n[:i]] || (strings.HasPrefix(n, "grpc-web") && protocols["grpc-web"])
	}
	return false
}

// portNames: a ServiceEntry port without a protocol whose name Istio
// cannot infer one from is treated as plain TCP (IST0118, as Istio's
// PortNameAnalyzer for Services).
func portNames(ix *index) []Message {
	var out []Message
	for _, c := range ix.byKind[config.ServiceEntry] {
		for _, p := range c.Spec.(*networking.ServiceEntry).GetPorts() {
			if p.GetProtocol() != "" || inferable(p.GetName()) {
				continue
			}
			target := strconv.Itoa(int(p.GetNumber()))
			if p.GetTargetPort() != 0 {
				target = strconv.Itoa(int(p.GetTargetPort()))
			}
			out = append(out, msg(c, PortNameIsNotUnderNamingConvention,
				"Port name %s (port: %d, targetPort: %s) doesn't follow the naming convention of Istio port.", p.GetName(), p.GetNumber(), target))
		}
	}
	return out
}
