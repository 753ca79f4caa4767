package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/xdsserver/gen/nds"
)

// ndsOracle is the configuration both control planes get.
var ndsOracle = []string{
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n",
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: app}
spec:
  hosts: [db.example.internal]
  addresses: [10.9.0.1, 10.9.0.2/32, 10.9.0.0/24]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
`,
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: app}
spec:
  hosts: [ratings.bookinfo.mesh]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: ratings.internal.example}]
`,
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: app}
spec:
  hosts: [vms.app.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
  workloadSelector: {labels: {app: vm}}
`,
	"apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm-a, namespace: app}\nspec: {address: 10.2.0.2, labels: {app: vm}}\n",
	"apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm-b, namespace: app}\nspec: {address: 10.2.0.1, labels: {app: vm}}\n",
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild, namespace: app}
spec:
  hosts: ["*.noaddr.example.com"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
`,
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild-addr, namespace: app}
spec:
  hosts: ["*.addr.example.com"]
  addresses: [10.9.1.1]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
`,
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: private, namespace: other}
spec:
  hosts: [private.other.mesh]
  addresses: [10.9.2.1]
  exportTo: ["."]
  ports: [{number: 80, name: http, protocol: HTTP}]
`,
	`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: other}
spec:
  hosts: [api.example.com]
  addresses: [192.0.2.10]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
`,
}

// TestNameTableAgainstIstiod: istiod is the oracle. The same
// ServiceEntries and WorkloadEntries go to a real istiod (through a
// kube-apiserver) and to baremeshd; the same proxies (a sidecar that
// asks for allocated addresses, one that does not, one in another
// namespace) ask both for their name table, and the tables must agree
// host by host: addresses, registry, short name and namespace. Allocated
// addresses are compared by kind (one IPv4 address of 240.240.0.0/16),
// as the two allocators pick different ones. istiod's own Kubernetes
// Service (the API server's "kubernetes") is not in baremeshd's world.
// The scenario has a resolution NONE ServiceEntry with WorkloadEntries:
// istiod leaves it out of the table (its ServiceEntry endpoints carry no
// health status, which its builder requires), and so does baremesh.
func TestNameTableAgainstIstiod(t *testing.T) {
	i := startIstiod(t)
	files := map[string]string{}
	for n, doc := range ndsOracle {
		i.apply(doc)
		if strings.Contains(doc, "istio.io") {
			files[fmt.Sprintf("c%02d.yaml", n)] = doc
		}
	}
	m := startMesh(t, files)
	proxies := []struct {
		name, ns string
		md       map[string]any
	}{
		{"auto-allocate", "app", map[string]any{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"}},
		{"capture-only", "app", map[string]any{"DNS_CAPTURE": "true"}},
		{"other-namespace", "other", map[string]any{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"}},
	}
	for _, p := range proxies {
		t.Run(p.name, func(t *testing.T) {
			id := "sidecar~10.0.0.9~vm." + p.ns + "~" + p.ns + ".svc.cluster.local"
			md := map[string]any{"NAMESPACE": p.ns, "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"}
			for k, v := range p.md {
				md[k] = v
			}
			ours := fetchTable(t, m.d.XDSAddr(), id, md)
			// istiod converges on the applied config: ask until it has
			// every host ours has (or a deadline).
			var theirs nds.Table
			deadline := time.Now().Add(60 * time.Second)
			for {
				theirs = fetchTable(t, i.grpcAddr, id, md)
				delete(theirs, "kubernetes.default.svc.cluster.local")
				if len(theirs) >= len(ours) || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond) // istiod's own debounce; nothing to poll on but its answer
			}
			compareTables(t, ours, theirs, p.md["DNS_AUTO_ALLOCATE"] == nil)
		})
	}
}

// fetchTable asks the xDS server at addr for the name table of node id.
func fetchTable(t *testing.T, addr, id string, metadata map[string]any) nds.Table {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, err := structpb.NewStruct(metadata)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: id, Metadata: md}, TypeUrl: nds.TypeURL}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return tableOf(t, r)
}

// compareTables reports every host whose entries differ. A proxy that
// captures DNS gets allocated addresses from both (istiod 1.31's IP
// allocation is on by default; baremesh follows it, gen.ParseNode), so
// captureOnly no longer excuses a missing host: it is kept to say which
// proxy the table was for.
func compareTables(t *testing.T, ours, theirs nds.Table, captureOnly bool) {
	t.Helper()
	hosts := map[string]bool{}
	for h := range ours {
		hosts[h] = true
	}
	for h := range theirs {
		hosts[h] = true
	}
	for h := range hosts {
		o, i := ours[h], theirs[h]
		switch {
		case o == nil:
			t.Errorf("%s: istiod has %+v, baremesh nothing", h, *i)
		case i == nil:
			t.Errorf("%s: baremesh has %+v, istiod nothing", h, *o)
		case allocated(o.IPs) && allocated(i.IPs):
			if o.Registry != i.Registry || o.Shortname != i.Shortname || o.Namespace != i.Namespace {
				t.Errorf("%s: baremesh %+v, istiod %+v", h, *o, *i)
			}
			t.Logf("%s: allocated %v here, %v by istiod", h, o.IPs, i.IPs)
		default:
			oi, ii := slices.Sorted(slices.Values(o.IPs)), slices.Sorted(slices.Values(i.IPs))
			if !slices.Equal(oi, ii) || o.Registry != i.Registry || o.Shortname != i.Shortname || o.Namespace != i.Namespace {
				t.Errorf("%s: baremesh %+v, istiod %+v", h, *o, *i)
			}
		}
	}
	t.Logf("%d hosts compared", len(hosts))
}

// allocated reports whether ips is one address of Istio's allocation
// range 240.240.0.0/16.
func allocated(ips []string) bool {
	if len(ips) != 1 {
		return false
	}
	a, err := netip.ParseAddr(ips[0])
	return err == nil && netip.MustParsePrefix("240.240.0.0/16").Contains(a)
}
