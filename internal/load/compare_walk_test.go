package load

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestCompareInventoriesNamesTheField checks the per-type comparison of
// BenchmarkIstiodSideBySide: a cluster that differs by its TLS context's SNI
// is reported at that field (through the Any), not only at its parents,
// and a cluster only one side sends is named.
func TestCompareInventoriesNamesTheField(t *testing.T) {
	tls := func(sni string) *clusterv3.Cluster {
		a, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni})
		if err != nil {
			t.Fatal(err)
		}
		return &clusterv3.Cluster{Name: "a", TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}}
	}
	inv := func(cs ...*clusterv3.Cluster) [numTypes]inventory {
		var out [numTypes]inventory
		for i := range out {
			out[i] = inventory{sizes: map[string]int{}, paths: map[string]map[string]int{}}
		}
		for _, c := range cs {
			b, err := proto.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			out[Cluster].sizes[c.GetName()] = len(b)
			out[Cluster].paths[c.GetName()] = map[string]int{}
			walk(b, c.ProtoReflect().Descriptor(), "", 10, out[Cluster].paths[c.GetName()])
		}
		return out
	}
	got := compareInventories(inv(tls("a.example.com"), &clusterv3.Cluster{Name: "only-istiod"}), inv(tls("")))
	for _, want := range []string{
		"only istiod sends 1",
		"only-istiod",
		"transport_socket.typed_config(UpstreamTlsContext).sni",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("comparison lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "transport_socket.typed_config ") {
		t.Errorf("comparison lists the parent whose difference is all in sni:\n%s", got)
	}
}
