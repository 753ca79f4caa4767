package nds_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/nds"
)

const meshConfig = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: explicit, namespace: app}
spec:
  hosts: [db.example.internal]
  addresses: [10.9.0.1, 10.9.0.2/32, 10.9.0.0/24, "2001:db8::9"]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: auto, namespace: app}
spec:
  hosts: [ratings.bookinfo.mesh]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild, namespace: app}
spec:
  hosts: ["*.noaddr.example.com"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild-addr, namespace: app}
spec:
  hosts: ["*.addr.example.com"]
  addresses: [10.9.1.1]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: app}
spec:
  hosts: [vms.app.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-a, namespace: app}
spec: {address: 10.2.0.2, labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-b, namespace: app}
spec: {address: 10.2.0.1, labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-other-network, namespace: app}
spec: {address: 10.2.0.3, labels: {app: vm}, network: far}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: private, namespace: other}
spec:
  hosts: [private.other.mesh]
  addresses: [10.9.2.1]
  exportTo: ["."]
  ports: [{number: 80, name: http, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: shared, namespace: app}
spec:
  hosts: [shared.mesh]
  addresses: [10.9.3.1]
  ports: [{number: 80, name: http, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: shared, namespace: other}
spec:
  hosts: [shared.mesh]
  addresses: [10.9.3.2, 10.9.3.1]
  ports: [{number: 80, name: http, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: squatter, namespace: app}
spec:
  hosts: [reviews.bookinfo.svc.cluster.local]
  addresses: [10.9.4.1]
  ports: [{number: 80, name: http, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: scoped, namespace: scoped}
spec:
  egress: [{hosts: ["app/db.example.internal", "bookinfo/*"]}]
`

// snapshot is the scenario above plus Kubernetes Services of cluster
// "east": a ClusterIP Service (dual-stack), a headless one with ready,
// unready and far-network pods, and a multi-cluster (clusterset) host.
func snapshot(t *testing.T) *push.PushContext {
	t.Helper()
	http := []model.Port{{Name: "http", Number: 9080, Protocol: model.HTTP}}
	ep := func(addr, network string, healthy bool) *model.Endpoint {
		return &model.Endpoint{Address: addr, Port: 9080, ServicePortName: "http", Network: network, Healthy: healthy, Weight: 1}
	}
	pc, err := gentest.BuildKube([]model.KubeUpdate{{Cluster: "east", Full: true, Services: []*model.KubeService{
		{Name: "reviews", Service: &model.Service{Hostname: "reviews.bookinfo.svc.cluster.local", Namespace: "bookinfo",
			Addresses: []string{"10.96.0.10", "fd00::10"}, Ports: http}},
		{Name: "mysql", Service: &model.Service{Hostname: "mysql.bookinfo.svc.cluster.local", Namespace: "bookinfo",
			Resolution: model.Passthrough, Ports: http}, Endpoints: []*model.Endpoint{
			ep("10.244.0.7", "", true), ep("10.244.0.5", "", true), ep("10.244.0.6", "", false), ep("10.250.0.1", "far", true),
		}},
		{Name: "nocluster-ports", Service: &model.Service{Hostname: "noports.bookinfo.svc.cluster.local", Namespace: "bookinfo",
			Resolution: model.Passthrough}, Endpoints: []*model.Endpoint{ep("10.244.1.1", "", true)}},
		{Name: "details", Service: &model.Service{Hostname: "details.bookinfo.svc.clusterset.local", Namespace: "bookinfo",
			Addresses: []string{"10.96.0.11"}, Ports: http}},
	}}}, []byte(meshConfig))
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestNameTable checks the table of each kind of proxy against istiod's
// rules (package comment), entry by entry.
func TestNameTable(t *testing.T) {
	pc := snapshot(t)
	autoV4 := pc.Service("ratings.bookinfo.mesh", "app").Addresses[0]
	autoV6 := pc.Service("ratings.bookinfo.mesh", "app").AutoAllocatedIPv6
	kube := func(ns, name string, ips ...string) *nds.Info {
		return &nds.Info{IPs: ips, Registry: nds.Kubernetes, Shortname: name, Namespace: ns}
	}
	ext := func(ips ...string) *nds.Info { return &nds.Info{IPs: ips, Registry: nds.External} }
	common := nds.Table{
		"db.example.internal":                   ext("10.9.0.1", "10.9.0.2", "2001:db8::9"),
		"*.addr.example.com":                    ext("10.9.1.1"),
		"shared.mesh":                           ext("10.9.3.1", "10.9.3.2"),
		"reviews.bookinfo.svc.cluster.local":    kube("bookinfo", "reviews", "10.96.0.10"),
		"mysql.bookinfo.svc.cluster.local":      kube("bookinfo", "mysql", "10.244.0.5", "10.244.0.7", "10.250.0.1"),
		"details.bookinfo.svc.clusterset.local": {IPs: []string{"10.96.0.11"}, Registry: nds.Kubernetes},
	}
	with := func(base nds.Table, edits nds.Table) nds.Table {
		out := nds.Table{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range edits {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		node gentest.ProxySpec
		want nds.Table
	}{
		// istiod 1.31: DNS capture alone consumes allocated addresses.
		{"capture without DNS_AUTO_ALLOCATE", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_CAPTURE": "true"}}, with(common, nds.Table{"ratings.bookinfo.mesh": ext(autoV4)})},
		{"no capture, DNS_AUTO_ALLOCATE", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_AUTO_ALLOCATE": "true"}}, common},
		{"auto-allocation, IPv4 proxy", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"}},
			with(common, nds.Table{"ratings.bookinfo.mesh": ext(autoV4)})},
		{"auto-allocation, dual-stack proxy", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true", "INSTANCE_IPS": "10.0.0.1,fd00::1"}},
			with(common, nds.Table{"ratings.bookinfo.mesh": ext(autoV4, autoV6),
				"reviews.bookinfo.svc.cluster.local": kube("bookinfo", "reviews", "10.96.0.10", "fd00::10")})},
		{"auto-allocation, IPv6 proxy", gentest.ProxySpec{ID: "sidecar~fd00::1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"}},
			with(common, nds.Table{"ratings.bookinfo.mesh": ext(autoV6),
				"reviews.bookinfo.svc.cluster.local":    kube("bookinfo", "reviews", "fd00::10"),
				"details.bookinfo.svc.clusterset.local": nil})},
		// A proxy without a network sees every network's endpoints; one
		// in network "near" leaves out those of "far" (unset counts as
		// any network, as in istiod).
		{"network near: no headless endpoint of another network", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.app~app.svc.cluster.local",
			Metadata: map[string]string{"DNS_CAPTURE": "true", "NETWORK": "near"}},
			with(common, nds.Table{"mysql.bookinfo.svc.cluster.local": kube("bookinfo", "mysql", "10.244.0.5", "10.244.0.7"), "ratings.bookinfo.mesh": ext(autoV4)})},
		{"namespace other sees its private host", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.other~other.svc.cluster.local"},
			with(common, nds.Table{"private.other.mesh": ext("10.9.2.1")})},
		{"Sidecar egress scope", gentest.ProxySpec{ID: "sidecar~10.0.0.1~vm.scoped~scoped.svc.cluster.local"},
			nds.Table{"db.example.internal": ext("10.9.0.1", "10.9.0.2", "2001:db8::9"),
				"reviews.bookinfo.svc.cluster.local":    kube("bookinfo", "reviews", "10.96.0.10"),
				"mysql.bookinfo.svc.cluster.local":      kube("bookinfo", "mysql", "10.244.0.5", "10.244.0.7", "10.250.0.1"),
				"details.bookinfo.svc.clusterset.local": {IPs: []string{"10.96.0.11"}, Registry: nds.Kubernetes}}},
		{"gateway", gentest.ProxySpec{ID: "router~10.0.0.1~gw.app~app.svc.cluster.local"}, common},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := gentest.Run(t, nds.Generate, gen.Input{Push: pc, Proxy: tc.node.Proxy(t)})
			if len(res) != 1 {
				t.Fatalf("Generate: %d resources, want 1", len(res))
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res[0].Resource)
			if err != nil {
				t.Fatal(err)
			}
			got, err := nds.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, got, tc.want)
		})
	}
}

func diff(t *testing.T, got, want nds.Table) {
	t.Helper()
	for h, w := range want {
		g := got[h]
		if g == nil {
			t.Errorf("%s: missing, want %+v", h, *w)
		} else if !slices.Equal(g.IPs, w.IPs) || g.Registry != w.Registry || g.Shortname != w.Shortname || g.Namespace != w.Namespace {
			t.Errorf("%s: got %+v, want %+v", h, *g, *w)
		}
	}
	for h, g := range got {
		if want[h] == nil {
			t.Errorf("%s: unexpected entry %+v", h, *g)
		}
	}
}

// TestNameTableTypeURL: the resource is an istio.networking.nds.v1.NameTable,
// the type pilot-agent unpacks, and the bytes are deterministic.
func TestNameTableTypeURL(t *testing.T) {
	pc := snapshot(t)
	p := gentest.Node(t, "sidecar~10.0.0.1~vm.app~app.svc.cluster.local", nil)
	res, _ := nds.Generate(gen.Input{Push: pc, Proxy: p})
	if u := "type.googleapis.com/" + string(res[0].Resource.ProtoReflect().Descriptor().FullName()); u != nds.TypeURL {
		t.Fatalf("type URL %s", u)
	}
	var first []byte
	for i := range 20 {
		res, _ := nds.Generate(gen.Input{Push: pc, Proxy: p})
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(res[0].Resource)
		if i == 0 {
			first = b
		} else if string(b) != string(first) {
			t.Fatal("two generations of one input differ")
		}
	}
	if !strings.Contains(string(first), "mysql.bookinfo.svc.cluster.local") {
		t.Fatal("encoded table lacks a host")
	}
}

// BenchmarkNameTable: one proxy's table (generation and encoding) with
// 1,000 ServiceEntries, 500 of them auto-allocated: the cost of an NDS
// push per DNS-capturing proxy, paid again on endpoint pushes.
func BenchmarkNameTable(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		addr := ""
		if i%2 == 0 {
			addr = fmt.Sprintf("addresses: [10.%d.%d.1]", i/250, i%250)
		}
		fmt.Fprintf(&sb, "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s%d, namespace: ns%d}\n"+
			"spec: {hosts: [s%d.ns%d.mesh], %s ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}\n---\n", i, i%10, i, i%10, strings.Replace(addr, "]", "],", 1))
	}
	pc := gentest.MustBuild(b, sb.String())
	p := gentest.Node(b, "sidecar~10.0.0.1~vm.ns0~ns0.svc.cluster.local", map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"})
	if tb := nds.Build(pc, p); len(tb) != 1000 {
		b.Fatalf("%d entries", len(tb))
	}
	b.ReportAllocs()
	for b.Loop() {
		res, _ := nds.Generate(gen.Input{Push: pc, Proxy: p})
		out, err := proto.MarshalOptions{Deterministic: true}.Marshal(res[0].Resource)
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

// TestEncodingMatchesProto: the hand-made encoding is byte for byte a
// deterministic proto.Marshal of the same table built field by field
// through the NameTable descriptor.
func TestEncodingMatchesProto(t *testing.T) {
	pc := snapshot(t)
	for _, id := range []string{"sidecar~10.0.0.1~vm.app~app.svc.cluster.local", "sidecar~10.0.0.1~vm.scoped~scoped.svc.cluster.local"} {
		p := gentest.Node(t, id, map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true", "INSTANCE_IPS": "10.0.0.1,fd00::1"})
		tb := nds.Build(pc, p)
		tb["empty.example"] = &nds.Info{}
		fast, err := proto.MarshalOptions{Deterministic: true}.Marshal(tb.Message())
		if err != nil {
			t.Fatal(err)
		}
		slow, err := proto.MarshalOptions{Deterministic: true}.Marshal(tb.ReflectMessage())
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(slow) {
			t.Fatalf("%s: encodings differ:\n%x\n%x", id, fast, slow)
		}
	}
}

// TestEndpointsMatter: only endpoint changes of headless Kubernetes
// Services (or of a service no longer there) can change a table.
func TestEndpointsMatter(t *testing.T) {
	pc := snapshot(t)
	p := gentest.Node(t, "sidecar~10.0.0.1~vm.app~app.svc.cluster.local", nil)
	for _, tc := range []struct {
		svc  model.ServiceKey
		want bool
	}{
		{model.ServiceKey{Hostname: "db.example.internal", Namespace: "app"}, false},
		{model.ServiceKey{Hostname: "reviews.bookinfo.svc.cluster.local", Namespace: "bookinfo"}, false},
		{model.ServiceKey{Hostname: "vms.app.mesh", Namespace: "app"}, false},
		{model.ServiceKey{Hostname: "mysql.bookinfo.svc.cluster.local", Namespace: "bookinfo"}, true},
		{model.ServiceKey{Hostname: "gone.mesh", Namespace: "app"}, true},
	} {
		if got := nds.EndpointsMatter(pc, p, map[model.ServiceKey]bool{tc.svc: true}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.svc, got, tc.want)
		}
	}
}
