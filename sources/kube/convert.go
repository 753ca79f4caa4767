package kube

import (
	"slices"
	"strconv"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/baremesh/baremesh/core/model"
)

// Labels and annotations read as Istio reads them.
const (
	labelRegion   = "topology.kubernetes.io/region"
	labelZone     = "topology.kubernetes.io/zone"
	labelSubzone  = "topology.istio.io/subzone"
	labelNetwork  = "topology.istio.io/network"
	annoExportTo  = "networking.istio.io/exportTo"
	labelSvcName  = discoveryv1.LabelServiceName
	labelIstioLoc = "istio-locality" // pod label overriding the node's locality, dots for slashes
)

// locality is a node's region/zone/subzone.
type locality struct{ region, zone, subzone string }

func nodeLocality(n *corev1.Node) locality {
	if n == nil {
		return locality{}
	}
	return locality{region: n.Labels[labelRegion], zone: n.Labels[labelZone], subzone: n.Labels[labelSubzone]}
}

func (l locality) String() string {
	if l == (locality{}) {
		return ""
	}
	return strings.TrimRight(l.region+"/"+l.zone+"/"+l.subzone, "/")
}

// hostname is a Service's mesh name: name.namespace.svc.domain.
func hostname(name, namespace, domain string) string {
	return name + "." + namespace + ".svc." + domain
}

// servicePorts converts a Service's ports; the protocol comes from
// appProtocol, else the port name's prefix, as Istio does. UDP and SCTP
// ports are left out (Istio's sidecars do not carry them).
func servicePorts(svc *corev1.Service) []model.Port {
	out := make([]model.Port, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP || p.Protocol == corev1.ProtocolSCTP {
			continue
		}
		var app string
		if p.AppProtocol != nil {
			app = appProtocol(*p.AppProtocol)
		}
		mp := model.Port{Name: p.Name, Number: uint32(p.Port), Protocol: model.ParseProtocol(app, p.Name)}
		if p.TargetPort.IntVal > 0 {
			mp.TargetPort = uint32(p.TargetPort.IntVal)
		}
		out = append(out, mp)
	}
	return out
}

// appProtocol maps Kubernetes' standard appProtocol values (kubernetes.io/h2c,
// kubernetes.io/ws, kubernetes.io/wss) to Istio's names.
func appProtocol(s string) string {
	switch s {
	case "kubernetes.io/h2c":
		return "HTTP2"
	case "kubernetes.io/ws":
		return "HTTP"
	case "kubernetes.io/wss":
		return "TLS"
	}
	return s
}

// convertService makes the model's Service of a Kubernetes Service. A
// headless Service (clusterIP None) is Passthrough, an ExternalName one is
// resolved by DNS, as in Istio.
func convertService(svc *corev1.Service, domain string) *model.Service {
	s := &model.Service{
		Hostname: hostname(svc.Name, svc.Namespace, domain), Namespace: svc.Namespace,
		Ports: servicePorts(svc), Labels: svc.Labels, Selector: svc.Spec.Selector,
		TrafficDistribution: model.ParseTrafficDistribution(svc.Spec.TrafficDistribution, svc.Annotations),
	}
	if e := svc.Annotations[annoExportTo]; e != "" {
		for _, x := range strings.Split(e, ",") {
			if x = strings.TrimSpace(x); x != "" {
				s.ExportTo = append(s.ExportTo, x)
			}
		}
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		s.Resolution = model.DNSLB
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		s.Resolution = model.Passthrough
	default:
		s.Addresses = append(s.Addresses, svc.Spec.ClusterIPs...)
		if len(s.Addresses) == 0 && svc.Spec.ClusterIP != "" {
			s.Addresses = []string{svc.Spec.ClusterIP}
		}
	}
	return s
}

// lookups are what endpoint conversion reads besides the slices.
type lookups struct {
	pod  func(namespace, name string) *corev1.Pod
	node func(name string) *corev1.Node
}

// sliceEndpoints converts the endpoints of a Service's EndpointSlices:
// one model.Endpoint per address and service port, with the pod's labels,
// service account and network, the node's locality (the slice's zone when
// the node is unknown) and readiness (serving-but-terminating counts as
// not ready, as in Istio).
func sliceEndpoints(svc *model.Service, extName string, slices []*discoveryv1.EndpointSlice, lk lookups) []*model.Endpoint {
	var out []*model.Endpoint
	if extName != "" {
		for _, p := range svc.Ports {
			out = append(out, &model.Endpoint{Address: extName, Port: p.Number, ServicePortName: p.Name, Weight: 1, Healthy: true})
		}
		return out
	}
	seen := map[string]bool{}
	for _, sl := range slices {
		if sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range sl.Endpoints {
			var pod *corev1.Pod
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				pod = lk.pod(sl.Namespace, ep.TargetRef.Name)
			}
			var node *corev1.Node
			switch {
			case ep.NodeName != nil:
				node = lk.node(*ep.NodeName)
			case pod != nil && pod.Spec.NodeName != "":
				node = lk.node(pod.Spec.NodeName)
			}
			loc := nodeLocality(node)
			if loc.zone == "" && ep.Zone != nil {
				loc.zone = *ep.Zone
			}
			e := model.Endpoint{Locality: loc.String(), Weight: 1, Healthy: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
			if pod != nil {
				e.Labels, e.ServiceAccount, e.Network = pod.Labels, pod.Spec.ServiceAccountName, pod.Labels[labelNetwork]
				if l := pod.Labels[labelIstioLoc]; l != "" {
					e.Locality = strings.ReplaceAll(l, ".", "/")
				}
			}
			for _, addr := range ep.Addresses {
				for _, sp := range sl.Ports {
					name := ""
					if sp.Name != nil {
						name = *sp.Name
					}
					if sp.Port == nil || !hasPort(svc, name) {
						continue
					}
					ne := e
					ne.Address, ne.Port, ne.ServicePortName = addr, uint32(*sp.Port), name
					// Slices of one Service may overlap while they are
					// rebalanced; list each address and port once.
					id := addr + "|" + name
					if seen[id] {
						continue
					}
					seen[id] = true
					out = append(out, &ne)
				}
			}
		}
	}
	return out
}

func hasPort(svc *model.Service, name string) bool {
	for _, p := range svc.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// podWorkload makes a Pod a workload instance that ServiceEntries'
// workloadSelector can select; nil for a pod without an IP or one that
// has ended.
func podWorkload(cluster string, pod *corev1.Pod, node *corev1.Node) *model.WorkloadInstance {
	if pod.Status.PodIP == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
		return nil
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	loc := nodeLocality(node).String()
	if l := pod.Labels[labelIstioLoc]; l != "" {
		loc = strings.ReplaceAll(l, ".", "/")
	}
	return &model.WorkloadInstance{
		Name: pod.Name, Namespace: pod.Namespace, Address: pod.Status.PodIP, Labels: pod.Labels,
		Network: pod.Labels[labelNetwork], Locality: loc, Weight: 1, ServiceAccount: pod.Spec.ServiceAccountName,
		Healthy: ready, Source: model.PodKey(cluster, pod.Namespace, pod.Name),
	}
}

// namespaceFilter says which namespaces the mesh sees: all when there are
// no discoverySelectors, else those whose labels any selector matches.
type namespaceFilter []labels.Selector

func newNamespaceFilter(sels []*meshv1alpha1.LabelSelector) (namespaceFilter, error) {
	var out namespaceFilter
	for _, s := range sels {
		ls := &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
		for _, e := range s.GetMatchExpressions() {
			ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: e.GetKey(), Operator: metav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues(),
			})
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

func (f namespaceFilter) selects(ns *corev1.Namespace) bool {
	if len(f) == 0 {
		return true
	}
	if ns == nil {
		return false
	}
	for _, s := range f {
		if s.Matches(labels.Set(ns.Labels)) {
			return true
		}
	}
	return false
}

// Labels that make a Service a network's east-west gateway, as istiod
// reads them.
const (
	labelGatewayPort   = "networking.istio.io/gatewayPort"
	defaultGatewayPort = 15443
)

// networkGateways are the gateways a Service labelled
// topology.istio.io/network stands for, as istiod's getGatewayDetails:
// its load balancer's IPs and hostnames (an AWS load balancer gives
// hostnames; the daemon resolves them) and its external IPs, on its
// gateway port (networking.istio.io/gatewayPort, else 15443), which must
// be a port of the Service. Sorted; nil for any other Service.
func networkGateways(svc *corev1.Service) []model.NetworkGateway {
	nw := svc.Labels[labelNetwork]
	if nw == "" {
		return nil
	}
	port := defaultGatewayPort
	if v := svc.Labels[labelGatewayPort]; v != "" {
		if p, err := strconv.Atoi(v); err == nil {
			port = p
		}
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port }) {
		return nil
	}
	addrs := externalIPs(svc)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP == "" && in.Hostname != "" {
				addrs = append(addrs, in.Hostname)
			}
		}
	}
	slices.Sort(addrs)
	var gws []model.NetworkGateway
	for _, a := range slices.Compact(addrs) {
		gws = append(gws, model.NetworkGateway{Network: nw, Addr: a, Port: uint32(port)})
	}
	return gws
}

// externalIPs are a Service's load balancer IPs (hostnames are not
// resolved) and external IPs, sorted, each once; nil for none.
func externalIPs(svc *corev1.Service) []string {
	var addrs []string
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addrs = append(addrs, in.IP)
			}
		}
	}
	addrs = append(addrs, svc.Spec.ExternalIPs...)
	slices.Sort(addrs)
	return slices.Compact(addrs)
}
