package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/baremesh/baremesh/nodeagent/cni"
)

// Mode is what the controller does to a broken pod.
type Mode string

// Modes.
const (
	ModeLabel  Mode = "label"  // add LabelBroken=<reason>
	ModeDelete Mode = "delete" // delete it so its owner recreates it
)

// Options configure New.
type Options struct {
	Node       string            // only pods with spec.nodeName=Node are watched; required
	Mode       Mode              // default ModeLabel
	Plugin     *cni.PluginConfig // the plugin's decisions and excluded namespaces; required
	ReadySince time.Time         // see NeedsRepair; zero disables that rule
	// DeleteRate and DeleteBurst bound deletions (per second); defaults 1
	// and 5, so a node full of broken pods is drained gradually.
	DeleteRate  float64
	DeleteBurst int
	Resync      time.Duration // informer resync; default 5m
}

// Validate checks the options after defaults.
func (o Options) Validate() error {
	var errs []error
	if o.Node == "" {
		errs = append(errs, errors.New("repair: node name is required"))
	}
	if o.Mode != ModeLabel && o.Mode != ModeDelete {
		errs = append(errs, fmt.Errorf("repair: mode %q (want label or delete)", o.Mode))
	}
	if o.Plugin == nil {
		errs = append(errs, errors.New("repair: plugin config is required"))
	}
	if o.DeleteRate <= 0 || o.DeleteBurst < 1 {
		errs = append(errs, fmt.Errorf("repair: delete rate %v/s burst %d must be positive", o.DeleteRate, o.DeleteBurst))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = ModeLabel
	}
	if o.DeleteRate == 0 {
		o.DeleteRate = 1
	}
	if o.DeleteBurst == 0 {
		o.DeleteBurst = 5
	}
	if o.Resync == 0 {
		o.Resync = 5 * time.Minute
	}
	return o
}

// Controller watches the node's pods and repairs broken ones. Build it
// with New, then call Run once.
type Controller struct {
	log     *slog.Logger
	opts    Options
	client  kubernetes.Interface
	limiter *rate.Limiter

	mu       sync.Mutex
	repaired int
	checked  int
}

// New returns a controller; it talks to the API server only in Run.
func New(log *slog.Logger, client kubernetes.Interface, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Controller{log: log, opts: opts, client: client,
		limiter: rate.NewLimiter(rate.Limit(opts.DeleteRate), opts.DeleteBurst)}, nil
}

// Repaired returns how many pods the controller labelled or deleted.
func (c *Controller) Repaired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.repaired
}

// Checked returns how many pod events the controller has fully handled
// (repaired or found fine), for tests and status.
func (c *Controller) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

// Run watches until ctx ends. It returns an error only when the caches
// cannot sync; individual repairs that fail are retried with backoff.
func (c *Controller) Run(ctx context.Context) error {
	podFactory := informers.NewSharedInformerFactoryWithOptions(c.client, c.opts.Resync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", c.opts.Node).String()
		}))
	nsFactory := informers.NewSharedInformerFactory(c.client, c.opts.Resync)
	pods := podFactory.Core().V1().Pods()
	nss := nsFactory.Core().V1().Namespaces()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("repair: pod handler: %w", err)
	}
	nsInformer := nss.Informer() // registered before Start so the factory runs it
	podFactory.Start(ctx.Done())
	nsFactory.Start(ctx.Done())
	defer func() {
		queue.ShutDown()
		podFactory.Shutdown()
		nsFactory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced, nsInformer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("repair: pod and namespace caches did not sync")
	}
	c.log.Info("watching pods", "node", c.opts.Node, "mode", c.opts.Mode, "readySince", c.opts.ReadySince)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.next(ctx, queue, pods.Lister(), nss.Lister()) {
		}
	}()
	<-ctx.Done()
	queue.ShutDown()
	<-done
	return nil
}

func (c *Controller) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], pods listersv1.PodLister, nss listersv1.NamespaceLister) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := c.handle(ctx, key, pods, nss); err != nil {
		if ctx.Err() != nil {
			q.Forget(key)
			return true
		}
		c.log.Warn("repair failed, will retry", "pod", key, "err", err)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	c.mu.Lock()
	c.checked++
	c.mu.Unlock()
	return true
}

func (c *Controller) handle(ctx context.Context, key string, pods listersv1.PodLister, nss listersv1.NamespaceLister) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made; nothing to retry
	}
	if slices.Contains(c.opts.Plugin.Kubernetes.ExcludeNamespaces, namespace) {
		return nil // never touched, whatever the rule says
	}
	pod, err := pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pod %s from cache: %w", key, err)
	}
	ns, _ := nss.Get(namespace) // nil when unknown: ambient decisions skip
	broken, reason := NeedsRepair(pod, ns, c.opts.Plugin, c.opts.ReadySince)
	if !broken {
		return nil
	}
	switch c.opts.Mode {
	case ModeDelete:
		return c.delete(ctx, pod, reason)
	default:
		return c.label(ctx, pod, reason)
	}
}

func (c *Controller) label(ctx context.Context, pod *corev1.Pod, reason string) error {
	if pod.Labels[LabelBroken] == reason {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{LabelBroken: reason}}})
	if err != nil {
		return fmt.Errorf("label patch: %w", err)
	}
	if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("labelling pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.done(pod, "labelled", reason)
	return nil
}

func (c *Controller) delete(ctx context.Context, pod *corev1.Pod, reason string) error {
	if err := c.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("deletion rate limit: %w", err)
	}
	uid := pod.UID // never delete a namesake the owner already recreated
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.done(pod, "deleted", reason)
	return nil
}

func (c *Controller) done(pod *corev1.Pod, what, reason string) {
	c.mu.Lock()
	c.repaired++
	c.mu.Unlock()
	c.log.Info("repaired pod whose capture was not set up", "pod", pod.Namespace+"/"+pod.Name, "action", what, "reason", reason)
}
