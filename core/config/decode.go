package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Object is one decoded Kubernetes-style document, before it is typed.
type Object struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       map[string]any `json:"spec"`
}

// ObjectMeta is the part of Kubernetes metadata baremesh reads. Other
// metadata fields (uid, creationTimestamp, managedFields…) are accepted and
// ignored, as kubectl-exported manifests carry them.
type ObjectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	Labels          map[string]string `json:"labels"`
	Annotations     map[string]string `json:"annotations"`
	ResourceVersion string            `json:"resourceVersion"`
	// CreationTimestamp (RFC 3339) is kept as Meta.CreationTime.
	CreationTimestamp time.Time `json:"creationTimestamp"`
}

// DefaultNamespace is used for documents without metadata.namespace.
const DefaultNamespace = "default"

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Typed turns a document into a Config: it resolves the schema, checks the
// metadata, decodes the spec strictly (unknown fields are errors) and
// validates it. raw is the document as a generic map (from YAML or JSON).
// The returned error names the resource when it is known.
func Typed(raw map[string]any, src Source) (Config, error) {
	var obj Object
	// A round trip through JSON gives strict, typed decoding of the
	// envelope and a JSON spec for protojson.
	b, err := json.Marshal(stringKeys(raw))
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrParse, err)
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return Config{}, fmt.Errorf("%w: envelope: %v", ErrParse, err)
	}
	return obj.Typed(src)
}

// TypedJSON is Typed for a document already written as JSON (a file
// source writes its YAML nodes straight as JSON): the spec's bytes go to
// protojson as they are, without the generic map and the second JSON
// encoding Typed makes (issue #30: that conversion was a quarter of
// loading 100,000 files). A spec protojson refuses as it stands (Go
// duration syntax such as "30ms") is decoded as Typed decodes it. Its
// errors may be worded differently from Typed's; a caller that reports
// them to the author should ask Typed.
func TypedJSON(doc []byte, src Source) (Config, error) {
	var raw struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   ObjectMeta      `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return Config{}, fmt.Errorf("%w: envelope: %v", ErrParse, err)
	}
	obj := Object{APIVersion: raw.APIVersion, Kind: raw.Kind, Metadata: raw.Metadata}
	if len(raw.Spec) == 0 || string(raw.Spec) == "null" {
		return obj.typed(src, nil)
	}
	return obj.typed(src, func(spec proto.Message) error {
		if (protojson.UnmarshalOptions{}).Unmarshal(raw.Spec, spec) == nil {
			return nil
		}
		proto.Reset(spec)
		var m map[string]any
		if err := json.Unmarshal(raw.Spec, &m); err != nil {
			return fmt.Errorf("%w: spec: %v", ErrParse, err)
		}
		return decodeSpec(m, spec)
	})
}

// Typed is Typed for an already decoded envelope.
func (obj *Object) Typed(src Source) (Config, error) {
	if obj.Spec == nil {
		return obj.typed(src, nil)
	}
	return obj.typed(src, func(spec proto.Message) error { return decodeSpec(obj.Spec, spec) })
}

// decodeSpec decodes a spec decoded as a generic map into spec: Go
// duration syntax rewritten, then protojson.
func decodeSpec(m map[string]any, spec proto.Message) error {
	b, err := json.Marshal(goDurations(m, spec.ProtoReflect().Descriptor()))
	if err != nil {
		return fmt.Errorf("%w: spec: %v", ErrParse, err)
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, spec); err != nil {
		return fmt.Errorf("%w: spec: %v", ErrInvalid, cleanProtoJSONError(err))
	}
	return nil
}

// typed checks the envelope, decodes the spec with decode (nil: no
// spec) and validates the result.
func (obj *Object) typed(src Source, decode func(proto.Message) error) (Config, error) {
	s, err := Lookup(obj.APIVersion, obj.Kind)
	if err != nil {
		return Config{}, err
	}
	var errs Errors
	if obj.Metadata.Name == "" {
		errs.Add("metadata.name", "required")
	} else if len(obj.Metadata.Name) > 253 || !dns1123Subdomain.MatchString(obj.Metadata.Name) {
		errs.Add("metadata.name", "%q is not a DNS-1123 subdomain (lower case letters, digits, '-' and '.')", obj.Metadata.Name)
	}
	ns := obj.Metadata.Namespace
	if ns == "" {
		ns = DefaultNamespace
	} else if len(ns) > 63 || !dns1123Label.MatchString(ns) {
		errs.Add("metadata.namespace", "%q is not a DNS-1123 label", ns)
	}
	for k, v := range obj.Metadata.Labels {
		if err := validateLabel(k, v); err != "" {
			errs.Add("metadata.labels["+k+"]", "%s", err)
		}
	}
	if len(errs) > 0 {
		return Config{}, errs.Err()
	}
	gvk := GroupVersionKind{Group: s.Group, Version: obj.APIVersion[len(s.Group)+1:], Kind: s.manifestKind()}
	spec := s.New()
	if decode != nil {
		if err := decode(spec); err != nil {
			return Config{}, err
		}
	}
	c := Config{
		Meta: Meta{
			GVK: gvk, Name: obj.Metadata.Name, Namespace: ns,
			Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
			ResourceVersion: obj.Metadata.ResourceVersion, CreationTime: obj.Metadata.CreationTimestamp, Source: src,
		},
		Spec: spec,
	}
	if s.Validate != nil {
		if err := s.Validate(&c).Err(); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// ResourceName formats "Kind/namespace/name" for messages from what a
// document says, before it is typed.
func (obj *Object) ResourceName() string {
	if obj.Kind == "" && obj.Metadata.Name == "" {
		return ""
	}
	ns := obj.Metadata.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return obj.Kind + "/" + ns + "/" + obj.Metadata.Name
}

// protojson separates its prefix with a space or, at random, U+00A0,
// which \s does not match.
var protojsonNoise = regexp.MustCompile(`^proto:[\s\x{00a0}]*(\(line \d+:\d+\):[\s\x{00a0}]*)?`)

// cleanProtoJSONError drops protojson's prefix and the position within
// the re-encoded JSON, which means nothing to the author of the YAML.
func cleanProtoJSONError(err error) string {
	return protojsonNoise.ReplaceAllString(err.Error(), "")
}

// goDurations returns v, a JSON value decoded for a message of type md,
// with every google.protobuf.Duration written in Go syntax ("30ms", "5m",
// "1h30m") rewritten to the "<seconds>s" form protojson reads. Istio reads
// specs with the legacy jsonpb, which takes Go syntax, and its own
// documentation uses it. v is not altered; strings that are not Go
// durations are left for protojson to report.
func goDurations(v any, md protoreflect.MessageDescriptor) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	fields := md.Fields()
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		out[k] = val
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(k))
		}
		if fd == nil {
			continue
		}
		if fd.IsMap() {
			fd = fd.MapValue()
			if fd.Message() == nil {
				continue
			}
			if m, ok := val.(map[string]any); ok {
				mm := make(map[string]any, len(m))
				for mk, mv := range m {
					mm[mk] = goDurationValue(mv, fd.Message())
				}
				out[k] = mm
			}
			continue
		}
		if fd.Message() == nil {
			continue
		}
		if l, ok := val.([]any); ok && fd.IsList() {
			ll := make([]any, len(l))
			for i, e := range l {
				ll[i] = goDurationValue(e, fd.Message())
			}
			out[k] = ll
			continue
		}
		out[k] = goDurationValue(val, fd.Message())
	}
	return out
}

func goDurationValue(v any, md protoreflect.MessageDescriptor) any {
	if md.FullName() != "google.protobuf.Duration" {
		return goDurations(v, md)
	}
	s, ok := v.(string)
	if !ok {
		return v
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return v
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	out := sign + strconv.FormatInt(int64(d/time.Second), 10)
	if ns := d % time.Second; ns != 0 {
		out += fmt.Sprintf(".%09d", int64(ns))
	}
	return out + "s"
}
