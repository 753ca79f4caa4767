package model

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

// servicesFromEntry makes one Service per host of a ServiceEntry.
func (r *Registry) servicesFromEntry(c *config.Config, se *networking.ServiceEntry) []*Service {
	ports := make([]Port, 0, len(se.GetPorts()))
	for _, p := range se.GetPorts() {
		// Only the protocol field, as istiod's convertPort: a name such as
		// "http-web" says nothing for a ServiceEntry (it does for a
		// Kubernetes Service); without a protocol the port is sniffed.
		ports = append(ports, Port{Name: p.GetName(), Number: p.GetNumber(), Protocol: ParseProtocol(p.GetProtocol(), ""), TargetPort: p.GetTargetPort()})
	}
	res := ClientSideLB
	switch se.GetResolution() {
	case networking.ServiceEntry_DNS:
		res = DNSLB
	case networking.ServiceEntry_DNS_ROUND_ROBIN:
		res = DNSRoundRobinLB
	case networking.ServiceEntry_NONE:
		res = Passthrough
	}
	var sel map[string]string
	if ws := se.GetWorkloadSelector(); ws != nil {
		sel = ws.GetLabels()
	}
	out := make([]*Service, 0, len(se.GetHosts()))
	var noAddr []string // hosts left without an address: the range is full
	for _, h := range se.GetHosts() {
		s := &Service{
			Hostname: h, Namespace: c.Namespace, Ports: ports, Resolution: res,
			MeshExternal: se.GetLocation() == networking.ServiceEntry_MESH_EXTERNAL,
			ExportTo:     se.GetExportTo(), Labels: c.Labels, Selector: sel,
			SubjectAltNames: se.GetSubjectAltNames(), Source: c.Key(), CreationTime: c.CreationTime,
			TrafficDistribution: ParseTrafficDistribution(nil, c.Annotations),
		}
		switch {
		case len(se.GetAddresses()) > 0:
			s.Addresses = se.GetAddresses()
		case !strings.HasPrefix(h, "*") && res != Passthrough:
			if aa, err := r.alloc.Allocate(s.Key()); err == nil {
				s.Addresses, s.AutoAllocated = []string{aa.IPv4.String()}, true
				s.AutoAllocatedIPv6 = aa.IPv6.String()
			} else {
				noAddr = append(noAddr, h)
			}
		}
		out = append(out, s)
	}
	r.setAddressProblem(c, noAddr, len(se.GetHosts()))
	return out
}

// AnnotationHealth on a WorkloadEntry stands for Istio's Healthy status
// condition (baremesh's configs carry no status): Unhealthy makes its
// endpoints unhealthy in EDS. Auto-registration sets it from the
// proxy's istio.io/health reports.
const (
	AnnotationHealth = "baremesh.io/health"
	Unhealthy        = "unhealthy"
)

// TLSModeLabel is the workload label that says whether an endpoint
// takes Istio mTLS (value TLSModeIstio); EDS carries it to the cluster's
// transport socket matches (auto mTLS).
const (
	TLSModeLabel = "security.istio.io/tlsMode"
	TLSModeIstio = "istio"
)

// withTLSMode returns a WorkloadEntry's (or a ServiceEntry endpoint's)
// labels with Istio's TLS mode derived as istiod derives it
// (getTLSModeFromWorkloadEntry): the label if present, else istio mTLS
// when a service account is set (the form of Istio's VM guide, which
// sets no label), else none (plaintext). The labels given are not
// altered.
func withTLSMode(labels map[string]string, serviceAccount string) map[string]string {
	if serviceAccount == "" {
		return labels
	}
	if _, set := labels[TLSModeLabel]; set {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[TLSModeLabel] = TLSModeIstio
	return out
}

func workloadFromEntry(c *config.Config) *WorkloadInstance {
	we := c.Spec.(*networking.WorkloadEntry)
	labels := maps.Clone(we.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	// Metadata labels are workload labels too, as in Istio.
	for k, v := range c.Labels {
		if _, set := labels[k]; !set {
			labels[k] = v
		}
	}
	if we.GetServiceAccount() != "" {
		if _, set := labels[TLSModeLabel]; !set {
			labels[TLSModeLabel] = TLSModeIstio
		}
	}
	return &WorkloadInstance{
		Name: c.Name, Namespace: c.Namespace, Address: we.GetAddress(), Labels: labels,
		Ports: we.GetPorts(), Network: we.GetNetwork(), Locality: we.GetLocality(),
		Weight: we.GetWeight(), ServiceAccount: we.GetServiceAccount(), Healthy: c.Annotations[AnnotationHealth] != Unhealthy,
		Source: c.Key(),
	}
}

// recomputeEndpoints rebuilds the endpoint shard that ServiceEntry seKey
// contributes to each of its hosts, recording endpoint changes.
func (r *Registry) recomputeEndpoints(seKey config.Key, ch Change) {
	se := r.entries[seKey]
	if se == nil {
		return // removed: its shards went with its services
	}
	var instances []*WorkloadInstance
	if sel := se.GetWorkloadSelector(); sel != nil {
		for _, w := range r.wlByNS[seKey.Namespace] {
			if matches(sel.GetLabels(), w.Labels) {
				instances = append(instances, w)
			}
		}
		slices.SortFunc(instances, func(a, b *WorkloadInstance) int { return strings.Compare(a.Name, b.Name) })
	} else {
		for i, ep := range se.GetEndpoints() {
			// Named "SE-INDEX" as istiod names inline endpoints (the
			// workload of telemetry's endpoint metadata).
			name := seKey.Name + "-" + strconv.Itoa(i)
			instances = append(instances, &WorkloadInstance{
				Name: name, Source: config.Key{Kind: config.ServiceEntry, Namespace: seKey.Namespace, Name: name},
				Namespace: seKey.Namespace, Address: ep.GetAddress(), Labels: withTLSMode(ep.GetLabels(), ep.GetServiceAccount()), Ports: ep.GetPorts(),
				Network: ep.GetNetwork(), Locality: ep.GetLocality(), Weight: ep.GetWeight(),
				ServiceAccount: ep.GetServiceAccount(), Healthy: true,
			})
		}
	}
	for _, svc := range r.services[seKey] {
		var eps []*Endpoint
		for _, w := range instances {
			for _, p := range svc.Ports {
				eps = append(eps, endpointFor(svc, p, w))
			}
		}
		if r.endpoints.SetShard(svc.Key(), seKey, eps, ch.Addresses) {
			ch.Endpoints[svc.Key()] = true
		}
	}
}

func endpointFor(svc *Service, p Port, w *WorkloadInstance) *Endpoint {
	port := p.Number
	if p.TargetPort != 0 {
		port = p.TargetPort
	}
	if n, ok := w.Ports[p.Name]; ok && n != 0 {
		port = n
	}
	addr := w.Address
	if addr == "" && svc.Resolution == DNSLB {
		addr = svc.Hostname
	}
	weight := w.Weight
	if weight == 0 {
		weight = 1
	}
	var wl config.Key
	if w.Name != "" {
		wl = w.Source
	}
	return &Endpoint{
		Address: addr, Port: port, ServicePortName: p.Name, Labels: w.Labels,
		Network: w.Network, Locality: w.Locality, Weight: weight,
		ServiceAccount: w.ServiceAccount, Healthy: w.Healthy, Workload: wl,
	}
}
