package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
)

// GatewayStatus is the status of one Gateway API object, with the
// config it was computed for (its Source says which cluster holds it).
type GatewayStatus struct {
	Config *config.Config
	Status *gatewayapi.Status
}

// statusWriter remembers what it last wrote per object, so an unchanged
// status is not written again (a write is the only thing baremeshd does
// to a cluster).
type statusWriter struct {
	mu      sync.Mutex
	written map[string]string // cluster/kind/ns/name -> status JSON without times
}

// WriteGatewayStatus writes the status of the Gateway API objects read
// from this source's clusters to their status subresource (a merge
// patch of .status; the route parents and listeners baremesh computed,
// replacing any it wrote before). Objects of other sources are skipped.
// It returns the first error, after trying every object; an object whose
// status is unchanged since the last write is not written.
func (s *Source) WriteGatewayStatus(ctx context.Context, all []GatewayStatus) error {
	prefix := s.opts.Name + ":"
	var first error
	for _, gs := range all {
		if gs.Status == nil || !strings.HasPrefix(gs.Config.Source.Name, prefix) {
			continue
		}
		id := strings.TrimPrefix(gs.Config.Source.Name, prefix)
		s.mu.Lock()
		c := s.clusters[id]
		s.mu.Unlock()
		if c == nil {
			continue
		}
		if err := c.writeStatus(ctx, &s.status, gs); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *cluster) writeStatus(ctx context.Context, w *statusWriter, gs GatewayStatus) error {
	kind := gs.Config.Key().Kind
	c.mu.Lock()
	var ik *istioKind
	for _, k := range c.istio {
		if k.kind == kind {
			ik = k
		}
	}
	c.mu.Unlock()
	if ik == nil {
		return nil
	}
	o, ok, _ := ik.inf.GetStore().GetByKey(gs.Config.Namespace + "/" + gs.Config.Name)
	if !ok {
		return nil
	}
	u := o.(*unstructured.Unstructured)
	key := c.id + "/" + string(kind) + "/" + gs.Config.Namespace + "/" + gs.Config.Name
	plain, err := json.Marshal(gs.Status)
	if err != nil {
		return err
	}
	w.mu.Lock()
	same := w.written[key] == string(plain)+fmt.Sprint(u.GetGeneration())
	w.mu.Unlock()
	if same {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": apiStatus(gs.Status, u.GetGeneration(), metav1.Now())})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(ik.gvr).Namespace(gs.Config.Namespace).Patch(ctx, gs.Config.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("cluster %s: status of %s %s/%s: %w", c.id, kind, gs.Config.Namespace, gs.Config.Name, err)
	}
	w.mu.Lock()
	if w.written == nil {
		w.written = map[string]string{}
	}
	w.written[key] = string(plain) + fmt.Sprint(u.GetGeneration())
	w.mu.Unlock()
	return nil
}

// apiStatus is st as the API's status stanza: conditions with their
// observed generation and transition time.
func apiStatus(st *gatewayapi.Status, gen int64, now metav1.Time) map[string]any {
	conds := func(cs []gatewayapi.Condition) []map[string]any {
		out := make([]map[string]any, 0, len(cs))
		for _, c := range cs {
			out = append(out, map[string]any{"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
				"observedGeneration": gen, "lastTransitionTime": now.UTC().Format(time.RFC3339)})
		}
		return out
	}
	out := map[string]any{}
	if len(st.Conditions) > 0 {
		out["conditions"] = conds(st.Conditions)
	}
	if len(st.Listeners) > 0 {
		ls := make([]map[string]any, 0, len(st.Listeners))
		for _, l := range st.Listeners {
			ls = append(ls, map[string]any{"name": l.Name, "attachedRoutes": l.AttachedRoutes, "conditions": conds(l.Conditions), "supportedKinds": []any{}})
		}
		out["listeners"] = ls
	}
	if st.Parents != nil || len(st.Conditions) == 0 && len(st.Listeners) == 0 {
		ps := make([]map[string]any, 0, len(st.Parents))
		for _, p := range st.Parents {
			ref := map[string]any{"group": p.ParentRef.Group, "kind": p.ParentRef.Kind, "name": p.ParentRef.Name, "namespace": p.ParentRef.Namespace}
			if p.ParentRef.SectionName != "" {
				ref["sectionName"] = p.ParentRef.SectionName
			}
			if p.ParentRef.Port != 0 {
				ref["port"] = p.ParentRef.Port
			}
			ps = append(ps, map[string]any{"parentRef": ref, "controllerName": p.ControllerName, "conditions": conds(p.Conditions)})
		}
		out["parents"] = ps
	}
	return out
}
