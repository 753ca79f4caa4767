package daemon

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/sources/file"
)

// setNetworks gives the pipeline the meshNetworks n (nil: none).
func (d *Daemon) setNetworks(n *meshv1alpha1.MeshNetworks) { d.pipeline.SetNetworks(n) }

// watchNetworks follows the meshNetworks file as watchMesh follows the
// mesh config: a bad version is refused with a logged reason and the
// last good one stays; removing the file means one network.
func (d *Daemon) watchNetworks(ctx context.Context, last *meshv1alpha1.MeshNetworks) {
	if d.cfg.MeshNetworks == "" {
		return
	}
	rejects := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baremesh_mesh_networks_rejects_total",
		Help: "Times an edit of the meshNetworks file was refused; the last good networks stayed in force.",
	})
	d.reg.MustRegister(rejects)
	err := file.WatchFile(ctx, d.cfg.MeshNetworks, func(data []byte, err error) {
		var n *meshv1alpha1.MeshNetworks
		switch {
		case err != nil:
			d.log.Warn("mesh networks unreadable; keeping the last good ones", "file", d.cfg.MeshNetworks, "err", err)
			return
		case data != nil:
			if n, err = config.ParseMeshNetworks(data, d.cfg.MeshNetworks); err != nil {
				d.log.Warn("mesh networks rejected; keeping the last good ones", "err", err)
				rejects.Inc()
				return
			}
		}
		if protoEqual(last, n) {
			return
		}
		d.log.Info("mesh networks changed", "file", d.cfg.MeshNetworks, "networks", len(n.GetNetworks()))
		d.setNetworks(n)
		last = n
	})
	if err != nil {
		d.log.Info("mesh networks not watched", "file", d.cfg.MeshNetworks, "reason", err)
	}
}

// networkz serves /debug/networkz (istiod's name): the network gateways
// in force, and those of the meshNetworks file left out, with why.
func (d *Daemon) networkz(w http.ResponseWriter, _ *http.Request) {
	var g *model.NetworkGateways
	if pc := d.pipeline.Current(); pc != nil {
		g = pc.Networks
	}
	out := struct {
		File     string                 `json:"file"`
		Gateways []model.NetworkGateway `json:"gateways"`
		Skipped  []string               `json:"skipped,omitempty"`
	}{File: d.cfg.MeshNetworks, Gateways: g.All()}
	if g != nil {
		out.Skipped = g.Skipped
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// gatewayResolveEvery is how often network gateway hostnames are resolved
// again (an AWS load balancer's addresses change).
const gatewayResolveEvery = 30 * time.Second

// gatewayNames keeps the network gateways given by hostname (in
// meshNetworks, or a gateway Service's load balancer) resolved, as
// istiod does: when a snapshot names other hostnames than the last, and
// every gatewayResolveEvery, each is resolved (5 s at most) and the
// pipeline gets the IPs when they changed. A name that fails keeps its
// last IPs, and says why.
type gatewayNames struct {
	wake   chan struct{}
	lookup func(ctx context.Context, host string) ([]net.IPAddr, error)
	mu     sync.Mutex
	seen   []string // the latest snapshot's NetworkGateways.Names
}

// lookupGatewayName resolves a gateway hostname; New gives it to the
// daemon's gatewayNames (tests set their own before New: their hosts
// must not need a network).
var lookupGatewayName = net.DefaultResolver.LookupIPAddr

// watch is the pipeline listener (added in New): it wakes run when a
// snapshot names other hostnames.
func (g *gatewayNames) watch(pc *push.PushContext, _ *push.Request) {
	var names []string
	if pc.Networks != nil {
		names = pc.Networks.Names
	}
	g.mu.Lock()
	changed := !slices.Equal(names, g.seen)
	g.seen = names
	g.mu.Unlock()
	if changed {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

func (d *Daemon) resolveGatewayNames(ctx context.Context, g *gatewayNames) {
	resolved := map[string][]string{}
	t := time.NewTicker(gatewayResolveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
		case <-t.C:
		}
		g.mu.Lock()
		names := g.seen
		g.mu.Unlock()
		next := make(map[string][]string, len(names))
		for _, name := range names {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			addrs, err := g.lookup(rctx, name)
			cancel()
			if err != nil || len(addrs) == 0 {
				d.log.Warn("network gateway hostname did not resolve; its last addresses stay", "name", name, "err", err, "last", resolved[name])
				if last := resolved[name]; last != nil {
					next[name] = last
				}
				continue
			}
			ips := make([]string, 0, len(addrs))
			for _, a := range addrs {
				ips = append(ips, a.IP.String())
			}
			slices.Sort(ips)
			next[name] = slices.Compact(ips)
		}
		if !maps.EqualFunc(next, resolved, slices.Equal) {
			resolved = next
			d.pipeline.SetGatewayNames(next)
		}
	}
}
