package reconcile

import (
	"context"
	"errors"
	"testing"
)

type fakeTunnel struct {
	changed []string
	err     error
}

func (f *fakeTunnel) Ensure(context.Context) ([]string, error) { return f.changed, f.err }

func TestTunnelComponent(t *testing.T) {
	for _, tc := range []struct {
		f    fakeTunnel
		want Status
	}{
		{fakeTunnel{}, Ready("tunnel in place")},
		{fakeTunnel{changed: []string{"node: link bmtun0 up"}}, Ready("repaired: node: link bmtun0 up")},
		{fakeTunnel{err: errors.New("tunnel node side: boom")}, Error("tunnel node side: boom")},
	} {
		if got := NewTunnel(&tc.f).Reconcile(context.Background()); got != tc.want {
			t.Errorf("Reconcile = %+v, want %+v", got, tc.want)
		}
	}
}
