package dryrun

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func rc(t *testing.T, j string) *routev3.RouteConfiguration {
	t.Helper()
	var r routev3.RouteConfiguration
	if err := protojson.Unmarshal([]byte(j), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestFields: leaf changes by path, list elements by name, a whole element
// added or removed as one change, no change for equal resources.
func TestFields(t *testing.T) {
	base := `{"name": "80", "virtualHosts": [
	  {"name": "a:80", "domains": ["a"], "routes": [{"name": "r", "match": {"prefix": "/"},
	    "route": {"weightedClusters": {"clusters": [{"name": "v1", "weight": 80}, {"name": "v2", "weight": 20}]}}}]},
	  {"name": "b:80", "domains": ["b", "b:80"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "b"}}]}]}`
	for _, tc := range []struct {
		name, after string
		want        []string
	}{
		{"equal", base, nil},
		{"weights", strings.Replace(strings.Replace(base, `"weight": 80`, `"weight": 50`, 1), `"weight": 20`, `"weight": 50`, 1), []string{
			`virtualHosts[name=a:80].routes[name=r].route.weightedClusters.clusters[name=v1].weight: 80 -> 50`,
			`virtualHosts[name=a:80].routes[name=r].route.weightedClusters.clusters[name=v2].weight: 20 -> 50`}},
		{"host removed", `{"name": "80", "virtualHosts": [{"name": "a:80", "domains": ["a"], "routes": [{"name": "r", "match": {"prefix": "/"},
	    "route": {"weightedClusters": {"clusters": [{"name": "v1", "weight": 80}, {"name": "v2", "weight": 20}]}}}]}]}`,
			[]string{`virtualHosts[name=b:80]: (removed) -> (none)`}},
		{"domain added, unnamed list by index", strings.Replace(base, `["b", "b:80"]`, `["b", "b:80", "b.x"]`, 1),
			[]string{`virtualHosts[name=b:80].domains[2]: (none) -> (added)`}},
		{"cluster changed", strings.Replace(base, `"cluster": "b"`, `"cluster": "c"`, 1),
			[]string{`virtualHosts[name=b:80].routes[0].route.cluster: "b" -> "c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Fields(rc(t, base), rc(t, tc.after))
			if err != nil {
				t.Fatal(err)
			}
			var gs []string
			for _, f := range got {
				gs = append(gs, f.String())
			}
			if strings.Join(gs, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(gs, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
