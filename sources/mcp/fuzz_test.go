package mcp_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	mcpapi "istio.io/api/mcp/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/sources/mcp"
)

// FuzzDecode feeds arbitrary bytes to the resource decoder under every
// wrapper type URL: it must return a Config or an error, never panic.
func FuzzDecode(f *testing.F) {
	body, _ := anypb.New(&networking.ServiceEntry{Hosts: []string{"a.example.com"}, Ports: []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}})
	wrappedAny, _ := anypb.New(&mcpapi.Resource{Metadata: &mcpapi.Metadata{Name: "ns/a", Labels: map[string]string{"app": "a"}}, Body: body})
	vs, _ := anypb.New(&networking.VirtualService{Hosts: []string{"a"}, Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "a"}}}}}})
	f.Add(uint8(0), wrappedAny.GetValue(), "")
	f.Add(uint8(1), body.GetValue(), "ns/a")
	f.Add(uint8(2), vs.GetValue(), "ns/v")
	f.Add(uint8(3), []byte{0x0a, 0x02, 0xff, 0xff}, "x")
	types := []string{
		"type.googleapis.com/istio.mcp.v1alpha1.Resource",
		"type.googleapis.com/istio.networking.v1alpha3.ServiceEntry",
		"type.googleapis.com/istio.networking.v1alpha3.VirtualService",
		"type.googleapis.com/envoy.service.discovery.v3.Resource",
	}
	collections := []string{"networking.istio.io/v1/ServiceEntry", "networking.istio.io/v1/VirtualService", "networking.istio.io/v1alpha3/ServiceEntry", "security.istio.io/v1/AuthorizationPolicy"}
	f.Fuzz(func(t *testing.T, sel uint8, value []byte, name string) {
		a := &anypb.Any{TypeUrl: types[int(sel)%len(types)], Value: value}
		c, _, err := mcp.Decode(collections[int(sel/4)%len(collections)], a, name, "mcp:fuzz")
		if err == nil && (c.Spec == nil || c.Name == "" || c.Namespace == "") {
			t.Fatalf("Decode accepted a resource without spec, name or namespace: %+v", c)
		}
	})
}
