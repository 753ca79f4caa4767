package daemon

import (
	"context"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/sources/kube"
)

var gatewayAPIKinds = []config.Kind{config.GatewayClass, config.KubernetesGateway, config.HTTPRoute,
	config.GRPCRoute, config.TCPRoute, config.TLSRoute}

// gatewayStatusListener writes the status of the Gateway API objects read
// from Kubernetes back to their clusters after each snapshot (issue #28),
// from its own goroutine: a push never waits for an API server, and only
// the latest snapshot's status is written when writes fall behind.
func (d *Daemon) gatewayStatusListener(ctx context.Context, src *kube.Source, goRun func(func())) push.Listener {
	latest := make(chan *push.PushContext, 1)
	goRun(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case pc := <-latest:
				st := pc.GatewayAPIStatus()
				if len(st) == 0 {
					continue
				}
				var all []kube.GatewayStatus
				for _, k := range gatewayAPIKinds {
					cs := pc.Configs(k)
					for i := range cs {
						if s := st[cs[i].Key()]; s != nil {
							all = append(all, kube.GatewayStatus{Config: &cs[i], Status: s})
						}
					}
				}
				if err := src.WriteGatewayStatus(ctx, all); err != nil {
					d.log.Warn("Gateway API status not written; retried at the next push", "err", err)
				}
			}
		}
	})
	return func(pc *push.PushContext, _ *push.Request) {
		for {
			select {
			case latest <- pc:
				return
			default:
				select { // drop the unwritten older snapshot
				case <-latest:
				default:
				}
			}
		}
	}
}
