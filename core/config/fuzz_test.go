package config_test

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
)

// FuzzTyped feeds YAML documents through the path a source takes; it must
// never panic, and what it accepts must validate again after a copy.
func FuzzTyped(f *testing.F) {
	for _, r := range rows {
		f.Add([]byte(r.manifest))
	}
	f.Add([]byte("spec: [1, 2]\n"))
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: x}\nspec: {http: [null]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return
		}
		var raw map[string]any
		if json.Unmarshal(js, &raw) != nil {
			return
		}
		c, err := config.Typed(raw, config.Source{Name: "fuzz"})
		if err != nil {
			return
		}
		cp := c.DeepCopy()
		if !config.SameContent(&c, &cp) {
			t.Fatalf("a copy differs from its original")
		}
	})
}
