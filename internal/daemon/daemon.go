package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/workloads"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/file"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/debug"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Daemon is a running baremeshd.
type Daemon struct {
	cfg     daemonconfig.Config
	pushes  atomic.Uint64  // snapshots published (idletrim.go)
	cluster *cluster.Table // the registration table, replicated or of one (cluster.go)
	log     *slog.Logger
	// networks: the meshNetworks New loaded (nil: none), watchNetworks'
	// baseline.
	networks *meshv1alpha1.MeshNetworks
	gwNames  *gatewayNames // networks.go
	reg      *registry
	agg      *store.Aggregate
	own      *store.Memory
	registry *model.Registry
	pipeline *push.Pipeline
	grpc     *grpc.Server
	xds      *ads.Server

	xdsLis, httpLis net.Listener
	extra           []route
	id              *identityParts // nil when tlsAddr is unset (identity.go)
	wl              *workloads.Controller
	kube            atomic.Pointer[kube.Source] // nil without clusters; set by Run, read by HTTP and CA handlers
	upstreams       []*mcp.Upstream             // set in Run before the HTTP server starts

	jwks atomic.Pointer[jwks.Fetcher] // set by Run (jwks.go)
}

// New builds a daemon from cfg and opens its listeners, so a caller knows
// the bound addresses (":0" picks a free port) before Run.
func New(cfg daemonconfig.Config, log *slog.Logger) (*Daemon, error) {
	d := &Daemon{cfg: cfg, log: log, reg: newRegistry(), agg: store.NewAggregate(), own: store.NewMemory()}
	// go_sched_latencies_seconds (how long goroutines waited, runnable,
	// for a CPU) tells a daemon short of CPU from a slow handler.
	d.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mesh, err := config.LoadMeshConfig(cfg.MeshConfig)
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	d.registry = model.NewRegistry(model.NewAllocator())
	d.pipeline = push.NewPipeline(d.agg, d.registry, mesh, push.PipelineOptions{
		Debounce: cfg.Debounce.Duration, DebounceMax: cfg.DebounceMax.Duration, DebounceLeading: cfg.DebounceLeading,
		EndpointsBypassDebounce: true, Logger: log.With("component", "push"),
	})
	d.agg.Subscribe(d.pipeline.OnEvents)
	if cfg.MeshNetworks != "" {
		if d.networks, err = config.LoadMeshNetworks(cfg.MeshNetworks); err != nil {
			return nil, fmt.Errorf("mesh networks: %w", err)
		}
		if d.networks != nil {
			d.setNetworks(d.networks)
		}
	}
	if err := daemonconfig.CheckPlaintextXDS(cfg); err != nil {
		return nil, err
	}
	if err := daemonconfig.CheckDebugHTTP(cfg); err != nil {
		return nil, err
	}
	// Auto-registration goes through the table (a table of one without
	// a cluster), so it starts before the controller.
	if err := d.startCluster(); err != nil {
		return nil, err
	}
	if err := d.setupWorkloads(); err != nil {
		d.abortCluster()
		return nil, err
	}
	if d.xdsLis, err = net.Listen("tcp", cfg.XDSAddr); err != nil {
		d.abortCluster()
		return nil, fmt.Errorf("xds listener: %w", err)
	}
	if d.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		d.xdsLis.Close()
		d.abortCluster()
		return nil, fmt.Errorf("http listener: %w", err)
	}
	d.grpc = grpc.NewServer(xdsServerOptions(cfg)...)
	d.xds = ads.New(d.pipeline, ads.Options{
		Types:  xdstype.All,
		Logger: log.With("component", "xds"), Registerer: d.reg,
		Hooks:          d.xdsHooks(),
		ConvergenceSLO: cfg.ConvergenceSLO.Duration,
		SendTimeout:    cfg.XDSSendTimeout.Duration, MaxStreamsPerConnection: cfg.MaxStreamsPerConnection, MaxStreamsPerPeer: cfg.MaxStreamsPerPeer,
	})
	d.xds.Register(d.grpc)
	if err := d.setupIdentity(mesh); err != nil {
		d.xdsLis.Close()
		d.httpLis.Close()
		d.abortCluster()
		return nil, fmt.Errorf("identity: %w", err)
	}
	if d.id != nil {
		d.pipeline.SetTrustRoots(d.id.ca.RootPEM()) // the trust bundle agents get over PCDS (xdstype.ProxyConfig)
	}
	d.pipeline.AddListener(d.xds.OnPush)
	d.pipeline.AddListener(func(*push.PushContext, *push.Request) { d.pushes.Add(1) }) // idletrim.go
	d.gwNames = &gatewayNames{wake: make(chan struct{}, 1), lookup: lookupGatewayName}
	d.pipeline.AddListener(d.gwNames.watch) // networks.go
	d.Handle("/debug/syncz", debug.SyncHandler(d.xds))
	d.Handle("/debug/config_dump", debug.ConfigDumpHandler(redactedDumps{d.xds})) // http.go
	d.Handle("/debug/pushz", debug.PushzHandler(d.xds))
	d.Handle("/debug/networkz", http.HandlerFunc(d.networkz)) // networks.go
	d.Handle("/debug/diff", http.HandlerFunc(d.diffHandler))  // dryrun.go
	return d, nil
}

// xdsServerOptions are the gRPC options of both xDS ports: our codec,
// keepalive as istiod's (a ping after 30 s without a frame from the
// client, 10 s for its answer; the answer comes from the client's
// transport, not from its xDS code, so a busy but live client answers),
// clients may ping every 10 s, requests up to 16 MB, and at most
// openStreamLimit streams open on a connection.
func xdsServerOptions(cfg daemonconfig.Config) []grpc.ServerOption {
	opts := append(wire.GRPCServerOptions(),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(16<<20))
	if n := openStreamLimit(cfg.MaxStreamsPerConnection); n > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(n))
	}
	return opts
}

// openStreamLimit is the HTTP/2 limit of the streams a connection may
// hold open (SETTINGS_MAX_CONCURRENT_STREAMS): twice maxStreamsPerConnection
// (0: its default), none if that cap is off. The cap counts the streams
// that have sent their first request, and refuses one over it with
// RESOURCE_EXHAUSTED; a stream that never sends one is not counted, and
// costs two goroutines for as long as its client keeps it. Past the
// limit a client waits for one of its streams to end.
func openStreamLimit(perConn int) uint32 {
	switch {
	case perConn < 0:
		return 0
	case perConn == 0:
		perConn = ads.DefaultMaxStreamsPerConnection
	}
	return uint32(2 * perConn)
}

// XDSAddr and HTTPAddr are the bound listen addresses.
func (d *Daemon) XDSAddr() string  { return d.xdsLis.Addr().String() }
func (d *Daemon) HTTPAddr() string { return d.httpLis.Addr().String() }

// Pipeline returns the push pipeline (for the xDS server and tests).
func (d *Daemon) Pipeline() *push.Pipeline { return d.pipeline }

// Run serves until ctx ends, then stops gracefully.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goRun := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	defer d.stopCluster()

	fileMetrics := file.NewMetrics(d.reg)
	var watchers []*file.Watcher
	for _, dir := range d.cfg.ConfigDirs {
		sink := d.agg.AddSource("file:" + dir)
		watchers = append(watchers, file.New(file.Options{
			Dirs: []string{dir}, Name: "file:" + dir, MaxFileSize: d.cfg.MaxFileSize,
			MaxDocuments: d.cfg.MaxDocuments, MaxNodes: d.cfg.MaxNodes,
			Coalesce: d.cfg.FileCoalesce.Duration, Logger: d.log.With("component", "file"), Metrics: fileMetrics,
		}, sink))
	}
	if len(d.cfg.MCP) > 0 { // after the files, before the clusters: the precedence
		mcpMetrics := mcp.NewMetrics(d.reg)
		for _, uc := range d.cfg.MCP {
			u := mcp.New(uc, mcp.Options{Logger: d.log.With("component", "mcp"), Metrics: mcpMetrics}, d.agg.AddSource(mcp.SourceName(uc.Name)))
			d.upstreams = append(d.upstreams, u)
			goRun(func() { _ = u.Run(ctx) })
		}
	}
	d.startCredentials(ctx, goRun)
	d.startJWKS(ctx, goRun)
	d.startKube(ctx, goRun) // after the files, before baremesh's own state: the precedence
	d.agg.AttachMemory(ownSource, d.own)
	for _, w := range watchers {
		goRun(func() {
			if err := w.Run(ctx); err != nil {
				d.log.Error("file source stopped", "err", err)
			}
		})
	}
	synced := make(chan struct{})
	goRun(func() {
		if d.agg.WaitSynced(ctx) == nil {
			close(synced)
		}
	})
	goRun(func() { d.pipeline.Run(ctx, synced) })
	goRun(func() { d.wl.FollowGroups(ctx, d.agg, synced) })
	goRun(func() { d.watchMesh(ctx) })
	goRun(func() { d.watchNetworks(ctx, d.networks) })
	goRun(func() { d.resolveGatewayNames(ctx, d.gwNames) })
	d.startIdleTrim(ctx, goRun)

	httpSrv := &http.Server{Handler: d.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	goRun(func() {
		if err := httpSrv.Serve(d.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "err", err)
		}
	})
	goRun(func() {
		if err := d.grpc.Serve(d.xdsLis); err != nil {
			d.log.Error("xds server stopped", "err", err)
		}
	})
	if d.id != nil {
		goRun(func() { d.id.serve(d.log) })
		goRun(func() { d.id.watchCA(ctx, d) }) // root rotation steps (identity.go)
		if d.sharesTrust() {
			goRun(func() { d.id.shareTrust(ctx, d) }) // CA and join tokens across replicas (trust.go)
		}
	}
	d.log.Info("baremeshd serving", "xds", d.XDSAddr(), "http", d.HTTPAddr(), "tls", d.TLSAddr(), "configDirs", d.cfg.ConfigDirs,
		"configz", "http://"+d.HTTPAddr()+"/debug/configz")

	select {
	case <-d.pipeline.Ready():
		pc := d.pipeline.Current()
		d.log.Info("first snapshot built", "version", pc.Version, "services", len(pc.Services())) // READY=1: Systemd (systemd.go)
	case <-ctx.Done():
	}
	<-ctx.Done() // STOPPING=1: Systemd (systemd.go)
	d.log.Info("stopping: draining connections")
	stopped := make(chan struct{})
	go func() {
		if d.id != nil {
			go d.id.grpc.GracefulStop()
		}
		d.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		d.grpc.Stop()
	}
	if d.id != nil {
		d.id.grpc.Stop()
	}
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	_ = httpSrv.Shutdown(shutCtx)
	wg.Wait()
	d.log.Info("stopped")
	return nil
}

// watchMesh follows the mesh config file; a bad version is refused with a
// logged reason and the last good one stays.
func (d *Daemon) watchMesh(ctx context.Context) {
	if d.cfg.MeshConfig == "" {
		return
	}
	meshRejects := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baremesh_mesh_config_rejects_total",
		Help: "Times an edit of the mesh config file was refused; the last good mesh config stayed in force.",
	})
	d.reg.MustRegister(meshRejects)
	// The baseline is the mesh config New loaded, not the watcher's first
	// read: an edit made between the two would otherwise be taken as the
	// starting point and never applied.
	last := d.pipeline.Mesh()
	err := file.WatchFile(ctx, d.cfg.MeshConfig, func(data []byte, err error) {
		var m *meshv1alpha1.MeshConfig
		switch {
		case err != nil:
			d.log.Warn("mesh config unreadable; keeping the last good one", "file", d.cfg.MeshConfig, "err", err)
			return
		case data == nil:
			m = config.DefaultMeshConfig()
		case len(bytes.TrimSpace(data)) == 0:
			// As for config files: a writer that truncates first shows an
			// empty file for a moment; delete the file to get the defaults.
			d.log.Warn("mesh config is empty; keeping the last good one (delete the file for Istio's defaults)", "file", d.cfg.MeshConfig)
			return
		default:
			if m, err = config.ParseMeshConfig(data, d.cfg.MeshConfig); err != nil {
				d.log.Warn("mesh config rejected; keeping the last good one", "err", err)
				meshRejects.Inc()
				return
			}
		}
		if protoEqual(last, m) {
			return
		}
		d.log.Info("mesh config changed", "file", d.cfg.MeshConfig)
		d.pipeline.SetMesh(m)
		d.kubeMeshChanged(m)
		last = m
	})
	if err != nil {
		d.log.Info("mesh config not watched", "file", d.cfg.MeshConfig, "reason", err)
	}
}

// XDS returns the xDS server (for debug and tests).
func (d *Daemon) XDS() *ads.Server { return d.xds }
