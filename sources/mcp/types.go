package mcp

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/config"
)

// An Istio config type URL is "group/version/Kind", as istiod's API
// generator and Nacos spell it: networking.istio.io/v1/ServiceEntry.

// TypeURL returns the type URL of kind at its preferred (storage)
// version.
func TypeURL(kind config.Kind) string {
	s := config.SchemaFor(kind)
	if s == nil {
		return ""
	}
	return s.GVK().String()
}

// DefaultTypeURLs returns the type URL of every kind baremesh reads, at
// its preferred version: what an upstream subscribes to without a kinds
// list.
func DefaultTypeURLs() []string {
	var out []string
	for _, k := range config.Kinds() {
		out = append(out, TypeURL(k))
	}
	return out
}

// parseTypeURL resolves a type URL of any version config accepts for its
// kind ("networking.istio.io/v1alpha3/ServiceEntry" too).
func parseTypeURL(typeURL string) (*config.Schema, config.GroupVersionKind, error) {
	i := strings.LastIndexByte(typeURL, '/')
	if i <= 0 {
		return nil, config.GroupVersionKind{}, fmt.Errorf("unknown type URL %q: want group/version/Kind such as %s", typeURL, TypeURL(config.ServiceEntry))
	}
	s, err := config.Lookup(typeURL[:i], typeURL[i+1:])
	if err != nil {
		return nil, config.GroupVersionKind{}, fmt.Errorf("unknown type URL %q: %w", typeURL, err)
	}
	return s, config.GroupVersionKind{Group: s.Group, Version: typeURL[len(s.Group)+1 : i], Kind: typeURL[i+1:]}, nil
}

// resolveKind turns an entry of an upstream's kinds list, a kind name
// ("ServiceEntry") or a type URL ("networking.istio.io/v1alpha3/
// ServiceEntry"), into the type URL to subscribe to.
func resolveKind(entry string) (string, error) {
	if !strings.Contains(entry, "/") {
		if config.SchemaFor(config.Kind(entry)) == nil {
			return "", fmt.Errorf("unknown kind %q", entry)
		}
		return TypeURL(config.Kind(entry)), nil
	}
	if _, _, err := parseTypeURL(entry); err != nil {
		return "", err
	}
	return entry, nil
}

// bodyTypeURL is the Any type URL of a kind's message
// ("type.googleapis.com/istio.networking.v1alpha3.ServiceEntry"; the v1
// API reuses the v1alpha3 messages).
func bodyTypeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}
