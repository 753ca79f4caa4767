package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// gammaServices are echo.mesh (the service a client calls, selecting
// every backend) and echo-v1.mesh / echo-v2.mesh (the backends by
// version): Gateway API routes split by service, not by subset.
func gammaServices(backends map[string]*backend, versions map[string]string) string {
	var sb strings.Builder
	for _, svc := range []struct{ name, sel string }{{"echo", "app: echo"}, {"echo-v1", "version: v1"}, {"echo-v2", "version: v2"}} {
		fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: %s, namespace: default}
spec:
  hosts: [%s.mesh]
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  workloadSelector: {labels: {%s}}
---
`, svc.name, svc.name, svc.sel)
	}
	for name, b := range backends {
		fmt.Fprintf(&sb, `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: %s, namespace: default}
spec:
  address: 127.0.0.1
  ports: {grpc: %d}
  labels: {app: echo, version: %s}
---
`, name, b.port, versions[name])
	}
	return sb.String()
}

// gammaRoute is a route of kind (GRPCRoute or HTTPRoute) attached to the
// echo ServiceEntry: x-user: jason to v2, else v1/v2 by weight.
func gammaRoute(kind string, v1, v2 int) string {
	match := `{headers: [{name: x-user, value: jason}]}`
	if kind == "GRPCRoute" {
		match = `{method: {service: grpc.health.v1.Health, method: Check}, headers: [{name: x-user, value: jason}]}`
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata: {name: echo, namespace: default}
spec:
  parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: echo}]
  rules:
  - matches: [%s]
    backendRefs: [{group: networking.istio.io, kind: Hostname, name: echo-v2.mesh, port: 7070}]
  - backendRefs:
    - {group: networking.istio.io, kind: Hostname, name: echo-v1.mesh, port: 7070, weight: %d}
    - {group: networking.istio.io, kind: Hostname, name: echo-v2.mesh, port: 7070, weight: %d}
`, kind, match, v1, v2)
}

// TestGatewayAPIMeshRoutesGRPCGo: grpc-go's own xDS client is routed by a
// GRPCRoute and by an HTTPRoute attached to a service (GAMMA), both read
// from a config directory: the header match and the weights hold over
// real RPCs, and replacing one route kind by the other keeps working.
func TestGatewayAPIMeshRoutesGRPCGo(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	versions := map[string]string{"a1": "v1", "b1": "v2"}
	m := startMesh(t, map[string]string{"echo.yaml": gammaServices(bs, versions), "route.yaml": gammaRoute("GRPCRoute", 80, 20)})
	cc := m.xdsClient(t, "client")
	ctx := context.Background()

	check := func(t *testing.T, kind string, wantV1 int) {
		t.Helper()
		for i := 0; i < 30; i++ {
			b, err := call(ctx, cc, "x-user", "jason")
			if err != nil || b != "b1" {
				t.Fatalf("%s: header match: call %d answered by %q (%v), want b1 (v2)", kind, i, b, err)
			}
		}
		counts := map[string]int{}
		for i := 0; i < 1000; i++ {
			b, err := call(ctx, cc)
			if err != nil {
				t.Fatalf("%s: rpc %d: %v", kind, i, err)
			}
			counts[versions[b]]++
		}
		if counts["v1"] < wantV1-50 || counts["v1"] > wantV1+50 || counts["v1"]+counts["v2"] != 1000 {
			t.Fatalf("%s: v1/v2 = %d/%d, want %d/%d ±50", kind, counts["v1"], counts["v2"], wantV1, 1000-wantV1)
		}
		t.Logf("%s: v1/v2 = %d/%d", kind, counts["v1"], counts["v2"])
	}

	// Both versions answer once the route is in force (without it, echo.mesh
	// would balance over both too, so wait for the header match instead).
	testkit.EventuallyWithin(t, e2eWait, "GRPCRoute in force", func() bool {
		for i := 0; i < 5; i++ {
			if b, err := call(ctx, cc, "x-user", "jason"); err != nil || b != "b1" {
				return false
			}
		}
		return true
	})
	check(t, "GRPCRoute", 800)

	m.write("route.yaml", gammaRoute("HTTPRoute", 30, 70))
	testkit.EventuallyWithin(t, e2eWait, "HTTPRoute weights in force", func() bool {
		v1 := 0
		for i := 0; i < 100; i++ {
			b, err := call(ctx, cc)
			if err != nil {
				return false
			}
			if versions[b] == "v1" {
				v1++
			}
		}
		return v1 < 50
	})
	check(t, "HTTPRoute", 300)
}

// TestGatewayAPIStatusOnConfigz: the status computed for Gateway API
// objects read from files is on /debug/configz (checkStatusObjects).
func TestGatewayAPIStatusOnConfigz(t *testing.T) {
	m := startMesh(t, map[string]string{"echo.yaml": statusEcho, "gw.yaml": statusObjects})
	checkStatusObjects(t, func(kind, ns, name string) map[string]any {
		if kind == "Gateway" {
			kind = "KubernetesGateway" // configz's name of the kind
		}
		var cz struct {
			Resources []struct {
				Kind, Namespace, Name string
				Status                map[string]any
			}
		}
		getJSON(t, "http://"+m.d.HTTPAddr()+"/debug/configz", &cz)
		for _, r := range cz.Resources {
			if r.Kind == kind && r.Namespace == ns && r.Name == name {
				return r.Status
			}
		}
		return nil
	})
}

// TestGatewayAPIHTTPSCredentialOverSDS: an HTTPS listener of a Gateway
// API Gateway whose certificateRefs name a Secret gets that credential
// from the credentials directory over SDS, under istiod's name for it
// (kubernetes-gateway://<namespace>/<secret>), on the gateway proxy that
// carries the Gateway's gateway-name label; the served certificate makes
// a working TLS server.
func TestGatewayAPIHTTPSCredentialOverSDS(t *testing.T) {
	ca := newTestCA(t)
	creds := t.TempDir()
	cert, key := ca.issue(t, "www.example.com", 10)
	writeCredential(t, creds, "www-cert", map[string][]byte{"tls.crt": cert, "tls.key": key})
	stateDir := t.TempDir()
	m := startMeshWith(t, map[string]string{"gw.yaml": `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  gatewayClassName: istio
  listeners:
  - {name: https, port: 443, protocol: HTTPS, hostname: www.example.com, tls: {certificateRefs: [{name: www-cert}]}}
`}, func(c *daemonconfig.Config) {
		c.CredentialsDir = creds
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
	})
	g := newGatewayClient(t, m, stateDir, "istio-system", "ingress", ingressNode)
	g.node.Metadata, _ = structpb.NewStruct(map[string]any{"LABELS": map[string]any{"gateway.networking.k8s.io/gateway-name": "ingress"}})
	g.send(xdstype.Listener.URL, "", "")
	lds, err := g.recv(xdstype.Listener.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := chains(t, lds); !slices.Equal(got, []string{"www.example.com"}) {
		t.Fatalf("gateway chains %v, want www.example.com", got)
	}
	const name = "kubernetes-gateway://istio-system/www-cert"
	g.send(xdstype.Secret.URL, "", "", name)
	sds, err := g.recv(xdstype.Secret.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := secrets(t, sds)
	if !handshake(t, got[name], ca, "www.example.com") {
		t.Fatalf("secret %s: missing or not a working TLS server (got %v)", name, keys(got))
	}
}
