package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"gopkg.in/yaml.v3"
	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
)

// TestIntegerMapKeys: a mapping with integer keys, as a YAML decoder
// gives `8080:` (the form of Istio's PeerAuthentication docs), is read as
// Kubernetes reads it (the key "8080"); it was refused ("json:
// unsupported type: map[interface {}]interface {}"). portLevelMtls is the
// one map with integer keys in Istio's config API (a test in this file
// checks that against the schemas); map values and lists hold the same.
func TestIntegerMapKeys(t *testing.T) {
	const head = "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: p, namespace: ns}\nspec:\n  selector: {matchLabels: {app: a}}\n"
	cases := []struct {
		name, spec string
		want       map[uint32]security.PeerAuthentication_MutualTLS_Mode // nil: an error
		err        string
	}{
		{"integer key", "  portLevelMtls:\n    8080: {mode: DISABLE}\n", map[uint32]security.PeerAuthentication_MutualTLS_Mode{8080: security.PeerAuthentication_MutualTLS_DISABLE}, ""},
		{"quoted key", "  portLevelMtls:\n    \"8080\": {mode: DISABLE}\n", map[uint32]security.PeerAuthentication_MutualTLS_Mode{8080: security.PeerAuthentication_MutualTLS_DISABLE}, ""},
		{"several", "  portLevelMtls:\n    8080: {mode: DISABLE}\n    \"9090\": {mode: STRICT}\n    7070:\n      mode: PERMISSIVE\n",
			map[uint32]security.PeerAuthentication_MutualTLS_Mode{8080: security.PeerAuthentication_MutualTLS_DISABLE, 9090: security.PeerAuthentication_MutualTLS_STRICT, 7070: security.PeerAuthentication_MutualTLS_PERMISSIVE}, ""},
		{"not a number", "  portLevelMtls:\n    http: {mode: DISABLE}\n", nil, "uint32 key"},
		{"boolean key", "  portLevelMtls:\n    true: {mode: DISABLE}\n", nil, "uint32 key"},
		{"negative", "  portLevelMtls:\n    -1: {mode: DISABLE}\n", nil, "uint32 key"},
		{"port 0", "  portLevelMtls:\n    0: {mode: DISABLE}\n", nil, "portLevelMtls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw map[string]any
			if err := yaml.Unmarshal([]byte(head+tc.spec), &raw); err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprint(raw)
			c, err := config.Typed(raw, config.Source{Name: "test"})
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Spec.(*security.PeerAuthentication).GetPortLevelMtls()
			if len(got) != len(tc.want) {
				t.Fatalf("portLevelMtls = %v, want %v", got, tc.want)
			}
			for port, mode := range tc.want {
				if got[port].GetMode() != mode {
					t.Errorf("port %d: mode %v, want %v", port, got[port].GetMode(), mode)
				}
			}
			// The decoded document is not altered.
			if after := fmt.Sprint(raw); after != before {
				t.Errorf("raw document altered: %s, was %s", after, before)
			}
		})
	}
}

// TestMapsWithIntegerKeys lists every map field with a non-string key in
// the config kinds baremesh reads: the ones whose
// YAML form TestIntegerMapKeys covers. A new one in a newer istio.io/api
// shows here.
func TestMapsWithIntegerKeys(t *testing.T) {
	var found []string
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.IsMap() {
				if fd.MapKey().Kind() != protoreflect.StringKind {
					found = append(found, string(fd.FullName()))
				}
				if v := fd.MapValue(); v.Message() != nil {
					walk(v.Message())
				}
				continue
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	for _, k := range config.Kinds() {
		walk(config.SchemaFor(k).New().ProtoReflect().Descriptor())
	}
	slices.Sort(found)
	want := []string{"istio.security.v1beta1.PeerAuthentication.port_level_mtls"}
	if !slices.Equal(found, want) {
		t.Fatalf("maps with non-string keys: %v, want %v (give each a case in TestIntegerMapKeys)", found, want)
	}
}
