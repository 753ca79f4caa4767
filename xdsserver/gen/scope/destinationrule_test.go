package scope_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestDestinationRulesConsolidate: rules for one host in one namespace
// merge as istiod's mergeDestinationRule (the older's traffic policy,
// the subsets the merged rule lacks); a rule with a workloadSelector
// wins for the proxies it selects, and a namespace holding only such a
// rule for the host gives the others none (istiod looks no further);
// rules with different exportTo do not merge. The same file is the
// parity scenario order/destinationrule (the documents carry no
// creation time here: the creation times below give the file's order).
func TestDestinationRulesConsolidate(t *testing.T) {
	b, err := os.ReadFile("../../../internal/parity/testdata/order/destinationrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pc := gentest.MustBuild(t, stampInOrder(t, string(b)))
	svc := &model.Service{Hostname: "ratings.other.svc.cluster.local", Namespace: "other"}
	view := func(app string) *scope.View {
		p := gentest.ProxySpec{ID: "sidecar~10.0.0.9~" + app + ".default~default.svc.cluster.local", Labels: map[string]string{"app": app}}.Proxy(t)
		return scope.New(pc, p)
	}

	dr := view("parity-tproxy").DestinationRule(svc)
	if dr != nil {
		t.Errorf("TPROXY sidecar: %v, want none (its namespace has a rule for the host, none for it)", dr)
	}
	dr = view("parity-vm").DestinationRule(svc)
	if got := dr.GetTrafficPolicy().GetLoadBalancer().GetSimple().String(); got != "LEAST_REQUEST" {
		t.Errorf("VM sidecar: load balancer %s, want its selected rule's LEAST_REQUEST", got)
	}
	other := scope.New(pc, gentest.ProxySpec{ID: "sidecar~10.0.0.8~x.elsewhere~elsewhere.svc.cluster.local"}.Proxy(t))
	dr = other.DestinationRule(svc)
	if dr.GetTrafficPolicy().GetConnectionPool().GetTcp().GetMaxConnections() != 10 || dr.GetTrafficPolicy().GetLoadBalancer() != nil {
		t.Errorf("merged policy %v, want z-first's (the older) alone", dr.GetTrafficPolicy())
	}
	if v1, v2 := scope.Subset(dr, "v1"), scope.Subset(dr, "v2"); v1.GetLabels()["version"] != "v1" || v2 == nil || len(dr.GetSubsets()) != 2 {
		t.Errorf("merged subsets %v, want z-first's v1 and a-second's v2", dr.GetSubsets())
	}

	details := &model.Service{Hostname: "details.default.svc.cluster.local", Namespace: "default"}
	if n := view("parity-vm").DestinationRule(details).GetTrafficPolicy().GetConnectionPool().GetTcp().GetMaxConnections(); n != 3 {
		t.Errorf("details in default: maxConnections %d, want details-private's 3 (not merged: exportTo differ; the later wins)", n)
	}
	if n := other.DestinationRule(details).GetTrafficPolicy().GetConnectionPool().GetTcp().GetMaxConnections(); n != 7 {
		t.Errorf("details elsewhere: maxConnections %d, want details-public's 7", n)
	}
}

// stampInOrder gives the documents of a multi-document YAML creation
// times one second apart, in file order (the parity harness's apart).
func stampInOrder(t *testing.T, yaml string) string {
	t.Helper()
	lines := strings.Split(yaml, "\n")
	n := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "metadata: {") && strings.HasSuffix(line, "}") {
			n++
			lines[i] = fmt.Sprintf("%s, creationTimestamp: \"2026-01-01T00:00:%02dZ\"}", strings.TrimSuffix(line, "}"), n)
		}
	}
	if n == 0 {
		t.Fatal("no inline metadata to stamp")
	}
	return strings.Join(lines, "\n")
}
