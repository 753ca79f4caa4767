package gatewayapi

import (
	"github.com/baremesh/baremesh/core/config/gwapi"
)

type grant struct {
	toNS string
	spec gwapi.ReferenceGrantSpec
}

func (c *converter) indexGrants() {
	for i := range c.in.Grants {
		g := &c.in.Grants[i]
		s, err := decode[gwapi.ReferenceGrantSpec](c, g)
		if err != nil {
			continue
		}
		c.grants = append(c.grants, grant{toNS: g.Namespace, spec: *s})
	}
}

// allowed reports whether an object of fromKind (group
// gateway.networking.k8s.io) in fromNS may refer to the object
// toGroup/toKind/toName in toNS: always within a namespace, else only by
// a ReferenceGrant in toNS.
func (c *converter) allowed(toGroup, toKind, toName, toNS, fromKind, fromNS string) bool {
	if toNS == fromNS {
		return true
	}
	for _, g := range c.grants {
		if g.toNS != toNS {
			continue
		}
		from := false
		for _, f := range g.spec.From {
			if f.Group == gwapi.Group && f.Kind == fromKind && f.Namespace == fromNS {
				from = true
			}
		}
		if !from {
			continue
		}
		for _, t := range g.spec.To {
			if t.Group == toGroup && t.Kind == toKind && (t.Name == nil || *t.Name == toName) {
				return true
			}
		}
	}
	return false
}
