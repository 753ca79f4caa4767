package mcp_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
	"github.com/baremesh/baremesh/sources/mcp"
)

// TestDecodeGatewayAPI: istiod serves Gateway API objects over MCP as
// google.protobuf.Struct bodies (config.ToProto of a non-proto spec);
// they decode, type and validate as a file's would, and a
// gateway.networking.k8s.io Gateway is a KubernetesGateway.
func TestDecodeGatewayAPI(t *testing.T) {
	wrap := func(name, js string) *anypb.Any {
		st := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(js), st); err != nil {
			t.Fatal(err)
		}
		body, _ := anypb.New(st)
		a, _ := anypb.New(&mcpapi.Resource{Metadata: &mcpapi.Metadata{Name: name}, Body: body})
		return a
	}
	gw := wrap("edge/gw", `{"gatewayClassName":"istio","listeners":[{"name":"http","port":80,"protocol":"HTTP"}]}`)
	c, _, err := mcp.Decode("gateway.networking.k8s.io/v1/Gateway", gw, "", "mcp:test")
	if err != nil {
		t.Fatal(err)
	}
	if c.Key() != (config.Key{Kind: config.KubernetesGateway, Namespace: "edge", Name: "gw"}) {
		t.Fatalf("key %v", c.Key())
	}
	var spec gwapi.GatewaySpec
	if err := config.DecodeSpec(&c, &spec); err != nil || spec.Listeners[0].Port != 80 {
		t.Fatalf("spec %+v, %v", spec, err)
	}
	route := wrap("apps/r", `{"parentRefs":[{"name":"gw","namespace":"edge"}],"rules":[{"backendRefs":[{"name":"svc","port":80}]}]}`)
	if c, _, err = mcp.Decode("gateway.networking.k8s.io/v1/HTTPRoute", route, "", "mcp:test"); err != nil || c.Key().Kind != config.HTTPRoute {
		t.Fatalf("HTTPRoute: %v %v", c.Key(), err)
	}
	bad := wrap("apps/r", `{"rules":[{"backendRefs":[{"name":"svc"}]}]}`)
	if _, _, err = mcp.Decode("gateway.networking.k8s.io/v1/HTTPRoute", bad, "", "mcp:test"); err == nil || !strings.Contains(err.Error(), "spec.rules[0].backendRefs[0].port") {
		t.Fatalf("invalid HTTPRoute: %v", err)
	}
	if got := mcp.TypeURL(config.KubernetesGateway); got != "gateway.networking.k8s.io/v1/Gateway" {
		t.Fatalf("type URL %q", got)
	}
}
