package model_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/model"
)

// A workload whose service account is new to its service changes the
// service (cluster SANs follow the accounts: a full push); one more
// workload with a known account changes its endpoints only.
func TestServiceAccountChangeIsServiceChange(t *testing.T) {
	h := newHarness(t)
	svcKey := model.ServiceKey{Hostname: "reviews.ns.mesh", Namespace: "ns"}
	h.put(seSelector, we("vm1", "10.0.0.1", "reviews"))
	if ch := h.put(we("vm2", "10.0.0.2", "reviews")); len(ch.Services) != 0 || !ch.Endpoints[svcKey] {
		t.Fatalf("same account: want endpoint-only, got %+v", ch)
	}
	other := replace(we("vm3", "10.0.0.3", "reviews"), "serviceAccount: sa", "serviceAccount: other")
	if ch := h.put(other); !ch.Services[svcKey] {
		t.Fatalf("new account: want a service change, got %+v", ch)
	}
	if got := model.ServiceAccounts(h.reg.Endpoints().Endpoints(svcKey)); len(got) != 2 || got[0] != "other" || got[1] != "sa" {
		t.Fatalf("accounts = %v", got)
	}
}
