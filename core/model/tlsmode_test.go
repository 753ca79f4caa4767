package model_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/model"
)

// TestTLSModeAsIstiod: an endpoint's TLS mode is derived as istiod's
// getTLSModeFromWorkloadEntry does it: the security.istio.io/tlsMode
// label if set, else istio mTLS when the entry names a service account
// (Istio's VM guide sets no label), else none (plaintext).
func TestTLSModeAsIstiod(t *testing.T) {
	const se = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vm, namespace: ns}
spec:
  hosts: [vm.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
`
	const inline = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: inline, namespace: ns}
spec:
  hosts: [inline.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.1.0.1, serviceAccount: sa}
  - {address: 10.1.0.2, serviceAccount: sa, labels: {security.istio.io/tlsMode: disabled}}
  - {address: 10.1.0.3}
`
	entry := func(name, addr, extra string) string {
		return `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ` + name + `, namespace: ns}
spec:
  address: ` + addr + `
  labels: {app: vm` + extra + `}
` + map[bool]string{true: "  serviceAccount: sa\n"}[name != "nosa"]
	}
	h := newHarness(t)
	h.put(se, inline,
		entry("guide", "10.0.0.1", ""),
		entry("labelled", "10.0.0.2", ", security.istio.io/tlsMode: disabled"),
		entry("nosa", "10.0.0.3", ""))
	want := map[string]string{
		"10.0.0.1": "istio", "10.0.0.2": "disabled", "10.0.0.3": "",
		"10.1.0.1": "istio", "10.1.0.2": "disabled", "10.1.0.3": "",
	}
	got := map[string]string{}
	for _, host := range []string{"vm.ns.mesh", "inline.ns.mesh"} {
		for _, e := range h.reg.Endpoints().Endpoints(model.ServiceKey{Hostname: host, Namespace: "ns"}) {
			got[e.Address] = e.Labels[model.TLSModeLabel]
		}
	}
	for addr, mode := range want {
		if got[addr] != mode {
			t.Errorf("endpoint %s: tlsMode %q, want %q (all: %v)", addr, got[addr], mode, got)
		}
	}
}
