package kube

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

// cluster is one connection: informers, the dirty sets their handlers
// fill, and a worker that converts what is dirty and delivers it. A new
// kubeconfig makes a new cluster value; the old one is stopped.
type cluster struct {
	id, file, server string
	src              *Source
	log              *slog.Logger
	cs               kubernetes.Interface
	dyn              dynamic.Interface

	factory    informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	services   corelisters.ServiceLister
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	namespaces corelisters.NamespaceLister
	slices     cache.Indexer

	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}

	// relisted counts updates that repeat an object's resource version:
	// what an informer's relist replays of objects that did not change.
	relisted atomic.Int64

	mu       sync.Mutex
	dirty    dirtySet
	nodeLoc  map[string]locality
	nsSel    map[string]bool
	istio    map[schema.GroupVersionResource]*istioKind
	problems map[string]bool // origins of Istio resources refused
	st       ClusterStatus
}

type nsn struct{ ns, name string }

type dirtySet struct {
	all   bool
	svcs  map[nsn]bool
	pods  map[nsn]bool
	istio map[config.Key]bool
}

func (d *dirtySet) reset() {
	*d = dirtySet{svcs: map[nsn]bool{}, pods: map[nsn]bool{}, istio: map[config.Key]bool{}}
}

const indexByService, indexByPod = "service", "pod"

func newCluster(s *Source, id, file string, cfg *rest.Config) (*cluster, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &cluster{id: id, file: file, server: cfg.Host, src: s, log: s.log.With("cluster", id), cs: cs, dyn: dyn,
		done: make(chan struct{}), kick: make(chan struct{}, 1), nodeLoc: map[string]locality{}, nsSel: map[string]bool{},
		istio: map[schema.GroupVersionResource]*istioKind{}, problems: map[string]bool{}}
	c.dirty.reset()
	c.st = ClusterStatus{ID: id, File: file, Server: cfg.Host, Since: time.Now()}
	// No periodic resync: informers relist only when a watch breaks, and
	// what did not change converts to what was delivered, so nothing moves.
	c.factory = informers.NewSharedInformerFactory(cs, 0)
	c.dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)

	svcInf := c.factory.Core().V1().Services()
	c.services = svcInf.Lister()
	c.handle(svcInf.Informer(), func(obj any) { c.markSvc(metaKey(obj)) })

	sliceInf := c.factory.Discovery().V1().EndpointSlices().Informer()
	if err := sliceInf.AddIndexers(cache.Indexers{indexByService: sliceService, indexByPod: slicePods}); err != nil {
		return nil, err
	}
	c.slices = sliceInf.GetIndexer()
	c.handle(sliceInf, func(obj any) {
		if sl, ok := tombstone(obj).(*discoveryv1.EndpointSlice); ok && sl.Labels[labelSvcName] != "" {
			c.markSvc(nsn{sl.Namespace, sl.Labels[labelSvcName]})
		}
	})

	podInf := c.factory.Core().V1().Pods()
	c.pods = podInf.Lister()
	c.handle(podInf.Informer(), func(obj any) { c.markPod(metaKey(obj)) })

	nodeInf := c.factory.Core().V1().Nodes()
	c.nodes = nodeInf.Lister()
	c.handle(nodeInf.Informer(), func(obj any) { c.nodeChanged(obj) })

	nsInf := c.factory.Core().V1().Namespaces()
	c.namespaces = nsInf.Lister()
	c.handle(nsInf.Informer(), func(obj any) { c.namespaceChanged(obj) })
	return c, nil
}

// handle routes every event of inf to f; updates that carry the same
// resource version (a relist after a broken watch) are dropped at once.
func (c *cluster) handle(inf cache.SharedIndexInformer, f func(obj any)) {
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		c.log.Debug("watch broken; the informer relists", "err", err)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: f,
		UpdateFunc: func(o, n any) {
			if ov, ok := o.(interface{ GetResourceVersion() string }); ok {
				if nv, ok := n.(interface{ GetResourceVersion() string }); ok && ov.GetResourceVersion() == nv.GetResourceVersion() {
					c.relisted.Add(1)
					return
				}
			}
			f(n)
		},
		DeleteFunc: f,
	})
}

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func metaKey(obj any) nsn {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nsn{}
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(k)
	return nsn{ns, name}
}

func sliceService(obj any) ([]string, error) {
	sl := obj.(*discoveryv1.EndpointSlice)
	if n := sl.Labels[labelSvcName]; n != "" {
		return []string{sl.Namespace + "/" + n}, nil
	}
	return nil, nil
}

func slicePods(obj any) ([]string, error) {
	sl := obj.(*discoveryv1.EndpointSlice)
	var out []string
	for _, ep := range sl.Endpoints {
		if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
			out = append(out, sl.Namespace+"/"+ep.TargetRef.Name)
		}
	}
	return out, nil
}

func (c *cluster) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *cluster) markSvc(k nsn) {
	c.mu.Lock()
	c.dirty.svcs[k] = true
	c.mu.Unlock()
	c.poke()
}

// markPod marks the pod and the Services whose slices list it (their
// endpoints carry its labels and service account).
func (c *cluster) markPod(k nsn) {
	objs, _ := c.slices.ByIndex(indexByPod, k.ns+"/"+k.name)
	c.mu.Lock()
	c.dirty.pods[k] = true
	for _, o := range objs {
		sl := o.(*discoveryv1.EndpointSlice)
		if n := sl.Labels[labelSvcName]; n != "" {
			c.dirty.svcs[nsn{sl.Namespace, n}] = true
		}
	}
	c.mu.Unlock()
	c.poke()
}

// nodeChanged recomputes everything when a node's locality labels
// changed (rare), and ignores the node's other updates (frequent).
func (c *cluster) nodeChanged(obj any) {
	k := metaKey(obj)
	var loc locality
	if n, ok := tombstone(obj).(*corev1.Node); ok {
		if cur, err := c.nodes.Get(k.name); err == nil {
			loc = nodeLocality(cur)
		} else if !apierrors.IsNotFound(err) {
			loc = nodeLocality(n)
		}
	}
	c.mu.Lock()
	old, had := c.nodeLoc[k.name]
	if loc == (locality{}) {
		delete(c.nodeLoc, k.name)
	} else {
		c.nodeLoc[k.name] = loc
	}
	changed := old != loc && (had || loc != locality{})
	if changed {
		c.dirty.all = true
	}
	c.mu.Unlock()
	if changed {
		c.poke()
	}
}

func (c *cluster) namespaceChanged(obj any) {
	k := metaKey(obj)
	sel := c.selected(k.name)
	c.mu.Lock()
	old, had := c.nsSel[k.name]
	c.nsSel[k.name] = sel
	changed := had && old != sel || !had && sel
	if changed {
		c.dirty.all = true
	}
	c.mu.Unlock()
	if changed {
		c.poke()
	}
}

// selected reports whether the mesh sees namespace ns.
func (c *cluster) selected(ns string) bool {
	f := *c.src.filter.Load()
	if len(f) == 0 {
		return true
	}
	n, err := c.namespaces.Get(ns)
	if err != nil {
		return false
	}
	return f.selects(n)
}

// markAll makes the worker convert the whole cluster again.
func (c *cluster) markAll() {
	c.mu.Lock()
	c.dirty.all = true
	c.mu.Unlock()
	c.poke()
}

func (c *cluster) start(ctx context.Context) {
	c.src.opts.Metrics.started(c.id)
	ctx, c.cancel = context.WithCancel(ctx)
	go c.run(ctx)
}

func (c *cluster) stop() {
	c.cancel()
	<-c.done
}

func (c *cluster) run(ctx context.Context) {
	defer close(c.done)
	defer c.dynFactory.Shutdown()
	defer c.factory.Shutdown()
	c.factory.Start(ctx.Done())
	go c.probeLoop(ctx)
	c.discoverIstio(ctx)
	for _, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return // stopped before the first sync
		}
	}
	if !c.waitIstioSynced(ctx) {
		return
	}
	c.mu.Lock()
	c.dirty.all = true
	c.mu.Unlock()
	if !c.process(true) {
		return
	}
	c.mu.Lock()
	c.st.Synced = true
	c.mu.Unlock()
	c.src.opts.Metrics.setSynced(c.id, true)
	c.log.Info("cluster synced")
	c.src.clusterSynced(c.id)
	crd := time.NewTicker(c.src.opts.CRDPoll)
	defer crd.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			c.process(false)
		case <-crd.C:
			c.discoverIstio(ctx)
		}
	}
}

// process converts what is dirty and delivers it. first marks the
// delivery that follows the cluster's first sync, which replaces what an
// earlier connection to the cluster delivered.
func (c *cluster) process(first bool) bool {
	c.mu.Lock()
	d := c.dirty
	c.dirty.reset()
	c.mu.Unlock()
	u := model.KubeUpdate{Cluster: c.id, Full: d.all}
	domain := c.src.opts.Domain
	lk := lookups{
		pod: func(ns, name string) *corev1.Pod {
			p, _ := c.pods.Pods(ns).Get(name)
			return p
		},
		node: func(name string) *corev1.Node {
			n, _ := c.nodes.Get(name)
			return n
		},
	}
	svcFor := func(svc *corev1.Service) *model.KubeService {
		ms := convertService(svc, domain)
		objs, _ := c.slices.ByIndex(indexByService, svc.Namespace+"/"+svc.Name)
		sls := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			sls = append(sls, o.(*discoveryv1.EndpointSlice))
		}
		ext := ""
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			ext = svc.Spec.ExternalName
		}
		return &model.KubeService{Name: svc.Name, Service: ms, Endpoints: sliceEndpoints(ms, ext, sls, lk), Gateways: networkGateways(svc), ExternalIPs: externalIPs(svc)}
	}
	selected := map[string]bool{}
	sel := func(ns string) bool {
		v, ok := selected[ns]
		if !ok {
			v = c.selected(ns)
			selected[ns] = v
		}
		return v
	}
	if d.all {
		svcs, _ := c.services.List(labels.Everything())
		for _, svc := range svcs {
			if sel(svc.Namespace) {
				u.Services = append(u.Services, svcFor(svc))
			}
		}
		pods, _ := c.pods.List(labels.Everything())
		for _, p := range pods {
			if w := podWorkload(c.id, p, lk.node(p.Spec.NodeName)); w != nil && sel(p.Namespace) {
				u.Pods = append(u.Pods, w)
			}
		}
	} else {
		for k := range d.svcs {
			svc, err := c.services.Services(k.ns).Get(k.name)
			if err == nil && sel(k.ns) {
				u.Services = append(u.Services, svcFor(svc))
			} else {
				u.DeletedServices = append(u.DeletedServices, model.KubeServiceKey(c.id, k.ns, k.name))
			}
		}
		for k := range d.pods {
			p, err := c.pods.Pods(k.ns).Get(k.name)
			var w *model.WorkloadInstance
			if err == nil && sel(k.ns) {
				w = podWorkload(c.id, p, lk.node(p.Spec.NodeName))
			}
			if w != nil {
				u.Pods = append(u.Pods, w)
			} else {
				u.DeletedPods = append(u.DeletedPods, model.PodKey(c.id, k.ns, k.name))
			}
		}
	}
	ups, dels := c.convertIstio(d, sel)
	return c.src.deliver(c, u, ups, dels, d.all)
}

// probeLoop checks the API server; while it does not answer, the
// cluster's last good state stays and its status and metrics say so.
func (c *cluster) probeLoop(ctx context.Context) {
	t := time.NewTicker(c.src.opts.Probe)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.setConnected(err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *cluster) setConnected(err error) {
	c.mu.Lock()
	was, wasErr := c.st.Connected, c.st.Error
	c.st.Connected = err == nil
	c.st.Error = ""
	if err != nil {
		c.st.Error = "API server unreachable; last good state kept: " + err.Error()
	}
	changed := was != c.st.Connected || (wasErr == "") != (c.st.Error == "")
	if changed {
		c.st.Since = time.Now()
	}
	c.mu.Unlock()
	c.src.opts.Metrics.setUp(c.id, err == nil)
	if !changed {
		return
	}
	origin := c.file + "#connection"
	if err != nil {
		c.log.Warn("cluster unreachable; keeping its last good state", "err", err)
		c.src.sink.SetProblems(origin, []store.Problem{{Error: "cluster " + c.id + " unreachable, last good state kept: " + err.Error(), Since: time.Now()}})
	} else {
		c.log.Info("cluster reachable")
		c.src.sink.SetProblems(origin, nil)
	}
}

func (c *cluster) status() ClusterStatus {
	svcs, _ := c.services.List(labels.Everything())
	pods, _ := c.pods.List(labels.Everything())
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Services, st.Pods = len(svcs), len(pods)
	st.RelistedUnchanged = c.relisted.Load()
	st.IstioKinds = []string{}
	for gvr := range c.istio {
		st.IstioKinds = append(st.IstioKinds, gvr.Resource+"."+gvr.Group+"/"+gvr.Version)
	}
	sort.Strings(st.IstioKinds)
	return st
}
