package cni

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// NetnsCapturer applies rules with the host-mode iptables code from a
// thread switched into the pod's namespace; iptables-restore children
// fork from that thread and so run inside it.
type NetnsCapturer struct{}

var _ Capturer = NetnsCapturer{}

// Apply implements Capturer.
func (NetnsCapturer) Apply(ctx context.Context, path string, backend iptables.Backend, rs *iptables.Ruleset) error {
	return inNetNS(path, func() error {
		a, err := applier(ctx, backend)
		if err != nil {
			return err
		}
		return a.Apply(ctx, rs)
	})
}

// Remove implements Capturer.
func (NetnsCapturer) Remove(ctx context.Context, path string, backend iptables.Backend, prefix string) error {
	return inNetNS(path, func() error {
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

// inNetNS runs fn on this goroutine's thread switched into the namespace
// at path and switches back.
func inNetNS(path string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current netns: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Keep the thread locked: the runtime drops it when the
		// goroutine ends instead of reusing it in the wrong namespace.
		return fmt.Errorf("leaving netns %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return ferr
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
