package generation

import (
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestProxyHeadersInShapeKey: ProxyConfig proxyHeaders come from the
// proxy's PROXY_CONFIG when it sent one (a PROXY_CONFIG without them
// means Istio's defaults), else from the mesh's defaultConfig, as
// istiod's ProxyConfigOrDefault; proxies that differ only there get
// their own listeners from the cache (the cache assertion regenerates
// every hit for the real proxy and compares).
func TestProxyHeadersInShapeKey(t *testing.T) {
	var mismatch []string
	b := New(Options{CacheAssert: true, OnCacheMismatch: func(m string) { mismatch = append(mismatch, m) }})
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: app}
spec:
  hosts: [web.app.mesh]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
`))
	if err != nil {
		t.Fatal(err)
	}
	pc.Mesh.DefaultConfig.ProxyHeaders = &meshv1alpha1.ProxyConfig_ProxyHeaders{Server: &meshv1alpha1.ProxyConfig_ProxyHeaders_Server{Value: "mesh-proxy"}}
	servers := func(id string, headers *model.ProxyHeaders) map[string]bool {
		p := &model.Proxy{ID: id, Type: model.SidecarProxy, Namespace: "app", IPs: []string{"10.0.0.1"}, Labels: map[string]string{"app": "client"}, Metadata: map[string]string{}, ProxyHeaders: headers}
		out := map[string]bool{}
		for _, l := range buildListeners(t, b, pc, p) {
			for _, fc := range l.GetFilterChains() {
				for _, f := range fc.GetFilters() {
					h := &hcmv3.HttpConnectionManager{}
					if f.GetTypedConfig().UnmarshalTo(h) == nil && h.GetStatPrefix() != "" {
						out[h.GetServerName()] = true
					}
				}
			}
		}
		return out
	}
	if s := servers("mesh", nil); !s["mesh-proxy"] {
		t.Errorf("no PROXY_CONFIG: server names %v, want the mesh's mesh-proxy", s)
	}
	if s := servers("own", &model.ProxyHeaders{ServerValue: "own-proxy"}); !s["own-proxy"] || s["mesh-proxy"] {
		t.Errorf("PROXY_CONFIG server: server names %v, want own-proxy only", s)
	}
	if s := servers("defaults", &model.ProxyHeaders{}); s["mesh-proxy"] || !s["istio-envoy"] {
		t.Errorf("PROXY_CONFIG without proxyHeaders: server names %v, want Istio's (istio-envoy inbound, Envoy's outbound)", s)
	}
	if len(mismatch) > 0 {
		t.Errorf("cache assertion: %v", mismatch)
	}
}
