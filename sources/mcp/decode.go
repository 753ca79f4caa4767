package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
)

const (
	mcpResourceURL       = "type.googleapis.com/istio.mcp.v1alpha1.Resource"
	discoveryResourceURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"
)

// ErrDecode marks a resource whose bytes cannot be read; ErrUnknownType
// a response of a type URL baremesh does not read. Both are permanent for
// that input.
var (
	ErrDecode      = errors.New("cannot decode resource")
	ErrUnknownType = errors.New("unknown type URL")
)

// Decode turns one resource of a response for typeURL into a Config.
// res is the Any from the response; name is the name the transport gives
// ("ns/name" from a Delta Resource), empty for SotW. The resource may be
// an istio.mcp.v1alpha1.Resource (metadata + body, as istiod and Nacos
// send over SotW), an envoy.service.discovery.v3.Resource, or the Istio
// message itself (as Nacos sends over Delta). The spec is checked with
// core/config's rules, exactly as a file's would be. It returns the
// resource's "ns/name" as far as it could read it, for messages.
func Decode(typeURL string, res *anypb.Any, name, source string) (config.Config, string, error) {
	s, gvk, err := parseTypeURL(typeURL)
	if err != nil {
		return config.Config{}, name, fmt.Errorf("%w: %v", ErrUnknownType, err)
	}
	if res == nil {
		return config.Config{}, name, fmt.Errorf("%w: empty resource", ErrDecode)
	}
	var md *mcpapi.Metadata
	body := res
	if body.GetTypeUrl() == discoveryResourceURL {
		var r discovery.Resource
		if err := proto.Unmarshal(body.GetValue(), &r); err != nil {
			return config.Config{}, name, fmt.Errorf("%w: envoy.service.discovery.v3.Resource: %v", ErrDecode, err)
		}
		if r.GetName() != "" {
			name = r.GetName()
		}
		if body = r.GetResource(); body == nil {
			return config.Config{}, name, fmt.Errorf("%w: envoy.service.discovery.v3.Resource has no resource", ErrDecode)
		}
	}
	if body.GetTypeUrl() == mcpResourceURL {
		var r mcpapi.Resource
		if err := proto.Unmarshal(body.GetValue(), &r); err != nil {
			return config.Config{}, name, fmt.Errorf("%w: istio.mcp.v1alpha1.Resource: %v", ErrDecode, err)
		}
		md = r.GetMetadata()
		if md.GetName() != "" {
			name = md.GetName()
		}
		if body = r.GetBody(); body == nil {
			return config.Config{}, name, fmt.Errorf("%w: istio.mcp.v1alpha1.Resource %q has no body", ErrDecode, name)
		}
	}
	spec := s.New()
	if want := bodyTypeURL(spec); body.GetTypeUrl() != want {
		return config.Config{}, name, fmt.Errorf("%w: body is %q, want %q for %s", ErrDecode, body.GetTypeUrl(), want, typeURL)
	}
	if err := proto.Unmarshal(body.GetValue(), spec); err != nil {
		return config.Config{}, name, fmt.Errorf("%w: %s: %v", ErrDecode, body.GetTypeUrl(), err)
	}
	if name == "" {
		return config.Config{}, name, fmt.Errorf("%w: resource has no name (neither MCP metadata nor a Delta/discovery Resource name)", ErrDecode)
	}
	ns, n := splitName(name)
	// Through JSON to core/config's Object.Typed: the same metadata
	// checks and spec validation a file gets, and no second copy of them.
	js, err := protojson.Marshal(spec)
	if err != nil {
		return config.Config{}, name, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	obj := config.Object{APIVersion: gvk.APIVersion(), Kind: gvk.Kind,
		Metadata: config.ObjectMeta{Name: n, Namespace: ns, Labels: md.GetLabels(), Annotations: md.GetAnnotations(), ResourceVersion: md.GetVersion()}}
	if ct := md.GetCreateTime(); ct != nil && ct.IsValid() {
		obj.Metadata.CreationTimestamp = ct.AsTime()
	}
	if err := json.Unmarshal(js, &obj.Spec); err != nil {
		return config.Config{}, name, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	c, err := obj.Typed(config.Source{Name: source})
	if err != nil {
		return config.Config{}, name, err
	}
	return c, name, nil
}

// splitName reads Istio's MCP resource name "namespace/name"; a name
// without a namespace is in config.DefaultNamespace.
func splitName(s string) (ns, name string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

// keyOf is the store key of resource name ("ns/name") of a kind.
func keyOf(kind config.Kind, name string) config.Key {
	ns, n := splitName(name)
	if ns == "" {
		ns = config.DefaultNamespace
	}
	return config.Key{Kind: kind, Namespace: ns, Name: n}
}
