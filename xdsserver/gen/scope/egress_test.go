package scope

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// TestListenerImports follows istiod's SidecarScope: the listener on a
// port imports the hosts of the egress listener bound to that port
// (GetEgressListenerForRDS), every other port those of the catch-all.
func TestListenerImports(t *testing.T) {
	port := func(n uint32) *networking.SidecarPort {
		return &networking.SidecarPort{Number: n, Protocol: "HTTP", Name: "p"}
	}
	withPorts := &networking.Sidecar{Egress: []*networking.IstioEgressListener{
		{Port: port(80), Hosts: []string{"./a.app.svc.cluster.local"}},
		{Port: port(5432), Hosts: []string{"infra/db.infra.svc.cluster.local"}},
		{Hosts: []string{"./*", "infra/*"}},
	}}
	noCatchAll := &networking.Sidecar{Egress: []*networking.IstioEgressListener{
		{Port: port(80), Hosts: []string{"*/*"}},
	}}
	a := &model.Service{Hostname: "a.app.svc.cluster.local", Namespace: "app"}
	c := &model.Service{Hostname: "c.app.svc.cluster.local", Namespace: "app"}
	db := &model.Service{Hostname: "db.infra.svc.cluster.local", Namespace: "infra"}
	cache := &model.Service{Hostname: "cache.infra.svc.cluster.local", Namespace: "infra"}
	tests := []struct {
		name    string
		sidecar *networking.Sidecar
		svc     *model.Service
		port    uint32
		want    bool
	}{
		{"port listener imports its host", withPorts, a, 80, true},
		{"port listener leaves out the catch-all's hosts", withPorts, c, 80, false},
		{"port listener leaves out another namespace", withPorts, db, 80, false},
		{"second port listener", withPorts, db, 5432, true},
		{"second port listener leaves out a host of its namespace", withPorts, cache, 5432, false},
		{"other port: catch-all", withPorts, c, 8000, true},
		{"other port: catch-all, other namespace", withPorts, cache, 7000, true},
		{"other port: catch-all imports a port listener's host too", withPorts, a, 8000, true},
		{"no catch-all: other port imports nothing", noCatchAll, a, 8000, false},
		{"no catch-all: the port's listener", noCatchAll, db, 80, true},
		{"no Sidecar", nil, cache, 80, true},
	}
	for _, tt := range tests {
		v := &View{Proxy: &model.Proxy{Type: model.SidecarProxy, Namespace: "app"}, sidecar: tt.sidecar}
		v.egressPorts = tt.sidecar != nil
		if got := v.ListenerImports(tt.svc, tt.port); got != tt.want {
			t.Errorf("%s: ListenerImports(%s, %d) = %v, want %v", tt.name, tt.svc.Hostname, tt.port, got, tt.want)
		}
	}
}

// TestSidecarIngress: ingress listeners become inbound instances sorted
// by port, protocol from the port's protocol (else its name), the first
// of a port kept; each names its Sidecar and takes the service the proxy
// serves on its port, else a mesh-external one named after the Sidecar
// in the proxy's namespace (istiod's findOrCreateService).
func TestSidecarIngress(t *testing.T) {
	sc := &config.Config{Meta: config.Meta{Namespace: "istio-system", Name: "sc"}, Spec: &networking.Sidecar{Ingress: []*networking.IstioIngressListener{
		{Port: &networking.SidecarPort{Number: 9090, Protocol: "TCP", Name: "tcp"}, DefaultEndpoint: "unix:///run/a.sock"},
		{Port: &networking.SidecarPort{Number: 8080, Name: "http-web"}, DefaultEndpoint: "127.0.0.1:8081"},
		{Port: &networking.SidecarPort{Number: 8080, Protocol: "TCP", Name: "dup"}, DefaultEndpoint: "127.0.0.1:9"},
	}}}
	web := &model.Service{Hostname: "web.app.svc.cluster.local", Namespace: "app"}
	got := sidecarIngress(sc, "app", []Instance{{Service: web, TargetPort: 8080}})
	if len(got) != 2 {
		t.Fatalf("got %d instances, want 2: %+v", len(got), got)
	}
	if got[0].TargetPort != 8080 || got[0].Port.Protocol != model.HTTP || got[0].Endpoint != "127.0.0.1:8081" || got[0].Service != web || got[0].Sidecar != sc {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].TargetPort != 9090 || got[1].Port.Protocol != model.TCP || got[1].Endpoint != "unix:///run/a.sock" {
		t.Errorf("second: %+v", got[1])
	}
	if s := got[1].Service; s == nil || s.Hostname != "sc.app" || !s.MeshExternal || s.Namespace != "app" {
		t.Errorf("second's service: %+v, want the mesh-external sc.app", s)
	}
	if h := got[0].TelemetryHost("app"); h != "sc.app" {
		t.Errorf("telemetry host %q, want the Sidecar's sc.app", h)
	}
}
