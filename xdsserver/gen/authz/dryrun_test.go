package authz_test

import (
	"maps"
	"slices"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"

	"github.com/baremesh/baremesh/xdsserver/gen/authz"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

const dryRunPolicies = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-dry, namespace: ns, annotations: {istio.io/dry-run: "true"}}
spec:
  action: ALLOW
  rules: [{to: [{operation: {methods: [GET]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-dry, namespace: ns, annotations: {istio.io/dry-run: "True"}}
spec:
  action: DENY
  rules: [{to: [{operation: {ports: ["5432"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: ns}
spec:
  action: DENY
  rules: [{to: [{operation: {ports: ["6000"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-unread, namespace: ns, annotations: {istio.io/dry-run: "yes"}}
spec:
  action: DENY
  rules: [{to: [{operation: {ports: ["7000"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: ns, annotations: {istio.io/dry-run: "true"}}
spec:
  action: CUSTOM
  provider: {name: none}
  rules: [{to: [{operation: {paths: ["/x"]}}]}]
`

// TestDryRunIsNotEnforced: a policy annotated istio.io/dry-run is
// evaluated as shadow rules and enforced nowhere, as istiod builds it:
// a dry-run ALLOW alone denies nothing (enforced, it would deny all
// else); a dry-run DENY goes to the shadow rules of the filter that
// enforces the other DENY policies; a value ParseBool does not read
// leaves the policy enforced; proxyless gRPC, which evaluates no shadow
// rules, leaves dry-run policies out; a CUSTOM policy stays CUSTOM.
// (Before, every dry-run policy was enforced: the ALLOW denied every
// request but GETs.)
func TestDryRunIsNotEnforced(t *testing.T) {
	pc := gentest.MustBuild(t, dryRunPolicies)
	p := authz.For(pc, "ns", map[string]string{"app": "a"})

	enforced := p.RBACs(true)
	if len(enforced) != 1 || enforced[0].Action != rbacv3.RBAC_DENY {
		t.Fatalf("enforced RBACs: %d, want the DENY one only", len(enforced))
	}
	if got := slices.Sorted(maps.Keys(enforced[0].Policies)); !slices.Equal(got, []string{"ns[ns]-policy[deny-unread]-rule[0]", "ns[ns]-policy[deny]-rule[0]"}) {
		t.Errorf("enforced DENY rules %v, want deny and deny-unread", got)
	}

	tcp := p.NetworkFilters()
	if len(tcp) != 2 {
		t.Fatalf("%d network RBAC filters, want DENY and ALLOW", len(tcp))
	}
	var deny, allow rbacnetv3.RBAC
	if err := tcp[0].GetTypedConfig().UnmarshalTo(&deny); err != nil {
		t.Fatal(err)
	}
	if err := tcp[1].GetTypedConfig().UnmarshalTo(&allow); err != nil {
		t.Fatal(err)
	}
	if deny.GetRules().GetAction() != rbacv3.RBAC_DENY || len(deny.GetRules().GetPolicies()) != 2 ||
		deny.GetShadowRules().GetAction() != rbacv3.RBAC_DENY || deny.GetShadowRules().GetPolicies()["ns[ns]-policy[deny-dry]-rule[0]"] == nil ||
		deny.GetShadowRulesStatPrefix() != "istio_dry_run_deny_" {
		t.Errorf("DENY filter: rules %v, shadow %v, prefix %q", deny.GetRules(), deny.GetShadowRules(), deny.GetShadowRulesStatPrefix())
	}
	if allow.GetRules() != nil || allow.GetShadowRules().GetAction() != rbacv3.RBAC_ALLOW || allow.GetShadowRulesStatPrefix() != "istio_dry_run_allow_" {
		t.Errorf("ALLOW filter: rules %v (want none: nothing enforced), shadow %v, prefix %q", allow.GetRules(), allow.GetShadowRules(), allow.GetShadowRulesStatPrefix())
	}

	for _, f := range p.EnvoyHTTPFilters() {
		var r rbachttpv3.RBAC
		if err := f.GetTypedConfig().UnmarshalTo(&r); err != nil {
			t.Fatal(err)
		}
		if r.GetRules() != nil && r.GetRules().GetAction() == rbacv3.RBAC_ALLOW {
			t.Errorf("HTTP: an enforced ALLOW %v", r.GetRules())
		}
	}

	// Proxyless: the enforced DENY and the CUSTOM policy (as DENY), no
	// shadow rules, no ALLOW.
	grpc := p.HTTPFilters()
	if len(grpc) != 1 || grpc[0].GetName() != authz.HTTPFilterName+".DENY" {
		t.Fatalf("proxyless filters %v, want the DENY one", grpc)
	}
	var r rbachttpv3.RBAC
	if err := grpc[0].GetTypedConfig().UnmarshalTo(&r); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(r.GetRules().GetPolicies())); len(got) != 3 || r.GetShadowRules() != nil || slices.Contains(got, "ns[ns]-policy[deny-dry]-rule[0]") {
		t.Errorf("proxyless DENY rules %v shadow %v, want deny, deny-unread and ext; no shadow", got, r.GetShadowRules())
	}

	// The CUSTOM policy with the annotation is still CUSTOM (here its
	// unknown provider makes it deny what it selects).
	if custom := p.CustomHTTPFilters(pc); len(custom) != 1 {
		t.Errorf("%d CUSTOM filters, want 1", len(custom))
	}
}
