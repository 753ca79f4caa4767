package push

import "testing"

// TestReasonsMerge: merged requests count every reason, and a request is
// global (every proxy, every type) only when one of its reasons is.
func TestReasonsMerge(t *testing.T) {
	a := &Request{Reasons: NewReasons(ReasonConfig)}
	b := &Request{Reasons: NewReasons(ReasonConfig, ReasonEndpoint)}
	m := a.Merge(b)
	if m.Reasons[ReasonConfig] != 2 || m.Reasons[ReasonEndpoint] != 1 || len(m.Reasons) != 2 {
		t.Errorf("merged reasons %v", m.Reasons)
	}
	if a.Reasons[ReasonConfig] != 1 {
		t.Errorf("merge altered its receiver: %v", a.Reasons)
	}
	if m.Reasons.Global() || m.Reasons.Has(ReasonMesh) {
		t.Errorf("%v: global", m.Reasons)
	}
	for _, r := range []Reason{ReasonMesh, ReasonInitial} {
		if g := m.Merge(&Request{Reasons: NewReasons(r)}); !g.Reasons.Global() || !g.Reasons.Has(r) {
			t.Errorf("%s merged in: %v not global", r, g.Reasons)
		}
	}
	for _, r := range []Reason{ReasonConfig, ReasonEndpoint, ReasonKubeService, ReasonKubeEndpoint, ReasonCredentials, ReasonTrust, ReasonJWKS} {
		if r.Global() {
			t.Errorf("%s is global", r)
		}
	}
	var none Reasons
	if none.Global() || none.Has(ReasonMesh) {
		t.Error("no reasons: global")
	}
}
