package agent

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baremesh/baremesh/nodeagent/cni"
	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/repair"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// newTunnel builds the node tunnel of cfg (enabled) for the reconciler.
func newTunnel(ctx context.Context, log *slog.Logger, cfg TunnelConfig) (*tunnel.Tunnel, error) {
	b, err := iptables.DetectBackend(ctx, iptables.Backend(cfg.Backend), cfg.NodeNetNS)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	t, err := tunnel.New(log, cfg.Config, cfg.NodeNetNS, cfg.ProxyNetNS, b)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	return t, nil
}

// newRepair builds the repair controller of cfg (enabled) as a
// background component; it reaches the API server only once running.
func newRepair(log *slog.Logger, cfg RepairConfig) (*reconcile.Background, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("repair.kubeconfig: %w", err)
	}
	rc.UserAgent = "baremesh-agent-repair"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("repair: kubernetes client: %w", err)
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
