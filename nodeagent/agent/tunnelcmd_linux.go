package agent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// StandaloneTunnel builds the node tunnel of tf, kept without the agent
// (baremesh-agent tunnel): its Ensure is "up", its Remove "down", and
// KeepTunnel is "run". It refuses a caller that is not root.
func StandaloneTunnel(ctx context.Context, log *slog.Logger, tf TunnelFile) (*tunnel.Tunnel, error) {
	if err := iptables.CheckRoot(); err != nil {
		return nil, err
	}
	return buildTunnel(ctx, log, tf.Config, tf.NodeNetNS, tf.ProxyNetNS, tf.Backend)
}

// KeepTunnel keeps tun in place as a reconcile component, a pass every
// interval, until ctx ends; then it removes the tunnel.
func KeepTunnel(ctx context.Context, log *slog.Logger, tun *tunnel.Tunnel, interval time.Duration) error {
	rec := reconcile.New(log.With("component", "reconciler"), reconcile.Options{Interval: interval}, reconcile.NewTunnel(tun))
	_ = rec.Run(ctx) // it returns when ctx ends
	if err := tun.Remove(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("removing the tunnel: %w", err)
	}
	return nil
}
