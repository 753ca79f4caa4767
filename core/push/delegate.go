package push

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// DelegatingVirtualServices returns the VirtualServices with hosts that
// have an HTTP route delegating to another VirtualService (one without
// hosts), oldest first; none in most meshes, so that callers merge
// delegates only where there are some. Computed once per index.
func (pc *PushContext) DelegatingVirtualServices() []*config.Config {
	ix := pc.kinds[config.VirtualService]
	if ix == nil {
		return nil
	}
	ix.delegOnce.Do(func() {
		for _, c := range pc.ConfigsByAge(config.VirtualService) {
			vs, ok := c.Spec.(*networking.VirtualService)
			if !ok || len(vs.GetHosts()) == 0 {
				continue
			}
			for _, r := range vs.GetHttp() {
				if r.GetDelegate() != nil {
					ix.delegating = append(ix.delegating, c)
					break
				}
			}
		}
	})
	return ix.delegating
}

// VirtualService returns the VirtualService namespace/name, or nil.
func (pc *PushContext) VirtualService(namespace, name string) *config.Config {
	ix := pc.kinds[config.VirtualService]
	if ix == nil {
		return nil
	}
	cs := ix.byNS[namespace]
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
