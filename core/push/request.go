package push

import (
	"maps"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// Request is one push: what changed and why. Requests merge.
type Request struct {
	// Full is set when anything but endpoints changed: proxies may need
	// every type regenerated.
	Full bool
	// Configs are the configs that changed (full pushes).
	Configs map[config.Key]bool
	// Services are services whose definition changed (full pushes).
	Services map[model.ServiceKey]bool
	// Endpoints are services whose endpoints alone changed.
	Endpoints map[model.ServiceKey]bool
	// Addresses are the endpoint addresses those changes touched: a proxy
	// at one of them gets a full push (its inbound config may change).
	Addresses map[string]bool
	// GatewayOnly marks changed VirtualServices bound only to gateways,
	// before and after the change: sidecars need no push for them.
	GatewayOnly map[config.Key]bool
	// Reasons count why the push happened.
	Reasons Reasons
	// Start is when the first change merged into this request happened.
	Start time.Time
}

// Merge folds o into r (r may be nil) and returns the result.
func (r *Request) Merge(o *Request) *Request {
	if r == nil {
		return o.clone()
	}
	if o == nil {
		return r
	}
	gatewayOnly := mergeGatewayOnly(r, o)
	out := r.clone()
	out.GatewayOnly = gatewayOnly
	out.Full = out.Full || o.Full
	out.Configs = mergeSet(out.Configs, o.Configs)
	out.Services = mergeSet(out.Services, o.Services)
	out.Endpoints = mergeSet(out.Endpoints, o.Endpoints)
	out.Addresses = mergeSet(out.Addresses, o.Addresses)
	for k, v := range o.Reasons {
		if out.Reasons == nil {
			out.Reasons = Reasons{}
		}
		out.Reasons[k] += v
	}
	if !o.Start.IsZero() && (out.Start.IsZero() || o.Start.Before(out.Start)) {
		out.Start = o.Start
	}
	return out
}

func (r *Request) clone() *Request {
	c := *r
	c.Configs = maps.Clone(r.Configs)
	c.Services = maps.Clone(r.Services)
	c.Endpoints = maps.Clone(r.Endpoints)
	c.Addresses = maps.Clone(r.Addresses)
	c.GatewayOnly = maps.Clone(r.GatewayOnly)
	c.Reasons = maps.Clone(r.Reasons)
	return &c
}

func mergeSet[K comparable](a, b map[K]bool) map[K]bool {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = make(map[K]bool, len(b))
	}
	for k := range b {
		a[k] = true
	}
	return a
}

// KindsChanged returns the kinds among r.Configs.
func (r *Request) KindsChanged() map[config.Kind]bool {
	out := map[config.Kind]bool{}
	for k := range r.Configs {
		out[k.Kind] = true
	}
	return out
}

// mergeGatewayOnly keeps a key gateway-only only if every merged request
// that changed it says so.
func mergeGatewayOnly(r, o *Request) map[config.Key]bool {
	out := map[config.Key]bool{}
	for k := range r.GatewayOnly {
		if !o.Configs[k] || o.GatewayOnly[k] {
			out[k] = true
		}
	}
	for k := range o.GatewayOnly {
		if !r.Configs[k] || r.GatewayOnly[k] {
			out[k] = true
		}
	}
	return out
}
