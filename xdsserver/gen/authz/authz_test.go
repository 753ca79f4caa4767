package authz_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

const policies = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow, namespace: ns}
spec:
  action: ALLOW
  rules:
  - to: [{operation: {methods: [GET]}}]
  - from: [{source: {requestPrincipals: ["iss/sub"]}}]
  - to: [{operation: {ports: ["5432"]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: ns}
spec:
  action: DENY
  rules:
  - to: [{operation: {methods: [DELETE], ports: ["8080"]}}]
    when: [{key: "request.headers[x-a]", values: ["1"]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: ns}
spec:
  action: CUSTOM
  provider: {name: none}
  rules: [{to: [{operation: {paths: ["/x"]}}]}]
`

// A rule that cannot be honoured never becomes an allow: on a TCP port
// the ALLOW rules with methods or requestPrincipals (HTTP-only) are
// dropped, the DENY rule keeps its port and loses its method and header
// condition (it denies more), a CUSTOM policy naming an unknown
// provider denies what it selects (istiod's rule), and on HTTP
// requestPrincipals match the verified token's iss and sub.
func TestDenySafe(t *testing.T) {
	pc := gentest.MustBuild(t, policies)
	p := authz.For(pc, "ns", map[string]string{"app": "a"})
	tcp := p.RBACs(true)
	if len(tcp) != 2 || tcp[0].Action != rbacv3.RBAC_DENY || tcp[1].Action != rbacv3.RBAC_ALLOW {
		t.Fatalf("TCP: want DENY then ALLOW, got %d filters", len(tcp))
	}
	allow := tcp[1].Policies
	if _, ok := allow["ns[ns]-policy[allow]-rule[0]"]; ok {
		t.Error("TCP: the ALLOW rule with methods was kept")
	}
	if _, ok := allow["ns[ns]-policy[allow]-rule[1]"]; ok {
		t.Error("TCP: the ALLOW rule with requestPrincipals was kept")
	}
	if got := js(t, allow["ns[ns]-policy[allow]-rule[2]"]); got != `{"permissions":[{"destinationPort":5432}],"principals":[{"any":true}]}` {
		t.Errorf("port rule = %s", got)
	}
	deny := tcp[0].Policies
	if got := js(t, deny["ns[ns]-policy[deny]-rule[0]"]); got != `{"permissions":[{"destinationPort":8080}],"principals":[{"any":true}]}` {
		t.Errorf("TCP DENY rule = %s, want its port only", got)
	}
	if _, ok := deny["ns[ns]-policy[ext]-rule[0]"]; ok {
		t.Error("the CUSTOM policy is among the DENY rules")
	}
	custom := p.CustomNetworkFilters(pc)
	if len(custom) != 1 {
		t.Fatalf("TCP CUSTOM filters: %d, want one DENY RBAC (unknown provider)", len(custom))
	}
	var cr rbacnetv3.RBAC
	if err := custom[0].GetTypedConfig().UnmarshalTo(&cr); err != nil {
		t.Fatal(err)
	}
	if got := js(t, cr.GetRules().GetPolicies()["istio-ext-authz-none-ns[ns]-policy[ext]-rule[0]-deny-due-to-bad-CUSTOM-action"]); cr.GetRules().GetAction() != rbacv3.RBAC_DENY ||
		got != `{"permissions":[{"any":true}],"principals":[{"any":true}]}` {
		t.Errorf("TCP CUSTOM rule = %s (%v), want deny all", got, cr.GetRules().GetAction())
	}
	if probs := authz.CustomProblems(pc); len(probs) != 1 || probs[0].Policy != "ns/ext" || probs[0].Provider != "none" {
		t.Errorf("CustomProblems = %+v, want ns/ext naming provider none", probs)
	}
	http := p.RBACs(false)
	if got := js(t, http[1].Policies["ns[ns]-policy[allow]-rule[1]"]); got != `{"permissions":[{"any":true}],"principals":[{"andIds":{"ids":[`+
		`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"iss"}],"value":{"stringMatch":{"exact":"iss"}}}},`+
		`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"sub"}],"value":{"stringMatch":{"exact":"sub"}}}}]}}]}` {
		t.Errorf("HTTP requestPrincipals rule = %s", got)
	}
	if got := js(t, http[0].Policies["ns[ns]-policy[deny]-rule[0]"]); got != `{"permissions":[{"andRules":{"rules":[{"destinationPort":8080},{"header":{"name":":method","stringMatch":{"exact":"DELETE"}}}]}}],"principals":[{"header":{"name":"x-a","stringMatch":{"exact":"1"}}}]}` {
		t.Errorf("HTTP DENY rule = %s", got)
	}
	if _, ok := http[1].Policies["ns[ns]-policy[allow]-rule[0]"]; !ok {
		t.Error("HTTP: the ALLOW rule with methods is missing")
	}
	if q := authz.For(pc, "other", nil); !q.Empty() {
		t.Error("policies of namespace ns selected a workload of namespace other")
	}
}

func js(t *testing.T, p *rbacv3.Policy) string {
	t.Helper()
	if p == nil {
		return "<nil>"
	}
	b, err := protojson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var c []byte
	for _, r := range b { // protojson may add spaces
		if r != ' ' {
			c = append(c, r)
		}
	}
	return string(c)
}

// The RBAC filters of many policies pack to the same bytes every time
// (map order): the wire layer versions resources by their bytes.
func TestFiltersDeterministic(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p%d, namespace: ns}\nspec:\n  action: DENY\n  rules: [{from: [{source: {namespaces: [x]}}]}]\n---\n", i)
	}
	pc := gentest.MustBuild(t, b.String())
	first := authz.For(pc, "ns", nil).HTTPFilters()[0].GetTypedConfig().GetValue()
	for range 20 {
		if again := authz.For(pc, "ns", nil).HTTPFilters()[0].GetTypedConfig().GetValue(); !bytes.Equal(first, again) {
			t.Fatal("the same policies packed to different bytes")
		}
	}
}
