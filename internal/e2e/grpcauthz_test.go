package e2e

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/baremesh/baremesh/core/testkit"
)

const strictPA = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: STRICT}
`

// TestGRPCMTLS: a grpc-go xDS client and xDS-enabled server, both with
// xDS credentials and certificates from our CA: with PeerAuthentication
// STRICT the RPC is mTLS (the server sees the client's SPIFFE ID in its
// certificate), a plaintext client is refused; with PERMISSIVE (server
// without the tlsMode label: Istio's proxyless convention serves
// plaintext) a plaintext client gets through.
func TestGRPCMTLS(t *testing.T) {
	s := startSecMesh(t, map[string]string{"pa.yaml": strictPA})
	front := s.client(t, "default", "frontend")
	testkit.EventuallyWithin(t, e2eWait, "mTLS RPC", func() bool {
		id, code := rpc(front, "empty")
		return code == codes.OK && id == "spiffe://cluster.local/ns/default/sa/frontend"
	})
	if id, code := rpc(front, "unary"); code != codes.OK || id != "spiffe://cluster.local/ns/default/sa/frontend" {
		t.Fatalf("mTLS RPC: peer %q, code %v", id, code)
	}
	plain := plainClient(t, s.addr)
	if _, code := rpc(plain, "empty"); code != codes.Unavailable {
		t.Fatalf("plaintext client under STRICT: code %v, want Unavailable (refused)", code)
	}
	s.apply(t, "pa.yaml", strings.Replace(strictPA, "STRICT", "PERMISSIVE", 1))
	testkit.EventuallyWithin(t, e2eWait, "plaintext RPC under PERMISSIVE", func() bool {
		id, code := rpc(plain, "empty")
		return code == codes.OK && id == ""
	})
}

func plainClient(t *testing.T, addr string) testgrpc.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// authzCase is one AuthorizationPolicy set and what it must do to real
// RPCs: each expectation is client, method ("empty"/"unary"), optional
// x-tenant header, and whether the RPC is allowed.
type authzCase struct {
	name   string
	policy string
	expect []authzExpect
}

type authzExpect struct {
	client, method, tenant string
	allowed                bool
}

func ap(name, action, spec string) string {
	return fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: %s, namespace: default}
spec:
  action: %s
%s---
`, name, action, spec)
}

// apDryRun is ap annotated istio.io/dry-run: evaluated, not enforced.
func apDryRun(name, action, spec string) string {
	return strings.Replace(ap(name, action, spec), "namespace: default}", "namespace: default, annotations: {istio.io/dry-run: \"true\"}}", 1)
}

// TestGRPCAuthorizationMatrix: AuthorizationPolicies become RBAC in the
// xDS server's listener, which grpc-go enforces; each case is asserted
// with real RPCs from clients with three identities over mTLS
// (PeerAuthentication STRICT).
func TestGRPCAuthorizationMatrix(t *testing.T) {
	s := startSecMesh(t, map[string]string{"pa.yaml": strictPA})
	clients := map[string]testgrpc.TestServiceClient{
		"frontend":  s.client(t, "default", "frontend"),
		"worker":    s.client(t, "batch", "worker"),
		"untrusted": s.client(t, "batch", "untrusted"),
	}
	port := fmt.Sprint(s.port)
	all := func(allowed bool) []authzExpect {
		var out []authzExpect
		for _, c := range []string{"frontend", "worker", "untrusted"} {
			out = append(out, authzExpect{client: c, method: "empty", allowed: allowed}, authzExpect{client: c, method: "unary", allowed: allowed})
		}
		return out
	}
	cases := []authzCase{
		{"no policy", "", all(true)},
		{"ALLOW by principal; everything else denied", ap("a", "ALLOW", `  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/frontend]}}]}]
`), []authzExpect{{"frontend", "empty", "", true}, {"frontend", "unary", "", true}, {"worker", "empty", "", false}, {"untrusted", "unary", "", false}}},
		{"ALLOW by namespace", ap("a", "ALLOW", `  rules: [{from: [{source: {namespaces: [batch]}}]}]
`), []authzExpect{{"frontend", "empty", "", false}, {"worker", "empty", "", true}, {"untrusted", "empty", "", true}}},
		{"ALLOW namespace with notPrincipals", ap("a", "ALLOW", `  rules: [{from: [{source: {namespaces: [batch], notPrincipals: [cluster.local/ns/batch/sa/untrusted]}}]}]
`), []authzExpect{{"frontend", "empty", "", false}, {"worker", "empty", "", true}, {"untrusted", "empty", "", false}}},
		{"DENY by path", ap("d", "DENY", `  rules: [{to: [{operation: {paths: [/grpc.testing.TestService/UnaryCall]}}]}]
`), []authzExpect{{"frontend", "empty", "", true}, {"frontend", "unary", "", false}, {"worker", "unary", "", false}, {"worker", "empty", "", true}}},
		{"DENY by method for one principal", ap("d", "DENY", `  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/frontend]}}], to: [{operation: {methods: [POST]}}]}]
`), []authzExpect{{"frontend", "empty", "", false}, {"frontend", "unary", "", false}, {"worker", "empty", "", true}}},
		{"DENY notNamespaces", ap("d", "DENY", `  rules: [{from: [{source: {notNamespaces: [default]}}]}]
`), []authzExpect{{"frontend", "empty", "", true}, {"worker", "empty", "", false}, {"untrusted", "unary", "", false}}},
		{"ALLOW by port (this one)", ap("a", "ALLOW", `  rules: [{to: [{operation: {ports: ["`+port+`"]}}]}]
`), all(true)},
		{"ALLOW by port (another): default deny", ap("a", "ALLOW", `  rules: [{to: [{operation: {ports: ["1"]}}]}]
`), all(false)},
		{"ALLOW by path prefix", ap("a", "ALLOW", `  rules: [{to: [{operation: {paths: ["/grpc.testing.TestService/Empty*"]}}]}]
`), []authzExpect{{"frontend", "empty", "", true}, {"frontend", "unary", "", false}, {"worker", "empty", "", true}, {"worker", "unary", "", false}}},
		{"DENY before ALLOW", ap("a", "ALLOW", `  rules: [{from: [{source: {principals: ["*"]}}]}]
`) + ap("d", "DENY", `  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/frontend]}}]}]
`), []authzExpect{{"frontend", "empty", "", false}, {"worker", "empty", "", true}, {"untrusted", "unary", "", true}}},
		{"ALLOW when request header", ap("a", "ALLOW", `  rules: [{when: [{key: "request.headers[x-tenant]", values: [acme]}]}]
`), []authzExpect{{"frontend", "empty", "acme", true}, {"frontend", "empty", "", false}, {"worker", "unary", "other", false}, {"worker", "unary", "acme", true}}},
		{"ALLOW selecting another workload: not applied", ap("a", "ALLOW", `  selector: {matchLabels: {app: other}}
  rules: [{from: [{source: {principals: [nobody]}}]}]
`), all(true)},
		{"ALLOW without rules: everything denied", ap("a", "ALLOW", ""), all(false)},
		{"AUDIT only: nothing denied", ap("audit", "AUDIT", `  rules: [{}]
`), all(true)},
		// Dry runs (before, enforced: the ALLOW denied worker and untrusted).
		{"ALLOW dry run: nothing denied", apDryRun("a", "ALLOW", `  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/frontend]}}]}]
`), all(true)},
		{"DENY dry run beside an enforced DENY", apDryRun("dry", "DENY", `  rules: [{from: [{source: {namespaces: [batch]}}]}]
`) + ap("d", "DENY", `  rules: [{to: [{operation: {paths: [/grpc.testing.TestService/UnaryCall]}}]}]
`), []authzExpect{{"frontend", "empty", "", true}, {"worker", "empty", "", true}, {"untrusted", "empty", "", true}, {"frontend", "unary", "", false}, {"worker", "unary", "", false}}},
	}
	for i, c := range cases {
		// A sentinel DENY (a header no RPC sends) differs per case, so
		// each file changes the listener and apply can wait for its ACK.
		body := c.policy + ap("sentinel", "DENY", fmt.Sprintf(`  rules: [{when: [{key: "request.headers[x-sentinel]", values: ["case-%d"]}]}]
`, i))
		s.apply(t, "authz.yaml", body)
		check := func() (string, bool) {
			for _, e := range c.expect {
				var md []string
				if e.tenant != "" {
					md = []string{"x-tenant", e.tenant}
				}
				_, code := rpc(clients[e.client], e.method, md...)
				if (code == codes.OK) != e.allowed || (!e.allowed && code != codes.PermissionDenied) {
					return fmt.Sprintf("%s %s tenant=%q: code %v, want allowed=%v", e.client, e.method, e.tenant, code, e.allowed), false
				}
			}
			return "", true
		}
		// Connections accepted before the update drain; poll until the
		// new listener serves every expectation, then check once more.
		var last string
		testkit.EventuallyWithin(t, e2eWait, "case "+c.name, func() bool {
			var ok bool
			last, ok = check()
			return ok
		})
		if msg, ok := check(); !ok {
			t.Fatalf("case %q: %s", c.name, msg)
		}
		_ = last
		t.Logf("case %q: %d expectations hold", c.name, len(c.expect))
	}
}
