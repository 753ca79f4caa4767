package workloads

import (
	"context"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// FollowGroups is the controller's loop: it rebuilds the entries from
// their WorkloadGroups (Resync) once synced is closed (every source has
// delivered its first state), and again after every change of a
// WorkloadGroup that w (the aggregate) reports, until ctx ends; then it
// stops the controller. It subscribes before it reads, so a change made
// while it waits for synced is in the first rebuild or wakes a later
// one. The rebuild runs on this goroutine, never in w's handler: it
// writes the store.
func (c *Controller) FollowGroups(ctx context.Context, w store.Watcher, synced <-chan struct{}) {
	defer c.Stop()
	changed := make(chan struct{}, 1)
	w.Subscribe(func(events []store.Event) {
		for _, e := range events {
			if e.Key().Kind == config.WorkloadGroup {
				select {
				case changed <- struct{}{}:
				default:
				}
				return
			}
		}
	})
	select {
	case <-synced:
	case <-ctx.Done():
		return
	}
	c.Resync()
	for {
		select {
		case <-changed:
			c.Resync()
		case <-ctx.Done():
			return
		}
	}
}
