package ads

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// cacheEnv serves EDS from a stand-in generator whose output the test
// controls through hidden, an input deliberately left out of the cache
// key, and counts generations.
type cacheEnv struct {
	srv      *Server
	hidden   atomic.Uint32
	gens     atomic.Int64
	mu       sync.Mutex
	mismatch []string
	client   discovery.AggregatedDiscoveryServiceClient
	readID   atomic.Bool // the LDS stand-in reads the proxy ID (not in any key)
	ldsGens  atomic.Int64
}

func newCacheEnv(t *testing.T, assert bool) *cacheEnv {
	e := &cacheEnv{}
	snaps := &fixedSnaps{}
	snaps.pc.Store(push.Build(nil, push.Inputs{Store: store.NewMemory(), Registry: model.NewRegistry(model.NewAllocator())}, nil, time.Now()))
	e.srv = New(snaps, Options{CacheAssert: assert, OnCacheMismatch: func(m string) {
		e.mu.Lock()
		e.mismatch = append(e.mismatch, m)
		e.mu.Unlock()
	}, Types: typesWith(map[*xdstype.Type]gen.Generator{xdstype.Endpoint: func(in gen.Input) ([]gen.Resource, error) {
		e.gens.Add(1)
		var out []gen.Resource
		for _, n := range in.Names {
			out = append(out, gen.Resource{Name: n, Resource: &endpointv3.ClusterLoadAssignment{ClusterName: n, Endpoints: []*endpointv3.LocalityLbEndpoints{{
				Locality: &corev3.Locality{Region: in.Proxy.Namespace}, LoadBalancingWeight: nil, Priority: e.hidden.Load()}}}})
		}
		return out, nil
	}, xdstype.Listener: func(in gen.Input) ([]gen.Resource, error) {
		e.ldsGens.Add(1)
		name := "l-" + in.Proxy.Namespace
		if e.readID.Load() {
			name += "-" + in.Proxy.ID
		}
		return []gen.Resource{{Name: name, Resource: &listenerv3.Listener{Name: name}}}, nil
	}})})
	e.client = serveForTest(t, e.srv)
	return e
}

func (e *cacheEnv) fetch(t *testing.T, nodeID string, names ...string) *discovery.DiscoveryResponse {
	return e.fetchType(t, xdstype.Endpoint.URL, nodeID, names...)
}

func (e *cacheEnv) fetchType(t *testing.T, typeURL, nodeID string, names ...string) *discovery.DiscoveryResponse {
	t.Helper()
	return ask(t, e.client, &corev3.Node{Id: nodeID}, typeURL, names...)
}

func TestEDSCacheSharesAcrossProxies(t *testing.T) {
	t.Setenv("BAREMESH_CACHE_ASSERT", "0") // the assertion would regenerate
	e := newCacheEnv(t, false)
	names := []string{"outbound|80||a.mesh", "outbound|80||b.mesh"}
	for i := 0; i < 5; i++ {
		e.fetch(t, "sidecar~10.0.0."+string(rune('1'+i))+"~p.ns~ns.svc.cluster.local", names...)
	}
	if g := e.gens.Load(); g != 2 {
		t.Fatalf("5 proxies with the same key: %d generations, want 2 (one per cluster)", g)
	}
	// Another namespace is another key.
	e.fetch(t, "sidecar~10.0.1.1~p.other~other.svc.cluster.local", names...)
	if g := e.gens.Load(); g != 4 {
		t.Fatalf("a proxy in another namespace: %d generations, want 4", g)
	}
}

// TestEDSCacheAssertCatchesHiddenInput: a generator that reads an input
// outside its key is caught by the assertion on the next hit.
func TestEDSCacheAssertCatchesHiddenInput(t *testing.T) {
	e := newCacheEnv(t, true)
	e.fetch(t, "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local", "outbound|80||a.mesh")
	e.fetch(t, "sidecar~10.0.0.2~p.ns~ns.svc.cluster.local", "outbound|80||a.mesh")
	e.mu.Lock()
	if len(e.mismatch) != 0 {
		t.Fatalf("false alarm: %v", e.mismatch)
	}
	e.mu.Unlock()
	e.hidden.Store(7) // changes the output without changing the key
	e.fetch(t, "sidecar~10.0.0.3~p.ns~ns.svc.cluster.local", "outbound|80||a.mesh")
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.mismatch) != 1 {
		t.Fatalf("assertion reports = %v, want one", e.mismatch)
	}
}

// TestShapeCache: sidecars that differ only in their address share one
// LDS generation; a generator that reads a proxy field outside the key is
// caught by the assertion, which compares with the real proxy's output.
func TestShapeCache(t *testing.T) {
	t.Setenv("BAREMESH_CACHE_ASSERT", "0") // the assertion would regenerate
	e := newCacheEnv(t, false)
	for i := 0; i < 5; i++ {
		e.fetchType(t, xdstype.Listener.URL, "sidecar~10.0.0."+string(rune('1'+i))+"~p.ns~ns.svc.cluster.local")
	}
	if g := e.ldsGens.Load(); g != 1 {
		t.Fatalf("5 sidecars of one shape: %d LDS generations, want 1", g)
	}

	a := newCacheEnv(t, true)
	a.fetchType(t, xdstype.Listener.URL, "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local")
	a.mu.Lock()
	if len(a.mismatch) != 0 {
		t.Fatalf("false alarm: %v", a.mismatch)
	}
	a.mu.Unlock()
	a.readID.Store(true)
	a.srv.snaps.(*fixedSnaps).pc.Store(push.Build(a.srv.snaps.Current(), push.Inputs{Store: store.NewMemory(), Registry: model.NewRegistry(model.NewAllocator())}, nil, time.Now()))
	a.fetchType(t, xdstype.Listener.URL, "sidecar~10.0.0.2~p.ns~ns.svc.cluster.local")
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.mismatch) != 1 {
		t.Fatalf("assertion reports = %v, want one (the generator read the proxy ID)", a.mismatch)
	}
}

// TestShapeCacheDNSAutoAllocate: a proxy that asks for allocated service
// addresses (DNS_CAPTURE and DNS_AUTO_ALLOCATE) and one that does not get
// different listeners for a ServiceEntry without addresses, so the flag is
// part of the shape key: with the real LDS generator and the assertion
// on, neither is served the other's cached output.
func TestShapeCacheDNSAutoAllocate(t *testing.T) {
	pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns}
spec:
  hosts: [db.example.com]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	client, mm := cachedServer(t, pc, true, map[*xdstype.Type]gen.Generator{xdstype.Listener: lds.Generate})
	fetch := func(ip string, md map[string]string) []string {
		t.Helper()
		fields := map[string]*structpb.Value{}
		for k, v := range md {
			fields[k] = structpb.NewStringValue(v)
		}
		node := &corev3.Node{Id: "sidecar~" + ip + "~p.ns~ns.svc.cluster.local", Metadata: &structpb.Struct{Fields: fields}}
		r := ask(t, client, node, xdstype.Listener.URL)
		var names []string
		for _, a := range r.GetResources() {
			var l listenerv3.Listener
			if err := a.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(l.GetName(), "_5432") {
				names = append(names, l.GetName())
			}
		}
		return names
	}
	allocate := map[string]string{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"}
	var plain, allocated []string
	for i := range 2 { // the second round hits the cache
		plain = fetch("10.0.0.1"+strconv.Itoa(i), map[string]string{"DNS_AUTO_ALLOCATE": "true"})
		allocated = fetch("10.0.0.2"+strconv.Itoa(i), allocate)
	}
	if m := mm.list(); len(m) != 0 {
		t.Fatalf("cache assertion: %v", m)
	}
	if len(plain) != 1 || plain[0] != "0.0.0.0_5432" {
		t.Errorf("without DNS_CAPTURE: listeners %v, want [0.0.0.0_5432]", plain)
	}
	if len(allocated) != 1 || !strings.HasPrefix(allocated[0], "240.240.") {
		t.Errorf("with DNS_CAPTURE and DNS_AUTO_ALLOCATE: listeners %v, want the allocated address's", allocated)
	}
}

// Proxies with the same subscription share one list of CLAs: after the
// first, none looks up its clusters one by one.
func TestEDSListCacheSharesWholeSubscriptions(t *testing.T) {
	t.Setenv("BAREMESH_CACHE_ASSERT", "0")
	e := newCacheEnv(t, false)
	names := []string{"outbound|80||a.mesh", "outbound|80||b.mesh"}
	for i := range 5 {
		e.fetch(t, "sidecar~10.0.0."+strconv.Itoa(i+1)+"~p.ns~ns.svc.cluster.local", names...)
	}
	hits, misses := e.srv.Builder().Stats()
	if hits != 0 || misses != 2 {
		t.Fatalf("per-cluster lookups: %d hits, %d misses; want 0 and 2 (the first proxy's)", hits, misses)
	}
}
