package mcp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	mcpapi "istio.io/api/mcp/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/sources/mcp"
)

func TestDecodeWireForms(t *testing.T) {
	spec := se("a.example.com", 80)
	body, _ := anypb.New(spec)
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	wrappedAny, _ := anypb.New(&mcpapi.Resource{Metadata: &mcpapi.Metadata{Name: "ns1/a", Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"x": "y"}, Version: "7", CreateTime: timestamppb.New(created)}, Body: body})
	envoyWrapped, _ := anypb.New(&discovery.Resource{Name: "ns1/a", Resource: body})
	envoyMCP, _ := anypb.New(&discovery.Resource{Name: "ignored/x", Resource: wrappedAny})
	vsBody, _ := anypb.New(&networking.VirtualService{Hosts: []string{"a"}})
	noBody, _ := anypb.New(&mcpapi.Resource{Metadata: &mcpapi.Metadata{Name: "ns1/a"}})
	for _, tc := range []struct {
		name, typeURL, transportName string
		res                          *anypb.Any
		wantVersion, wantErr         string
		wantLabels                   bool
	}{
		{name: "mcp Resource", typeURL: "networking.istio.io/v1/ServiceEntry", res: wrappedAny, wantVersion: "v1", wantLabels: true},
		{name: "older version", typeURL: "networking.istio.io/v1alpha3/ServiceEntry", res: wrappedAny, wantVersion: "v1alpha3", wantLabels: true},
		{name: "beta version", typeURL: "networking.istio.io/v1beta1/ServiceEntry", res: wrappedAny, wantVersion: "v1beta1", wantLabels: true},
		{name: "bare message with Delta name", typeURL: "networking.istio.io/v1/ServiceEntry", transportName: "ns1/a", res: body, wantVersion: "v1"},
		{name: "envoy Resource", typeURL: "networking.istio.io/v1/ServiceEntry", res: envoyWrapped, wantVersion: "v1"},
		{name: "envoy Resource around mcp Resource: metadata names it", typeURL: "networking.istio.io/v1/ServiceEntry", res: envoyMCP, wantVersion: "v1", wantLabels: true},
		{name: "bare message without a name", typeURL: "networking.istio.io/v1/ServiceEntry", res: body, wantErr: "has no name"},
		{name: "body of another kind", typeURL: "networking.istio.io/v1/ServiceEntry", transportName: "ns1/a", res: vsBody, wantErr: `body is "type.googleapis.com/istio.networking.v1alpha3.VirtualService"`},
		{name: "mcp Resource without body", typeURL: "networking.istio.io/v1/ServiceEntry", res: noBody, wantErr: "has no body"},
		{name: "unknown type URL", typeURL: "networking.istio.io/v1/Bogus", res: wrappedAny, wantErr: "unknown type URL"},
		{name: "unknown version", typeURL: "networking.istio.io/v2/ServiceEntry", res: wrappedAny, wantErr: "unsupported apiVersion"},
		{name: "not a type URL", typeURL: "ServiceEntry", res: wrappedAny, wantErr: "unknown type URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, name, err := mcp.Decode(tc.typeURL, tc.res, tc.transportName, "mcp:t")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Key() != (config.Key{Kind: config.ServiceEntry, Namespace: "ns1", Name: "a"}) || name != "ns1/a" || c.GVK.Version != tc.wantVersion || c.Source.Name != "mcp:t" {
				t.Fatalf("got %v %q %v %v", c.Key(), name, c.GVK, c.Source)
			}
			if tc.wantLabels && (c.Labels["app"] != "a" || c.Annotations["x"] != "y" || c.ResourceVersion != "7" || !c.CreationTime.Equal(created)) {
				t.Fatalf("metadata lost: %+v", c.Meta)
			}
		})
	}
}

// TestDecodeValidates: a spec is held to core/config's rules, as a file's.
func TestDecodeValidates(t *testing.T) {
	body, _ := anypb.New(&networking.ServiceEntry{Hosts: []string{"a.example.com"}, Ports: []*networking.ServicePort{{Number: 0, Name: "http"}}})
	_, _, err := mcp.Decode("networking.istio.io/v1/ServiceEntry", body, "ns/a", "mcp:t")
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "spec.ports[0]") {
		t.Fatalf("err = %v", err)
	}
	_, _, err = mcp.Decode("networking.istio.io/v1/ServiceEntry", body, "NS/Bad_Name", "mcp:t")
	if err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("bad metadata accepted: %v", err)
	}
}
