// Package configtest holds test helpers for code that consumes configs:
// typed Configs from YAML manifests, as the sources would produce them.
// It imports only core/config.
package configtest

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
)

// Typed decodes and validates one YAML manifest, failing the test on any
// error.
func Typed(t testing.TB, manifest string) config.Config {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(j, &raw); err != nil {
		t.Fatal(err)
	}
	c, err := config.Typed(raw, config.Source{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
