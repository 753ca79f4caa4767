package model_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

const kubeHost = "reviews.ns.svc.cluster.local"

func kubeSvc(ip string, selector map[string]string, eps ...string) *model.KubeService {
	s := &model.Service{Hostname: kubeHost, Namespace: "ns", Addresses: []string{ip},
		Ports: []model.Port{{Name: "http", Number: 9080, Protocol: model.HTTP}}, Selector: selector}
	ks := &model.KubeService{Name: "reviews", Service: s}
	for _, a := range eps {
		ks.Endpoints = append(ks.Endpoints, &model.Endpoint{Address: a, Port: 9080, ServicePortName: "http", Weight: 1, Healthy: true,
			Labels: map[string]string{"app": "reviews"}, ServiceAccount: "reviews"})
	}
	return ks
}

func addrs(eps []*model.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Address)
	}
	return out
}

func TestKubeServicesMergeAcrossClustersAndResyncIsNoOp(t *testing.T) {
	h := newHarness(t)
	sk := model.ServiceKey{Hostname: kubeHost, Namespace: "ns"}
	ch := h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "west", Full: true, Services: []*model.KubeService{kubeSvc("10.96.0.2", nil, "10.2.0.1")}}})
	if !ch.Services[sk] {
		t.Fatalf("new Service not reported: %+v", ch)
	}
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "east", Full: true, Services: []*model.KubeService{kubeSvc("10.96.0.1", nil, "10.1.0.1")}}})
	svcs := h.reg.Services()
	if len(svcs) != 1 || svcs[0].Addresses[0] != "10.96.0.1" {
		t.Fatalf("services = %+v; want one, defined by the cluster that sorts first (east)", svcs)
	}
	if got := addrs(h.reg.Endpoints().Endpoints(sk)); len(got) != 2 || got[0] != "10.1.0.1" || got[1] != "10.2.0.1" {
		t.Fatalf("endpoints = %v, want both clusters'", got)
	}
	// A resync that delivers the same state changes nothing.
	if ch := h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "east", Full: true, Services: []*model.KubeService{kubeSvc("10.96.0.1", nil, "10.1.0.1")}}}); !ch.Empty() {
		t.Fatalf("identical full resync changed %+v", ch)
	}
	// An endpoint change is endpoint-only.
	ch = h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "east", Services: []*model.KubeService{kubeSvc("10.96.0.1", nil, "10.1.0.1", "10.1.0.2")}}})
	if len(ch.Services) != 0 || !ch.Endpoints[sk] {
		t.Fatalf("endpoint change: %+v", ch)
	}
	// Removing a cluster keeps the other's service and endpoints.
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "east", Full: true}})
	if got := addrs(h.reg.Endpoints().Endpoints(sk)); len(got) != 1 || got[0] != "10.2.0.1" {
		t.Fatalf("after removing east: %v", got)
	}
	if svcs := h.reg.Services(); len(svcs) != 1 || svcs[0].Addresses[0] != "10.96.0.2" {
		t.Fatalf("after removing east: %+v", svcs)
	}
	// A full update without the Service removes it.
	if ch := h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "west", Full: true}}); !ch.Services[sk] || len(h.reg.Services()) != 0 {
		t.Fatalf("full update without the Service: %+v", ch)
	}
	if cs := h.reg.Clusters(); len(cs) != 0 {
		t.Fatalf("clusters left: %v", cs)
	}
}

func TestKubeServiceSelectsWorkloadEntries(t *testing.T) {
	h := newHarness(t)
	sk := model.ServiceKey{Hostname: kubeHost, Namespace: "ns"}
	sel := map[string]string{"app": "reviews"}
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c1", Full: true, Services: []*model.KubeService{kubeSvc("10.96.0.1", sel, "10.1.0.1")}}})
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c2", Full: true, Services: []*model.KubeService{kubeSvc("10.96.0.9", sel)}}})
	ch := h.put(we("vm1", "192.168.1.10", "reviews"), we("other", "192.168.1.11", "ratings"))
	// Its account ("sa") is new to the service: a service change.
	if !ch.Services[sk] {
		t.Fatalf("a WorkloadEntry with a new account the Service selects should change it: %+v", ch)
	}
	eps := h.reg.Endpoints().Endpoints(sk)
	if got := addrs(eps); len(got) != 2 || got[0] != "10.1.0.1" || got[1] != "192.168.1.10" {
		t.Fatalf("endpoints = %v, want the slice's pod and the VM once (two clusters hold the Service)", got)
	}
	vm := eps[1]
	if vm.Port != 8080 || vm.ServiceAccount != "sa" || vm.Workload.Kind != config.WorkloadEntry {
		t.Fatalf("VM endpoint = %+v (want the WorkloadEntry's named port 8080)", vm)
	}
	// Relabelling the VM out of the selector removes it.
	h.put(we("vm1", "192.168.1.10", "ratings"))
	if got := addrs(h.reg.Endpoints().Endpoints(sk)); len(got) != 1 {
		t.Fatalf("after relabel: %v", got)
	}
	// The Service leaving every cluster drops the VM's shard too.
	h.put(we("vm1", "192.168.1.10", "reviews"))
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c1", Full: true}})
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c2", Full: true}})
	if got := h.reg.Endpoints().Endpoints(sk); len(got) != 0 {
		t.Fatalf("endpoints of a removed Service: %v", addrs(got))
	}
}

func TestServiceEntrySelectsPods(t *testing.T) {
	h := newHarness(t)
	h.put(seSelector)
	svcKey := model.ServiceKey{Hostname: "reviews.ns.mesh", Namespace: "ns"}
	pod := &model.WorkloadInstance{Name: "reviews-0", Namespace: "ns", Address: "10.1.0.7", Labels: map[string]string{"app": "reviews"},
		ServiceAccount: "reviews", Locality: "r/z", Weight: 1, Healthy: true, Source: model.PodKey("c1", "ns", "reviews-0")}
	ch := h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c1", Full: true, Pods: []*model.WorkloadInstance{pod}}})
	// The pod brings the service its first account ("reviews"): cluster
	// SANs change, so the service does (accounts.go).
	if !ch.Services[svcKey] {
		t.Fatalf("a selected pod with a new service account should change the service: %+v", ch)
	}
	eps := h.reg.Endpoints().Endpoints(svcKey)
	if len(eps) != 2 || eps[0].Address != "10.1.0.7" || eps[0].Locality != "r/z" || eps[0].Workload != pod.Source {
		t.Fatalf("endpoints = %+v", eps)
	}
	// The same pod again changes nothing; its deletion removes it.
	same := *pod
	if ch := h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c1", Pods: []*model.WorkloadInstance{&same}}}); !ch.Empty() {
		t.Fatalf("unchanged pod: %+v", ch)
	}
	h.reg.Apply(model.Update{Kube: &model.KubeUpdate{Cluster: "c1", DeletedPods: []config.Key{pod.Source}}})
	if n := len(h.reg.Endpoints().Endpoints(svcKey)); n != 0 {
		t.Fatalf("endpoints after pod deletion: %d", n)
	}
	if len(h.reg.Workloads()) != 0 {
		t.Fatal("pods must not be listed as WorkloadEntries")
	}
}
