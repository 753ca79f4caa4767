package file

import (
	"fmt"
	"testing"
)

// BenchmarkParseOneResource is the parse of one file of the 100,000-file
// load (issue #30): one ServiceEntry, YAML to a validated typed Config.
func BenchmarkParseOneResource(b *testing.B) {
	data := []byte(fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s%d, namespace: ns%d}\nspec:\n  hosts: [s%d.ns%d.mesh]\n  addresses: [10.%d.%d.%d]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n",
		12345, 5, 12345, 5, 0, 48, 57))
	b.ReportAllocs()
	for b.Loop() {
		out, errs := ParseLimits(data, "/etc/baremesh/conf.d/f012345.yaml", "file", Limits{})
		if len(out) != 1 || len(errs) != 0 {
			b.Fatalf("parsed %d resources, errors %v", len(out), errs)
		}
	}
}
