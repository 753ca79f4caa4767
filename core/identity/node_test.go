package identity

import (
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/model"
)

// TestCheckNode: an authenticated proxy's node must be in its identity's
// namespace and claim no other service account (istiod's
// checkConnectionIdentity); the error names the claim and the identity.
// An unauthenticated proxy is not checked here.
func TestCheckNode(t *testing.T) {
	id := &model.Identity{TrustDomain: "cluster.local", Namespace: "shop", ServiceAccount: "gw"}
	for _, c := range []struct {
		name     string
		p        model.Proxy
		wantErrs []string
	}{
		{"own namespace and account", model.Proxy{ID: "a", Namespace: "shop", ServiceAccount: "gw", Identity: id}, nil},
		{"no SERVICE_ACCOUNT claimed", model.Proxy{ID: "a", Namespace: "shop", Identity: id}, nil},
		{"unauthenticated", model.Proxy{ID: "a", Namespace: "istio-system", ServiceAccount: "x"}, nil},
		{"other namespace", model.Proxy{ID: "a", Namespace: "istio-system", Identity: id}, []string{`"istio-system"`, "spiffe://cluster.local/ns/shop/sa/gw"}},
		{"other service account", model.Proxy{ID: "a", Namespace: "shop", ServiceAccount: "admin", Identity: id}, []string{`"admin"`, "SERVICE_ACCOUNT", "spiffe://cluster.local/ns/shop/sa/gw"}},
	} {
		err := CheckNode(&c.p)
		if (err != nil) != (c.wantErrs != nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, w := range c.wantErrs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", c.name, err, w)
			}
		}
	}
}
