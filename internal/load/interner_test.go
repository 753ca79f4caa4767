package load

import (
	"errors"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestMinus(t *testing.T) {
	for _, c := range []struct{ a, b, want []string }{
		{nil, nil, nil},
		{[]string{"a"}, nil, []string{"a"}},
		{nil, []string{"a"}, nil},
		{[]string{"a", "b", "c"}, []string{"b"}, []string{"a", "c"}},
		{[]string{"a", "c", "e"}, []string{"b", "c", "d", "f"}, []string{"a", "e"}},
		{[]string{"a", "b"}, []string{"a", "b"}, nil},
	} {
		if got := minus(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("minus(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func sotwResponse(t *testing.T, version string, clusters ...*clusterv3.Cluster) *response {
	t.Helper()
	m := &discovery.DiscoveryResponse{VersionInfo: version, TypeUrl: Cluster.URL()}
	for _, c := range clusters {
		a, err := anypb.New(c)
		if err != nil {
			t.Fatal(err)
		}
		m.Resources = append(m.Resources, a)
	}
	r := &response{}
	if err := r.decode(marshal(t, m)); err != nil {
		t.Fatal(err)
	}
	return r
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}}
}

// TestApplyShared: proxies applying the same response to the same set
// get one set; its dependencies, subsets and checks are shared too.
func TestApplyShared(t *testing.T) {
	in := newInterner()
	a, err := in.apply(Cluster, nil, sotwResponse(t, "1", edsCluster("a"), edsCluster("b")), true)
	if err != nil {
		t.Fatal(err)
	}
	// Another proxy: another buffer and version, the same resources.
	b, err := in.apply(Cluster, nil, sotwResponse(t, "2", edsCluster("a"), edsCluster("b")), true)
	if err != nil || a != b {
		t.Fatalf("%p %p %v", a, b, err)
	}
	if !slices.Equal(a.Deps(), []string{"a", "b"}) || a.depList() != b.depList() {
		t.Fatalf("deps %v", a.Deps())
	}
	c, err := in.apply(Cluster, a, sotwResponse(t, "3", edsCluster("b")), true)
	if err != nil || c.Len() != 1 || c.Get("b") != a.Get("b") {
		t.Fatalf("%v %v", c.Names(), err)
	}
	if d, _ := in.apply(Cluster, a, sotwResponse(t, "3", edsCluster("b")), true); d != c {
		t.Error("the second apply of a response to a set is a new set")
	}
	// Filtering by names: remembered per names, and right after a miss.
	only := newNameList([]string{"b", "z"})
	if k := in.keepOnly(a, only); k != c {
		t.Errorf("keepOnly: %v", k.Names())
	}
	if k := in.keepOnly(a, only); k != c {
		t.Errorf("keepOnly again: %v", k.Names())
	}
	if k := in.keepOnly(a, a.depList()); k != a {
		t.Errorf("keepOnly by its own names: %v", k.Names())
	}
	if k := in.keepOnly(a, nil); k.Len() != 0 {
		t.Errorf("keepOnly by none: %v", k.Names())
	}
	for _, c := range []struct {
		s     *Set
		names *nameList
		want  bool
	}{{a, only, false}, {c, only, false}, {a, c.depList(), true}, {c, nil, true}, {nil, only, false}, {nil, nil, true}} {
		for range 2 { // computed, then remembered
			if got := c.s.holdsAll(c.names); got != c.want {
				t.Errorf("%v holdsAll %v = %v", c.s.Names(), c.names.list(), got)
			}
		}
	}
	// A response that does not parse is not NACKed but ends the stream.
	malformed := &response{}
	if err := malformed.decode(field(respResources, field(anyTypeURL, []byte{0xff}))); err != nil {
		t.Fatal(err)
	}
	if _, err := in.apply(Cluster, a, malformed, true); !errors.Is(err, errMalformed) {
		t.Errorf("malformed: %v", err)
	}
	// A bad response is an error each time, never remembered.
	bad := sotwResponse(t, "4", edsCluster("a"), edsCluster("a"))
	for range 2 {
		if _, err := in.apply(Cluster, a, bad, true); err == nil {
			t.Fatal("duplicate accepted")
		}
	}
}
