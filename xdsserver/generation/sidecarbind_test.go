package generation

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestSidecarIngressBindInShapeKey: a Sidecar ingress listener's chains
// are named after the proxy's own IP, so two VMs of one Sidecar that
// share everything else (no endpoint at either IP) do not share LDS: the
// second got the first one's chain names, and the cache assertion
// (every hit regenerated for the real proxy) caught it.
func TestSidecarIngressBindInShapeKey(t *testing.T) {
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: web, namespace: app}
spec:
  ingress:
  - port: {number: 8080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
`))
	if err != nil {
		t.Fatal(err)
	}
	chains := func(ip string) map[string]bool {
		p := &model.Proxy{ID: "web-" + ip, Type: model.SidecarProxy, Namespace: "app", IPs: []string{ip}, Labels: map[string]string{"app": "web"}, Metadata: map[string]string{}}
		out := map[string]bool{}
		for _, l := range buildListeners(t, b, pc, p) {
			for _, fc := range l.GetFilterChains() {
				out[fc.GetName()] = true
			}
		}
		return out
	}
	if c := chains("10.0.0.1"); !c["10.0.0.1_8080"] {
		t.Errorf("first VM: chains %v, want 10.0.0.1_8080", c)
	}
	if c := chains("10.0.0.2"); !c["10.0.0.2_8080"] || c["10.0.0.1_8080"] {
		t.Errorf("second VM: chains %v, want its own 10.0.0.2_8080", c)
	}
	if len(mismatch) > 0 {
		t.Errorf("cache assertion: %v", mismatch)
	}
}

// buildListeners is p's LDS from b, decoded.
func buildListeners(t *testing.T, b *Builder, pc *push.PushContext, p *model.Proxy) []*listenerv3.Listener {
	t.Helper()
	res, _, err := b.Build(pc, xdstype.Listener, p, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*listenerv3.Listener
	for _, r := range res {
		a, err := r.Any()
		if err != nil {
			t.Fatal(err)
		}
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}
