package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/model"
)

func TestConvertService(t *testing.T) {
	h2c, custom := "kubernetes.io/h2c", "mongo"
	for _, tc := range []struct {
		name  string
		spec  corev1.ServiceSpec
		res   model.Resolution
		addrs int
		ports map[string]model.Protocol
	}{
		{"cluster IP, protocol from name and appProtocol", corev1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"}, Ports: []corev1.ServicePort{
			{Name: "http-web", Port: 80}, {Name: "x", Port: 81, AppProtocol: &h2c}, {Name: "db", Port: 27017, AppProtocol: &custom},
			{Name: "grpc", Port: 90}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "other", Port: 1000},
		}}, model.ClientSideLB, 1, map[string]model.Protocol{"http-web": model.HTTP, "x": model.HTTP2, "db": model.Mongo, "grpc": model.GRPC, "other": model.Unsupported}},
		{"headless is passthrough", corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "tcp", Port: 5}}},
			model.Passthrough, 0, map[string]model.Protocol{"tcp": model.TCP}},
		{"ExternalName is DNS", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
			model.DNSLB, 0, map[string]model.Protocol{"https": model.HTTPS}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{annoExportTo: ".,istio-system"}}, Spec: tc.spec}
			s := convertService(svc, "corp.local")
			if s.Hostname != "s.ns.svc.corp.local" || s.Resolution != tc.res || len(s.Addresses) != tc.addrs || len(s.ExportTo) != 2 {
				t.Fatalf("service = %+v", s)
			}
			got := map[string]model.Protocol{}
			for _, p := range s.Ports {
				got[p.Name] = p.Protocol
			}
			if len(got) != len(tc.ports) {
				t.Fatalf("ports = %v, want %v (UDP left out)", got, tc.ports)
			}
			for n, p := range tc.ports {
				if got[n] != p {
					t.Fatalf("port %s: %q, want %q", n, got[n], p)
				}
			}
		})
	}
}

func TestPodWorkload(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelRegion: "r", labelZone: "z"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a", labelNetwork: "n1"}},
		Spec:   corev1.PodSpec{ServiceAccountName: "sa"},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Phase: corev1.PodRunning}}
	w := podWorkload("c1", pod, node)
	if w == nil || w.Locality != "r/z" || w.Network != "n1" || w.ServiceAccount != "sa" || w.Healthy || w.Source != model.PodKey("c1", "ns", "p") {
		t.Fatalf("workload = %+v (not ready: unhealthy)", w)
	}
	pod.Status.PodIP = ""
	if podWorkload("c1", pod, node) != nil {
		t.Fatal("a pod without an IP is no workload")
	}
}

// TestConvertTrafficDistribution: a Service's spec.trafficDistribution,
// else istiod's annotation (any case), is its traffic distribution, as
// istiod's GetTrafficDistribution reads them; the spec wins.
func TestConvertTrafficDistribution(t *testing.T) {
	closeV, node, unknown := "PreferClose", "PreferSameNode", "Elsewhere"
	for _, tc := range []struct {
		spec *string
		anno string
		want model.TrafficDistribution
	}{
		{nil, "", model.TrafficDistributionAny},
		{&closeV, "", model.TrafficDistributionPreferSameZone},
		{&node, "PreferClose", model.TrafficDistributionPreferSameNode},
		{nil, "prefersamenode", model.TrafficDistributionPreferSameNode},
		{&unknown, "PreferSameZone", model.TrafficDistributionPreferSameZone},
		{nil, "Nearest", model.TrafficDistributionAny},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", TrafficDistribution: tc.spec}}
		if tc.anno != "" {
			svc.Annotations = map[string]string{model.AnnotationTrafficDistribution: tc.anno}
		}
		if got := convertService(svc, "cluster.local").TrafficDistribution; got != tc.want {
			spec := "<nil>"
			if tc.spec != nil {
				spec = *tc.spec
			}
			t.Errorf("spec %s, annotation %q: %v, want %v", spec, tc.anno, got, tc.want)
		}
	}
}
