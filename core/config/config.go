package config

import (
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
)

// GroupVersionKind names a resource type as a manifest spells it.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// APIVersion returns "group/version".
func (g GroupVersionKind) APIVersion() string { return g.Group + "/" + g.Version }

func (g GroupVersionKind) String() string { return g.Group + "/" + g.Version + "/" + g.Kind }

// Key identifies a resource independently of its API version: a
// networking.istio.io/v1 ServiceEntry and a v1alpha3 one with the same
// namespace and name are the same resource.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (k Key) String() string { return string(k.Kind) + "/" + k.Namespace + "/" + k.Name }

// Source says where a Config came from. Name identifies the source instance
// ("file:/etc/baremesh/conf.d", "mcp:nacos:15010"); File and Line locate the
// document for sources that read files.
type Source struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

func (s Source) String() string {
	if s.File == "" {
		return s.Name
	}
	return fmt.Sprintf("%s:%d", s.File, s.Line)
}

// Meta is the envelope around a spec.
type Meta struct {
	GVK             GroupVersionKind
	Name            string
	Namespace       string
	Labels          map[string]string
	Annotations     map[string]string
	ResourceVersion string
	// CreationTime is when the resource was created, as its source says
	// (Kubernetes metadata.creationTimestamp, MCP metadata create_time);
	// a file source gives the time it first saw the resource, unless the
	// document sets metadata.creationTimestamp. Zero: unknown. Not part
	// of the content (SameContent).
	CreationTime time.Time
	Source       Source
}

// Config is one resource. A Config held by a store is shared and must not
// be altered; use DeepCopy to change one.
type Config struct {
	Meta
	Spec proto.Message
}

// Key returns the version-independent identity of c.
func (c *Config) Key() Key {
	return Key{Kind: KindOf(c.GVK), Namespace: c.Namespace, Name: c.Name}
}

// DeepCopy returns a copy that shares nothing with c.
func (c *Config) DeepCopy() Config {
	out := *c
	out.Labels = maps.Clone(c.Labels)
	out.Annotations = maps.Clone(c.Annotations)
	if c.Spec != nil {
		out.Spec = proto.Clone(c.Spec)
	}
	return out
}

// SameContent reports whether a and b describe the same desired state: the
// same kind, name, namespace, labels, annotations and spec. Resource
// version, API version, source location and status are not compared, so a
// re-read of an unchanged file or a status-only update is not a change.
func SameContent(a, b *Config) bool {
	if a.Key() != b.Key() || !maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) {
		return false
	}
	return proto.Equal(a.Spec, b.Spec)
}
