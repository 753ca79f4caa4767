package scope

import (
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
)

// MTLSMode is an effective PeerAuthentication mode: never UNSET.
type MTLSMode = security.PeerAuthentication_MutualTLS_Mode

// Effective PeerAuthentication modes.
const (
	MTLSPermissive = security.PeerAuthentication_MutualTLS_PERMISSIVE
	MTLSStrict     = security.PeerAuthentication_MutualTLS_STRICT
	MTLSDisable    = security.PeerAuthentication_MutualTLS_DISABLE
)

// PeerAuthn is the PeerAuthentication that applies to a workload, composed
// as Istio does: the mesh policy (root namespace, no selector), the
// namespace policy (no selector) and the workload policy (a selector
// matching its labels) in turn override what is above them unless UNSET;
// the workload policy's port-level modes override per port. Of several
// policies at one level the oldest wins, then the first by name (files
// without a creationTimestamp are all of one age), as istiod's
// ComposePeerAuthentication; a policy with a selector in the root
// namespace is no workload's. Without any, PERMISSIVE.
type PeerAuthn struct {
	Mode  MTLSMode
	Ports map[uint32]MTLSMode
}

// PortMode is the mode for a workload port (the target port).
func (a PeerAuthn) PortMode(port uint32) MTLSMode {
	if m, ok := a.Ports[port]; ok {
		return m
	}
	return a.Mode
}

// PeerAuthnFor composes the policies for a workload in namespace ns with
// labels.
func PeerAuthnFor(pc *push.PushContext, ns string, labels map[string]string) PeerAuthn {
	out := PeerAuthn{Mode: MTLSPermissive}
	set := func(m *security.PeerAuthentication_MutualTLS) {
		if m := m.GetMode(); m != security.PeerAuthentication_MutualTLS_UNSET {
			out.Mode = m
		}
	}
	root := RootNamespace(pc)
	set(first(pc.ConfigsInByAge(config.PeerAuthentication, root), nil, false).GetMtls())
	if ns == root {
		return out
	}
	inNS := pc.ConfigsInByAge(config.PeerAuthentication, ns)
	set(first(inNS, nil, false).GetMtls())
	w := first(inNS, labels, true)
	if w == nil {
		return out
	}
	set(w.GetMtls())
	for port, m := range w.GetPortLevelMtls() {
		if m.GetMode() == security.PeerAuthentication_MutualTLS_UNSET {
			continue
		}
		if out.Ports == nil {
			out.Ports = map[uint32]MTLSMode{}
		}
		out.Ports[port] = m.GetMode()
	}
	return out
}

// ServiceMTLS is the mode a client may assume for a service's workloads
// in namespace ns: the namespace or mesh policy (Istio's best-effort
// inference; workload and port policies are not known to the client).
func ServiceMTLS(pc *push.PushContext, ns string) MTLSMode {
	return PeerAuthnFor(pc, ns, nil).Mode
}

// first is the first policy without a selector (withSelector false), or
// the first whose non-empty selector matches labels (withSelector true).
func first(cs []*config.Config, labels map[string]string, withSelector bool) *security.PeerAuthentication {
	for _, c := range cs {
		pa := c.Spec.(*security.PeerAuthentication)
		sel := pa.GetSelector().GetMatchLabels()
		if !withSelector && len(sel) == 0 {
			return pa
		}
		if withSelector && len(sel) > 0 && labels != nil && LabelsMatch(sel, labels) {
			return pa
		}
	}
	return nil
}
