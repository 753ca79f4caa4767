package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// istioKind is one Istio kind the cluster serves, followed by a dynamic
// informer at the preferred version the cluster serves.
type istioKind struct {
	kind config.Kind
	gvr  schema.GroupVersionResource
	inf  cache.SharedIndexInformer
}

// discoverIstio asks the cluster which Istio kinds it serves and starts an
// informer for each one not yet followed. A kind whose CRD is missing is
// looked for again at the next poll.
func (c *cluster) discoverIstio(ctx context.Context) {
	served := map[string]map[string]string{} // group/version -> kind -> resource
	lookup := func(gv string) map[string]string {
		if m, ok := served[gv]; ok {
			return m
		}
		m := map[string]string{}
		if rl, err := c.cs.Discovery().ServerResourcesForGroupVersion(gv); err == nil {
			for _, r := range rl.APIResources {
				if !strings.Contains(r.Name, "/") {
					m[r.Kind] = r.Name
				}
			}
		}
		served[gv] = m
		return m
	}
	var started []string
	for _, k := range config.Kinds() {
		s := config.SchemaFor(k)
		c.mu.Lock()
		have := false
		for _, ik := range c.istio {
			have = have || ik.kind == k
		}
		c.mu.Unlock()
		if have {
			continue
		}
		for _, v := range s.Versions {
			res, ok := lookup(s.Group + "/" + v)[s.GVK().Kind]
			if !ok {
				continue
			}
			gvr := schema.GroupVersionResource{Group: s.Group, Version: v, Resource: res}
			if !c.mayList(ctx, k, gvr) {
				break // looked for again at the next poll
			}
			ik := &istioKind{kind: k, gvr: gvr, inf: c.dynFactory.ForResource(gvr).Informer()}
			kind := k
			c.handle(ik.inf, func(obj any) {
				key := metaKey(obj)
				c.mu.Lock()
				c.dirty.istio[config.Key{Kind: kind, Namespace: key.ns, Name: key.name}] = true
				c.mu.Unlock()
				c.poke()
			})
			c.mu.Lock()
			c.istio[gvr] = ik
			c.mu.Unlock()
			started = append(started, gvr.String())
			break
		}
	}
	if len(started) > 0 {
		c.dynFactory.Start(ctx.Done())
		c.log.Info("following Istio kinds", "kinds", started)
	}
}

// mayList reports whether the cluster lets baremeshd list gvr. A kind
// whose CRD is served but whose ClusterRole lacks it (a cluster upgraded
// to new CRDs with the previous release's ClusterRole) would keep its
// informer unsynced, and the whole cluster with it: it is left out, named
// as a problem with what to grant, and tried again at the next poll. Any
// other error is the informer's to retry.
func (c *cluster) mayList(ctx context.Context, k config.Kind, gvr schema.GroupVersionResource) bool {
	origin := c.id + "/" + string(k) + " (RBAC)"
	_, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		c.mu.Lock()
		had := c.problems[origin]
		c.problems[origin] = true
		c.mu.Unlock()
		if !had {
			c.log.Warn("not allowed to list a kind the cluster serves; it is not followed", "kind", k, "resource", gvr.Resource+"."+gvr.Group, "err", err)
			c.src.sink.SetProblems(origin, []store.Problem{{Resource: string(k), Since: time.Now(),
				Error: fmt.Sprintf("cluster %s: not allowed to list %s.%s: grant get, list and watch on it in baremeshd's ClusterRole (as examples/mixed-mesh/clusterrole.yaml does); %s is not followed until then", c.id, gvr.Resource, gvr.Group, k)}})
		}
		return false
	}
	c.setProblem(origin, "", nil)
	return true
}

func (c *cluster) waitIstioSynced(ctx context.Context) bool {
	for _, ok := range c.dynFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	return true
}

// convertIstio converts the dirty Istio resources (all of them after a
// sync or a namespace selection change). A resource that fails validation
// is reported and its last good version stays.
func (c *cluster) convertIstio(d dirtySet, sel func(ns string) bool) (ups []config.Config, dels []config.Key) {
	c.mu.Lock()
	kinds := map[config.Kind]*istioKind{}
	for _, ik := range c.istio {
		kinds[ik.kind] = ik
	}
	c.mu.Unlock()
	one := func(k config.Key, obj *unstructured.Unstructured) {
		origin := c.id + "/" + string(k.Kind) + "/" + k.Namespace + "/" + k.Name
		if obj == nil || !sel(k.Namespace) {
			dels = append(dels, k)
			c.setProblem(origin, "", nil)
			return
		}
		cfg, err := config.Typed(obj.UnstructuredContent(), config.Source{Name: c.src.opts.Name + ":" + c.id})
		if err != nil {
			c.src.opts.Metrics.istioReject(c.id)
			c.setProblem(origin, k.Namespace+"/"+k.Name, err)
			if d.all {
				if last, ok := c.src.lastGood(c.id, k); ok {
					ups = append(ups, last)
				}
			}
			return
		}
		c.setProblem(origin, "", nil)
		ups = append(ups, cfg)
	}
	if d.all {
		for _, ik := range kinds {
			for _, o := range ik.inf.GetStore().List() {
				u := o.(*unstructured.Unstructured)
				one(config.Key{Kind: ik.kind, Namespace: u.GetNamespace(), Name: u.GetName()}, u)
			}
		}
		return ups, dels
	}
	for k := range d.istio {
		ik := kinds[k.Kind]
		if ik == nil {
			continue
		}
		var u *unstructured.Unstructured
		if o, ok, _ := ik.inf.GetStore().GetByKey(k.Namespace + "/" + k.Name); ok {
			u = o.(*unstructured.Unstructured)
		}
		one(k, u)
	}
	return ups, dels
}

func (c *cluster) setProblem(origin, resource string, err error) {
	c.mu.Lock()
	had := c.problems[origin]
	if err != nil {
		c.problems[origin] = true
	} else {
		delete(c.problems, origin)
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		c.log.Warn("Istio resource refused; its last good version stays", "resource", origin, "err", err)
		c.src.sink.SetProblems(origin, []store.Problem{{Resource: resource, Error: fmt.Sprintf("cluster %s: %v", c.id, err), Since: time.Now()}})
	case had:
		c.src.sink.SetProblems(origin, nil)
	}
}

// clearProblems withdraws every problem of a removed cluster.
func (c *cluster) clearProblems() {
	c.mu.Lock()
	origins := make([]string, 0, len(c.problems))
	for o := range c.problems {
		origins = append(origins, o)
	}
	c.problems = map[string]bool{}
	c.mu.Unlock()
	for _, o := range origins {
		c.src.sink.SetProblems(o, nil)
	}
	c.src.sink.SetProblems(c.file+"#connection", nil)
}
