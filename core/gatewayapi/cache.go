package gatewayapi

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/config"
)

// Cache holds the typed specs of one conversion, by the Struct they were
// decoded from. Configs are immutable, so the next conversion reuses
// what it finds and decodes only new or changed objects (decoding is
// most of a conversion's cost). A Cache is used by one conversion at a
// time; the specs in it are never altered.
type Cache struct {
	specs map[*structpb.Struct]any
}

// decode returns cfg's spec as a *T, from c.prev when it holds it.
func decode[T any](c *converter, cfg *config.Config) (*T, error) {
	st, _ := cfg.Spec.(*structpb.Struct)
	if st != nil && c.in.Cache != nil {
		if v, ok := c.in.Cache.specs[st].(*T); ok {
			c.out.Cache.specs[st] = v
			return v, nil
		}
	}
	t := new(T)
	if err := config.DecodeSpec(cfg, t); err != nil {
		return nil, err
	}
	if st != nil {
		c.out.Cache.specs[st] = t
	}
	return t, nil
}
