package push

import (
	"time"

	"github.com/baremesh/baremesh/core/model"
)

// OnModelChange queues the push a change of the service model made
// outside the store calls for (Kubernetes Services, EndpointSlices and
// Pods, applied with Registry.ApplyKube): a full push when a service's
// definition changed, else an endpoint push; nothing when nothing
// changed.
func (p *Pipeline) OnModelChange(ch model.Change) {
	if ch.Empty() {
		return
	}
	req := &Request{Start: time.Now(), Reasons: Reasons{}}
	if len(ch.Services) > 0 {
		req.Full = true
		req.Services = ch.Services
		req.Reasons[ReasonKubeService] = 1
	} else {
		req.Reasons[ReasonKubeEndpoint] = 1
	}
	req.Endpoints = ch.Endpoints
	if len(ch.Endpoints) > 0 {
		req.Addresses = ch.Addresses
	}
	p.enqueue(req)
}
