package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// memApplier stands in for iptables.Applier; the real one is exercised
// against real iptables in nodeagent/iptables and nodeagent/agent.
type memApplier struct {
	applied  *iptables.Ruleset
	applies  int
	drift    iptables.Drift
	applyErr error
}

func (m *memApplier) Apply(_ context.Context, rs *iptables.Ruleset) error {
	m.applies++
	if m.applyErr != nil {
		return m.applyErr
	}
	m.applied = rs
	return nil
}

func (m *memApplier) Repair(context.Context) (iptables.Drift, error) {
	d := m.drift
	m.drift = iptables.Drift{}
	return d, nil
}

func (m *memApplier) Applied() *iptables.Ruleset { return m.applied }

func TestCaptureComponent(t *testing.T) {
	rs, err := iptables.Render(iptables.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := &memApplier{applyErr: errors.New("iptables-restore: exit 1")}
	c := NewCapture(m, rs)
	if s := c.Reconcile(context.Background()); s.State != StateError || !strings.Contains(s.Reason, "exit 1") {
		t.Errorf("failed apply: %+v", s)
	}
	m.applyErr = nil
	if s := c.Reconcile(context.Background()); s.State != StateReady || s.Reason != "rules applied" {
		t.Errorf("apply: %+v", s)
	}
	if s := c.Reconcile(context.Background()); s.Reason != "rules in place" || m.applies != 2 {
		t.Errorf("steady state: %+v after %d applies", s, m.applies)
	}
	m.drift = iptables.Drift{Families: []iptables.Family{iptables.V4}}
	if s := c.Reconcile(context.Background()); s.State != StateReady || !strings.Contains(s.Reason, "repaired drift (ipv4 rules changed)") {
		t.Errorf("drift: %+v", s)
	}
}
