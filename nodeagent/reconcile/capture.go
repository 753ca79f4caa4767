package reconcile

import (
	"context"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// CaptureApplier is what the capture component needs of
// iptables.Applier.
type CaptureApplier interface {
	Apply(ctx context.Context, rs *iptables.Ruleset) error
	Repair(ctx context.Context) (iptables.Drift, error)
	Applied() *iptables.Ruleset
}

var _ CaptureApplier = (*iptables.Applier)(nil)

// Capture keeps the host's capture rules as desired: it applies them when
// they are not the ones last applied, else repairs drift.
type Capture struct {
	applier CaptureApplier
	desired *iptables.Ruleset
}

// NewCapture returns the capture component for a rendered ruleset.
func NewCapture(a CaptureApplier, desired *iptables.Ruleset) *Capture {
	return &Capture{applier: a, desired: desired}
}

// Name implements Component.
func (c *Capture) Name() string { return "capture" }

// Reconcile implements Component.
func (c *Capture) Reconcile(ctx context.Context) Status {
	if c.applier.Applied() != c.desired {
		if err := c.applier.Apply(ctx, c.desired); err != nil {
			return Error("apply: %v", err)
		}
		return Ready("rules applied")
	}
	d, err := c.applier.Repair(ctx)
	if err != nil {
		return Error("drift repair: %v", err)
	}
	if d.Any() {
		return Ready("repaired drift (%s)", d)
	}
	return Ready("rules in place")
}
