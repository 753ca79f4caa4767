package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/baremesh/baremesh/nodeagent/cni"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/repair"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// newTunnel builds the node tunnel of cfg (enabled) for the reconciler.
func newTunnel(ctx context.Context, log *slog.Logger, cfg TunnelConfig) (*tunnel.Tunnel, error) {
	t, err := buildTunnel(ctx, log, cfg.Config, cfg.NodeNetNS, cfg.ProxyNetNS, cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	return t, nil
}

// buildTunnel builds a node tunnel between the namespaces nodeNS and
// proxyNS ("" is ours) with the iptables backend named (or detected).
func buildTunnel(ctx context.Context, log *slog.Logger, c tunnel.Config, nodeNS, proxyNS, backend string) (*tunnel.Tunnel, error) {
	b, err := iptables.DetectBackend(ctx, iptables.Backend(backend), nodeNS)
	if err != nil {
		return nil, err
	}
	return tunnel.New(log, c, nodeNS, proxyNS, b)
}

// newRepair builds the repair controller of cfg (enabled) as a
// background component; it reaches the API server only once running.
func newRepair(log *slog.Logger, cfg RepairConfig) (*reconcile.Background, error) {
	cs, err := repair.Client(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	plugin := &cni.PluginConfig{AmbientEnabled: cfg.Ambient}
	plugin.Kubernetes.ExcludeNamespaces = cfg.ExcludeNamespaces
	c, err := repair.New(log, cs, repair.Options{Node: cfg.Node, Mode: repair.Mode(cfg.Mode), Plugin: plugin,
		ReadySince: cfg.ReadySince, DeleteRate: cfg.DeleteRate, DeleteBurst: cfg.DeleteBurst})
	if err != nil {
		return nil, err
	}
	return reconcile.NewBackground("repair", c.Run, func() string {
		return fmt.Sprintf("%d pod events checked, %d pods repaired", c.Checked(), c.Repaired())
	}), nil
}
