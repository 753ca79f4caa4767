// Building an entry's WorkloadEntry from its group, and the names Istio gives them.

package workloads

import (
	"maps"
	"sort"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// build is e's WorkloadEntry from its group's template.
func (c *Controller) build(e *entry, wgc *config.Config) config.Config {
	wg := wgc.Spec.(*networking.WorkloadGroup)
	spec := &networking.WorkloadEntry{}
	if t := wg.GetTemplate(); t != nil {
		spec = protoCloneWE(t)
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, e.ProxyLabels)
	spec.Labels = labels
	spec.Address = e.Address
	if spec.Network == "" {
		spec.Network = e.Network
	}
	if spec.Locality == "" {
		spec.Locality = e.Locality
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = "default"
	}
	ann := maps.Clone(wg.GetMetadata().GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationGroup] = e.Group
	ann[AnnotationController] = c.controllerFor(e.owner)
	if !e.ConnectedAt.IsZero() {
		ann[AnnotationConnectedAt] = e.ConnectedAt.UTC().Format(time.RFC3339Nano)
	}
	if !e.DisconnectedAt.IsZero() {
		ann[AnnotationDisconnectedAt] = e.DisconnectedAt.UTC().Format(time.RFC3339Nano)
	}
	if wg.GetProbe() != nil {
		ann[AnnotationHealthChecks] = "true"
	}
	if e.Healthy != nil && !*e.Healthy {
		ann[model.AnnotationHealth] = model.Unhealthy
	}
	return config.Config{
		Meta: config.Meta{
			GVK: config.SchemaFor(config.WorkloadEntry).GVK(), Namespace: e.Namespace, Name: e.Name,
			Labels: maps.Clone(wg.GetMetadata().GetLabels()), Annotations: ann,
			Source: config.Source{Name: c.o.OwnSource},
		},
		Spec: spec,
	}
}

// EntryName is Istio's auto-registered entry name:
// <group>-<ip>[-<network>], with an IPv6 address's colons as dashes.
func EntryName(group, ip, network string) string {
	name := group + "-" + ip
	if network != "" {
		name += "-" + network
	}
	return strings.ReplaceAll(name, ":", "-")
}

func localityString(p *model.Proxy) string {
	l := p.Locality
	if l == nil || l.GetRegion() == "" {
		return ""
	}
	s := l.GetRegion()
	if l.GetZone() != "" {
		s += "/" + l.GetZone()
		if l.GetSubZone() != "" {
			s += "/" + l.GetSubZone()
		}
	}
	return s
}

func proxyIDs(conns map[*model.Proxy]struct{}) []string {
	var out []string
	for p := range conns {
		out = append(out, p.ID)
	}
	sort.Strings(out)
	return out
}
