package istioconfig

import (
	"errors"
	"testing"

	"github.com/baremesh/baremesh/core/model"
)

// TestReaders: istiod's API generator rule (an authenticated identity of
// the root namespace), plus listed identities, plus plaintext only on
// opt-in; refusals carry their reason.
func TestReaders(t *testing.T) {
	id := func(ns, sa string) *model.Proxy {
		return &model.Proxy{ID: "r", Identity: &model.Identity{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: sa}}
	}
	r := Readers{Identities: []string{"mirror/*", "ops/reader"}}
	for _, c := range []struct {
		name   string
		r      Readers
		p      *model.Proxy
		root   string
		reason string // "" allowed
	}{
		{"root namespace (default)", r, id("istio-system", "istiod"), "", ""},
		{"root namespace (mesh's)", r, id("mesh-root", "x"), "mesh-root", ""},
		{"istio-system when the root is another", r, id("istio-system", "istiod"), "mesh-root", "not_a_reader"},
		{"listed namespace", r, id("mirror", "any"), "", ""},
		{"listed account", r, id("ops", "reader"), "", ""},
		{"other account of a listed one's namespace", r, id("ops", "admin"), "", "not_a_reader"},
		{"other namespace", r, id("default", "reader"), "", "not_a_reader"},
		{"plaintext", r, &model.Proxy{ID: "p"}, "", "unauthenticated"},
		{"plaintext opted in", Readers{AllowPlaintext: true}, &model.Proxy{ID: "p"}, "", ""},
	} {
		err := c.r.Authorize(c.p, c.root)
		var ref *Refusal
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.reason != "" && (!errors.As(err, &ref) || ref.Reason() != c.reason):
			t.Errorf("%s: %v, want a %s refusal", c.name, err, c.reason)
		}
	}
	for _, bad := range []string{"ns", "/sa", "ns/", "ns/sa/x"} {
		if (Readers{Identities: []string{bad}}).Check() == nil {
			t.Errorf("mcpReaders %q accepted", bad)
		}
	}
}
