package reconcile

import (
	"context"
	"strings"
)

// TunnelEnsurer is what the tunnel component needs of nodeagent/tunnel's
// Tunnel: bring both ends to the desired state, saying what changed.
type TunnelEnsurer interface {
	Ensure(ctx context.Context) (changed []string, err error)
}

// Tunnel keeps the node tunnel (ambient redirection) in place.
type Tunnel struct {
	t TunnelEnsurer
}

// NewTunnel returns the tunnel component.
func NewTunnel(t TunnelEnsurer) *Tunnel { return &Tunnel{t: t} }

// Name implements Component.
func (c *Tunnel) Name() string { return "tunnel" }

// Reconcile implements Component.
func (c *Tunnel) Reconcile(ctx context.Context) Status {
	changed, err := c.t.Ensure(ctx)
	switch {
	case err != nil:
		return Error("%v", err)
	case len(changed) > 0:
		return Ready("repaired: %s", strings.Join(changed, ", "))
	}
	return Ready("tunnel in place")
}
