package parity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"
)

// resolver resolves Any type URLs from the global registry, and every type
// it does not know (Istio-only types such as the stats or peer-metadata
// configs) as an empty message: the Any shows its @type, its body is not
// compared. Unknown records the URLs it fell back for.
type resolver struct {
	mu      sync.Mutex
	unknown map[string]bool
}

func (r *resolver) FindMessageByName(n protoreflect.FullName) (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(n)
}

func (r *resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err == nil {
		return mt, nil
	}
	r.mu.Lock()
	if r.unknown == nil {
		r.unknown = map[string]bool{}
	}
	r.unknown[url] = true
	r.mu.Unlock()
	return (&emptypb.Empty{}).ProtoReflect().Type(), nil
}

func (r *resolver) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(n)
}

func (r *resolver) FindExtensionByNumber(m protoreflect.FullName, f protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(m, f)
}

// Unknown lists the type URLs that were shown without their body.
func (r *resolver) Unknown() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for u := range r.unknown {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Normalizer turns resources into comparable trees.
type Normalizer struct{ res resolver }

// Tree is a resource as a generic JSON tree (map[string]any, []any, string,
// float64, bool), proto field names, Any bodies expanded, after Normalize.
type Tree = any

// Tree returns m as a normalized tree: protojson with proto field names and
// expanded Anys (the field order of the encoding does not matter to a
// tree). istio-proxy's telemetry (filters, access logs, tracing, stat
// names, metadata) is compared like everything else (#27).
func (n *Normalizer) Tree(m proto.Message) (Tree, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, Resolver: &n.res}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("protojson: %w", err)
	}
	var t any
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	return typedSANs(unwrapSingles(t)), nil
}

// canonical is t's JSON encoding (map keys sorted), an order for set
// elements.
func canonical(t any) string {
	b, _ := json.Marshal(t)
	return string(b)
}

// rbacSets are the RBAC principal and permission combinators and the list
// each holds.
var rbacSets = map[string]string{"and_ids": "ids", "or_ids": "ids", "and_rules": "rules", "or_rules": "rules"}

// unwrapSingles replaces an RBAC principal or permission that is an
// and/or set of exactly one element by that element, recursively: Envoy
// evaluates {and_ids: {ids: [x]}} and x alike (istiod wraps each rule
// part so; our generator writes the part itself); and it sorts the
// elements of larger sets, whose order does not change their result.
func unwrapSingles(t any) any {
	switch v := t.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = unwrapSingles(c)
		}
		for k, c := range v {
			// An and/or set's order does not change its result: sort it.
			if list, ok := rbacSets[k]; ok {
				if m, ok := c.(map[string]any); ok {
					if l, ok := m[list].([]any); ok && len(l) > 1 {
						sort.SliceStable(l, func(i, j int) bool { return canonical(l[i]) < canonical(l[j]) })
					}
				}
			}
		}
		if len(v) == 1 {
			for k, c := range v {
				if list, ok := rbacSets[k]; ok {
					if m, ok := c.(map[string]any); ok && len(m) == 1 {
						if l, ok := m[list].([]any); ok && len(l) == 1 {
							return l[0]
						}
					}
				}
			}
		}
		return v
	case []any:
		for i, c := range v {
			v[i] = unwrapSingles(c)
		}
		return v
	}
	return t
}

// typedSANs rewrites the deprecated match_subject_alt_names of a
// certificate validation context (istiod's form) into
// match_typed_subject_alt_names, the form we write: a "spiffe://" value
// as a URI SAN, any other as a DNS SAN. The deprecated field matches a
// value against every SAN type; the typed one only against URI (where
// SPIFFE IDs live) or DNS names, so it is at least as strict. After it,
// a context whose matchers one side lacks is a difference like any
// other (it was hidden by a catalog entry that took either field).
func typedSANs(t any) any {
	switch v := t.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = typedSANs(c)
		}
		old, ok := v["match_subject_alt_names"].([]any)
		if !ok {
			return v
		}
		typed, _ := v["match_typed_subject_alt_names"].([]any)
		for _, m := range old {
			typ := "DNS"
			if sm, ok := m.(map[string]any); ok {
				for _, form := range []string{"exact", "prefix"} {
					if s, ok := sm[form].(string); ok && strings.HasPrefix(s, "spiffe://") {
						typ = "URI"
					}
				}
			}
			typed = append(typed, map[string]any{"san_type": typ, "matcher": m})
		}
		delete(v, "match_subject_alt_names")
		v["match_typed_subject_alt_names"] = typed
		return v
	case []any:
		for i, c := range v {
			v[i] = typedSANs(c)
		}
		return v
	}
	return t
}

// UnknownTypes lists the Any type URLs whose bodies were not compared.
func (n *Normalizer) UnknownTypes() []string { return n.res.Unknown() }
