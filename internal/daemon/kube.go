package daemon

import (
	"context"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/sources/kube"
)

// startKube adds the Kubernetes source when the config names a clusters
// directory: its Istio resources join the aggregate (below the config
// directories), its Services, EndpointSlices and Pods go to the push
// pipeline (the one way into the service model, as the store's events).
// The mesh config's discoverySelectors choose the namespaces
// (kubeMeshChanged follows them).
func (d *Daemon) startKube(ctx context.Context, goRun func(func())) {
	if d.cfg.Clusters == "" {
		return
	}
	sink := d.agg.AddSource("kube")
	src, err := kube.New(kube.Options{
		// The mesh config in force (the watcher's last good one), never a
		// new read of the file: an edit since may be bad.
		Dir: d.cfg.Clusters, Domain: d.cfg.ClusterDomain, DiscoverySelectors: d.pipeline.Mesh().GetDiscoverySelectors(),
		Model:  d.pipeline.OnKube,
		Logger: d.log.With("component", "kube"), Metrics: kube.NewMetrics(d.reg),
	}, sink)
	if err != nil {
		d.log.Error("Kubernetes source not started", "err", err)
		sink.Synced()
		return
	}
	d.kube.Store(src)
	d.pipeline.AddListener(d.gatewayStatusListener(ctx, src, goRun))
	goRun(func() {
		if err := src.Run(ctx); err != nil {
			d.log.Error("Kubernetes source stopped", "err", err)
		}
	})
}

// KubeStatus returns the Kubernetes clusters' state (nil without them).
func (d *Daemon) KubeStatus() []kube.ClusterStatus {
	src := d.kube.Load()
	if src == nil {
		return nil
	}
	return src.Status()
}

// kubeMeshChanged hands a new mesh config's discoverySelectors to the
// Kubernetes source.
func (d *Daemon) kubeMeshChanged(m *meshv1alpha1.MeshConfig) {
	src := d.kube.Load()
	if src == nil {
		return
	}
	if err := src.SetDiscoverySelectors(m.GetDiscoverySelectors()); err != nil {
		d.log.Warn("mesh config's discoverySelectors refused; the namespaces selected stay", "err", err)
	}
}
