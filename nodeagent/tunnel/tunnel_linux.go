package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// Tunnel is both ends: the node's namespace and the proxy's. Ensure and
// Remove are called from one goroutine at a time.
type Tunnel struct {
	desired     Desired
	node, proxy *Executor
}

// New builds the desired state for cfg and executors for the node's
// namespace (nodeNS, "" for the agent's own) and the proxy's (proxyNS).
func New(log *slog.Logger, cfg Config, nodeNS, proxyNS string, b iptables.Backend) (*Tunnel, error) {
	d, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	return &Tunnel{desired: d,
		node:  NewExecutor(log.With("side", "node"), nodeNS, b),
		proxy: NewExecutor(log.With("side", "proxy"), proxyNS, b)}, nil
}

// Desired returns the state the tunnel keeps; it must not be altered.
func (t *Tunnel) Desired() Desired { return t.desired }

// Ensure brings both ends to the desired state and says what it changed.
// The proxy's end goes first, so marked packets never meet a tunnel
// with no listener behind it longer than needed.
func (t *Tunnel) Ensure(ctx context.Context) ([]string, error) {
	var changed []string
	for _, side := range []struct {
		name string
		e    *Executor
		s    Side
	}{{"proxy", t.proxy, t.desired.Proxy}, {"node", t.node, t.desired.Node}} {
		c, err := side.e.Ensure(ctx, side.s)
		for _, x := range c {
			changed = append(changed, side.name+": "+x)
		}
		if err != nil {
			return changed, fmt.Errorf("tunnel %s side: %w", side.name, err)
		}
	}
	gone, err := t.node.enrol.SweepStale(ctx)
	if len(gone) > 0 {
		changed = append(changed, fmt.Sprintf("node: swept stale enrolments of pods gone without a DEL %v", gone))
	}
	if err != nil {
		return changed, fmt.Errorf("tunnel node side: sweeping stale enrolments: %w", err)
	}
	return changed, nil
}

// Remove takes the node's redirection out first (traffic goes direct
// again at once), then the proxy's end.
func (t *Tunnel) Remove(ctx context.Context) error {
	var errs []error
	if err := t.node.Remove(ctx, t.desired.Node); err != nil {
		errs = append(errs, fmt.Errorf("tunnel node side: %w", err))
	}
	if err := t.proxy.Remove(ctx, t.desired.Proxy); err != nil {
		errs = append(errs, fmt.Errorf("tunnel proxy side: %w", err))
	}
	return errors.Join(errs...)
}
