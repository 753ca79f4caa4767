package generation

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// vmFleet is a VM fleet as auto-registration makes it: 1,000 VMs, each a
// WorkloadEntry at its own IP, 20 to each of 50 ServiceEntries selecting
// them by label, beside 150 services elsewhere.
func vmFleet(tb testing.TB) (string, []*model.Proxy) {
	var b strings.Builder
	var proxies []*model.Proxy
	for s := range 200 {
		fmt.Fprintf(&b, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-%d, namespace: vms}
spec:
  hosts: [svc-%d.vms.example]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9090, name: grpc, protocol: GRPC}]
`, s, s)
		if s < 50 {
			fmt.Fprintf(&b, "  workloadSelector: {labels: {app: svc-%d}}\n---\n", s)
			continue
		}
		fmt.Fprintf(&b, "  endpoints: [{address: 10.9.%d.1}, {address: 10.9.%d.2}]\n---\n", s, s)
	}
	for v := range 1000 {
		ip := fmt.Sprintf("10.1.%d.%d", v/250, v%250+1)
		app := fmt.Sprintf("svc-%d", v%50)
		fmt.Fprintf(&b, `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-%d, namespace: vms}
spec: {address: %s, labels: {app: %s}}
---
`, v, ip, app)
		proxies = append(proxies, &model.Proxy{ID: fmt.Sprintf("vm-%d.vms", v), Type: model.SidecarProxy, Namespace: "vms",
			IPs: []string{ip}, Labels: map[string]string{"app": app}, Metadata: map[string]string{}})
	}
	return b.String(), proxies
}

// BenchmarkVMFleetFullPush: LDS and CDS for every VM of vmFleet on a full
// push (a fresh cache), and how many distinct outputs were generated.
func BenchmarkVMFleetFullPush(b *testing.B) {
	conf, proxies := vmFleet(b)
	pc, err := gentest.Build([]byte(conf))
	if err != nil {
		b.Fatal(err)
	}
	var generated int
	for b.Loop() {
		bld := New(Options{})
		for _, p := range proxies {
			for _, t := range []*xdstype.Type{xdstype.Listener, xdstype.Cluster} {
				if _, _, err := bld.Build(pc, t, p, nil, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		generated = len(bld.shapes.m)
	}
	b.ReportMetric(float64(generated), "generated")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(proxies)), "µs/vm")
}

// TestVMFleetSharesInbound: VMs that serve the same service ports from
// different addresses share their LDS and CDS (every auto-registered VM
// is an endpoint at its own IP, and with the IP in the cache key each
// generated its own on every full push: 2,000 generations for 1,000
// VMs in BenchmarkVMFleetFullPush, 3.9 ms each); VMs serving other
// services share all of it but what they serve (the inbound listener
// and clusters), and a Sidecar whose ingress default endpoint is 0.0.0.0
// (the VM's own IP) keeps each VM's CDS apart. The cache assertion
// regenerates every hit for the real proxy.
func TestVMFleetSharesInbound(t *testing.T) {
	conf, proxies := vmFleet(t)
	conf += `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: any, namespace: ingress}
spec:
  ingress:
  - port: {number: 7070, protocol: TCP, name: tcp}
    defaultEndpoint: 0.0.0.0:7070
`
	pc, err := gentest.Build([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	for _, p := range proxies[:200] { // 4 VMs for each of the 50 selected services
		for _, typ := range []*xdstype.Type{xdstype.Listener, xdstype.Cluster} {
			res, _, err := b.Build(pc, typ, p, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if typ == xdstype.Cluster && wire.Find(res, "inbound|8080||") == nil {
				t.Fatalf("%s: no inbound cluster for port 8080 in %d clusters", p.ID, len(res))
			}
		}
		// RDS reads no inbound side: checked by the assertion.
		if _, _, err := b.Build(pc, xdstype.Route, p, []string{"8080", "9090"}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	count := map[string]int{}
	for k := range b.shapes.m {
		switch {
		case k.typeURL == xdstype.Route.URL:
			count["rds"]++
		case k.part == gen.PartShared:
			count["shared"]++
		default:
			count["whole"]++
		}
	}
	// Their app label is read only by the ServiceEntries' selectors (what
	// they serve): one RDS, one shared part of LDS and of CDS for all.
	if want := map[string]int{"whole": 100, "shared": 2, "rds": 1}; !maps.Equal(count, want) {
		t.Errorf("200 VMs serving 50 services: generated %v, want %v (a whole LDS and CDS per service)", count, want)
	}
	for _, ip := range []string{"10.2.0.1", "10.2.0.2"} {
		p := &model.Proxy{ID: "ingress-" + ip, Type: model.SidecarProxy, Namespace: "ingress", IPs: []string{ip}, Metadata: map[string]string{}}
		res, _, err := b.Build(pc, xdstype.Cluster, p, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := wire.Find(res, "inbound|7070||")
		if c == nil {
			t.Fatalf("%s: no inbound|7070||", p.ID)
		}
		a, err := c.Any()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(a.GetValue()), ip) {
			t.Errorf("%s: inbound|7070|| does not send to its own IP", p.ID)
		}
	}
	if len(mismatch) > 0 {
		t.Errorf("cache assertion: %d mismatches, first: %s", len(mismatch), mismatch[0])
	}
}
