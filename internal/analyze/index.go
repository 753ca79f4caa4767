package analyze

import (
	"sort"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// workload is something a selector can select: a WorkloadEntry, an
// inline ServiceEntry endpoint, or the members a WorkloadGroup will make.
type workload struct {
	namespace string
	name      string // for messages: "WorkloadEntry ns/name" etc.
	labels    map[string]string
}

// index is the resources by kind, with the lookups the checks share.
type index struct {
	byKind    map[config.Kind][]*config.Config
	hosts     map[string]bool // every ServiceEntry host
	wildcards []string        // ServiceEntry hosts "*.suffix", as ".suffix"
	subsets   map[string]map[string]bool
	workloads []workload
}

func newIndex(cfgs []config.Config) *index {
	ix := &index{byKind: map[config.Kind][]*config.Config{}, hosts: map[string]bool{}, subsets: map[string]map[string]bool{}}
	for i := range cfgs {
		c := &cfgs[i]
		ix.byKind[c.Key().Kind] = append(ix.byKind[c.Key().Kind], c)
	}
	for _, c := range ix.byKind[config.ServiceEntry] {
		se := c.Spec.(*networking.ServiceEntry)
		for _, h := range se.GetHosts() {
			ix.hosts[h] = true
			if strings.HasPrefix(h, "*.") {
				ix.wildcards = append(ix.wildcards, h[1:])
			}
		}
		for i, ep := range se.GetEndpoints() {
			if len(ep.GetLabels()) > 0 {
				ix.workloads = append(ix.workloads, workload{c.Namespace, "ServiceEntry " + c.Namespace + "/" + c.Name + " endpoint " + strconv.Itoa(i), ep.GetLabels()})
			}
		}
	}
	for _, c := range ix.byKind[config.WorkloadEntry] {
		ix.workloads = append(ix.workloads, workload{c.Namespace, "WorkloadEntry " + c.Namespace + "/" + c.Name, c.Spec.(*networking.WorkloadEntry).GetLabels()})
	}
	for _, c := range ix.byKind[config.WorkloadGroup] {
		ix.workloads = append(ix.workloads, workload{c.Namespace, "WorkloadGroup " + c.Namespace + "/" + c.Name, c.Spec.(*networking.WorkloadGroup).GetMetadata().GetLabels()})
	}
	for _, c := range ix.byKind[config.DestinationRule] {
		dr := c.Spec.(*networking.DestinationRule)
		m := ix.subsets[dr.GetHost()]
		if m == nil {
			m = map[string]bool{}
			ix.subsets[dr.GetHost()] = m
		}
		for _, s := range dr.GetSubsets() {
			m[s.GetName()] = true
		}
	}
	return ix
}

// hostExists reports whether some ServiceEntry declares host, exactly or
// through a wildcard "*.suffix".
func (ix *index) hostExists(host string) bool {
	if ix.hosts[host] {
		return true
	}
	for _, w := range ix.wildcards {
		if strings.HasSuffix(host, w) {
			return true
		}
	}
	return false
}

// hasSubset reports whether a DestinationRule for host (exactly, or a
// wildcard covering it) defines subset.
func (ix *index) hasSubset(host, subset string) bool {
	for h, subs := range ix.subsets {
		if (h == host || (strings.HasPrefix(h, "*") && strings.HasSuffix(host, h[1:]))) && subs[subset] {
			return true
		}
	}
	return false
}

// selected returns the workloads in namespace whose labels include sel.
func (ix *index) selected(namespace string, sel map[string]string) []workload {
	var out []workload
	for _, w := range ix.workloads {
		if w.namespace == namespace && matches(sel, w.labels) {
			out = append(out, w)
		}
	}
	return out
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// selectorString is k=v,k=v sorted, as Kubernetes prints a selector.
func selectorString(sel map[string]string) string {
	var parts []string
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
