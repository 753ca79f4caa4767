package cni

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/nsexec"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// NetnsCapturer applies rules with the host-mode iptables code from a
// thread switched into the pod's namespace; iptables-restore children
// fork from that thread and so run inside it.
type NetnsCapturer struct{}

var _ Capturer = NetnsCapturer{}

// Apply implements Capturer.
func (NetnsCapturer) Apply(ctx context.Context, path string, backend iptables.Backend, rs *iptables.Ruleset) error {
	return nsexec.Do(path, func() error {
		a, err := applier(ctx, backend)
		if err != nil {
			return err
		}
		return a.Apply(ctx, rs)
	})
}

// Remove implements Capturer.
func (NetnsCapturer) Remove(ctx context.Context, path string, backend iptables.Backend, prefix string) error {
	return nsexec.Do(path, func() error {
		a, err := applier(ctx, backend)
		if err != nil {
			return err
		}
		return a.Uninstall(ctx, prefix, &iptables.Route{Mark: iptables.DefaultTProxyMark, Table: iptables.DefaultTProxyTable})
	})
}

func applier(ctx context.Context, backend iptables.Backend) (*iptables.Applier, error) {
	b, err := iptables.DetectBackend(ctx, backend, "")
	if err != nil {
		return nil, fmt.Errorf("iptables backend: %w", err)
	}
	return iptables.NewApplier(slog.New(slog.NewTextHandler(io.Discard, nil)), iptables.ApplierOptions{
		Runner: &iptables.ExecRunner{Backend: b}, Router: &iptables.NetlinkRouter{}}), nil
}

// NewTunnelEnroller enrols ambient pods in the node tunnel's chain of the
// current (the node's) namespace, with the configured or detected backend.
func NewTunnelEnroller(ctx context.Context, cfg *PluginConfig) (Enroller, error) {
	b, err := iptables.DetectBackend(ctx, cfg.IptablesBackend, "")
	if err != nil {
		return nil, err
	}
	return &tunnel.Enroller{Backend: b, Mark: cfg.AmbientMark, LockPath: cfg.EnrolLock}, nil
}
