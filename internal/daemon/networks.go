package daemon

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/sources/file"
)

// setNetworks gives the pipeline the gateways of n (nil: none), logging
// the gateways it cannot use.
func (d *Daemon) setNetworks(n *meshv1alpha1.MeshNetworks) {
	g := model.NewNetworkGateways(n, nil)
	for _, s := range g.Skipped {
		d.log.Warn("mesh networks: gateway left out", "file", d.cfg.MeshNetworks, "gateway", s)
	}
	d.pipeline.SetNetworks(n)
}

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
