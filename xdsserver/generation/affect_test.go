package generation

import (
	"slices"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

func snapshotOf(t *testing.T, manifests ...string) *push.PushContext {
	t.Helper()
	mem := store.NewMemory()
	reg := model.NewRegistry(model.NewAllocator())
	mem.Subscribe(func(evs []store.Event) { reg.Apply(model.Update{Events: evs}) })
	for _, m := range manifests {
		mem.Apply([]config.Config{configtest.Typed(t, m)}, nil)
	}
	return push.Build(nil, push.Inputs{Store: mem, Registry: reg, Mesh: config.DefaultMeshConfig()}, nil, time.Now())
}

func TestAffectedTypes(t *testing.T) {
	pc := snapshotOf(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: private, namespace: a}
spec:
  hosts: [private.a.mesh]
  exportTo: ["."]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`)
	sidecarA := &model.Proxy{Type: model.SidecarProxy, Namespace: "a"}
	sidecarB := &model.Proxy{Type: model.SidecarProxy, Namespace: "b"}
	router := &model.Proxy{Type: model.Router, Namespace: "b"}
	key := func(kind config.Kind, ns, name string) config.Key {
		return config.Key{Kind: kind, Namespace: ns, Name: name}
	}
	vs := key(config.VirtualService, "b", "vs")
	cases := []struct {
		name  string
		proxy *model.Proxy
		req   *push.Request
		want  []string
	}{
		{"gateway change, sidecar", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{key(config.Gateway, "b", "gw"): true}}, nil},
		{"gateway change, router", router, &push.Request{Full: true, Configs: map[config.Key]bool{key(config.Gateway, "b", "gw"): true}}, []string{"cds", "lds", "rds"}},
		{"gateway-only VS, sidecar", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{vs: true}, GatewayOnly: map[config.Key]bool{vs: true}}, nil},
		{"mesh VS, sidecar", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{vs: true}}, []string{"lds", "rds"}},
		{"DestinationRule", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{key(config.DestinationRule, "b", "dr"): true}}, []string{"cds", "eds", "rds"}},
		{"AuthorizationPolicy", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{key(config.AuthorizationPolicy, "b", "ap"): true}}, []string{"lds"}},
		{"Sidecar of another namespace", sidecarB, &push.Request{Full: true, Configs: map[config.Key]bool{key(config.Sidecar, "a", "default"): true}}, nil},
		{"service exported only to its namespace, other namespace", sidecarB, &push.Request{Full: true, Services: map[model.ServiceKey]bool{{Hostname: "private.a.mesh", Namespace: "a"}: true}}, nil},
		{"service exported only to its namespace, same namespace", sidecarA, &push.Request{Full: true, Services: map[model.ServiceKey]bool{{Hostname: "private.a.mesh", Namespace: "a"}: true}}, []string{"cds", "eds", "lds", "rds"}},
		{"removed service", sidecarB, &push.Request{Full: true, Services: map[model.ServiceKey]bool{{Hostname: "gone.mesh", Namespace: "a"}: true}}, []string{"cds", "eds", "lds", "rds"}},
		{"mesh config", sidecarB, &push.Request{Full: true, Reasons: push.NewReasons(push.ReasonMesh)}, []string{"cds", "eds", "lds", "rds"}},
	}
	for _, tc := range cases {
		got := Affected([]*xdstype.Type{xdstype.Cluster, xdstype.Endpoint, xdstype.Listener, xdstype.Route}, pc, tc.proxy, tc.req)
		var short []string
		for t := range got {
			short = append(short, t.Short)
		}
		slices.Sort(short)
		if !slices.Equal(short, tc.want) {
			t.Errorf("%s: types %v, want %v", tc.name, short, tc.want)
		}
	}
}
