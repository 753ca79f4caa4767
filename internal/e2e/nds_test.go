package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
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

const edsType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

// ndsFiles: web.mesh is a STATIC ServiceEntry without addresses (an
// allocated address for proxies that ask) with one WorkloadEntry,
// db.mesh one with an explicit address.
func ndsFiles(webIP, dbAddr string) map[string]string {
	return map[string]string{
		"services.yaml": `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: web}}
`,
		"db.yaml":     dbYAML(dbAddr),
		"web-we.yaml": weYAML("web", webIP),
	}
}

func dbYAML(addr string) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: default}\n"+
		"spec: {hosts: [db.mesh], addresses: [%s], ports: [{number: 5432, name: tcp, protocol: TCP}], resolution: STATIC, endpoints: [{address: 10.2.0.9}]}\n", addr)
}

func weYAML(app, ip string) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: %s-1, namespace: default}\nspec: {address: %s, labels: {app: %s}}\n", app, ip, app)
}

// ndsStream is a SotW ADS stream that ACKs what it receives.
type ndsStream struct {
	t *testing.T
	s discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func openNDS(t *testing.T, m *mesh, metadata map[string]any) *ndsStream {
	t.Helper()
	cc, err := grpc.NewClient(m.d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(metadata)
	node := &corev3.Node{Id: "sidecar~10.0.0.9~app.default~default.svc.cluster.local", Metadata: md}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: nds.TypeURL}); err != nil {
		t.Fatal(err)
	}
	return &ndsStream{t: t, s: s}
}

// recv returns the next response, ACKed.
func (n *ndsStream) recv() *discovery.DiscoveryResponse {
	n.t.Helper()
	type res struct {
		r   *discovery.DiscoveryResponse
		err error
	}
	ch := make(chan res, 1)
	go func() { r, err := n.s.Recv(); ch <- res{r, err} }()
	select {
	case got := <-ch:
		if got.err != nil {
			n.t.Fatal(got.err)
		}
		r := got.r
		ack := &discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
		if r.GetTypeUrl() == edsType {
			ack.ResourceNames = []string{"outbound|80||web.mesh"}
		}
		if err := n.s.Send(ack); err != nil {
			n.t.Fatal(err)
		}
		return r
	case <-time.After(20 * time.Second):
		n.t.Fatal("no response within 20s")
	}
	return nil
}

func tableOf(t *testing.T, r *discovery.DiscoveryResponse) nds.Table {
	t.Helper()
	if r.GetTypeUrl() != nds.TypeURL || len(r.GetResources()) != 1 || r.GetResources()[0].GetTypeUrl() != nds.TypeURL {
		t.Fatalf("not one name table: %v", r)
	}
	tb, err := nds.Parse(r.GetResources()[0].GetValue())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestNameTablePushes: a proxy that captures DNS and asks for allocated
// addresses gets the table on request; an endpoint change of a service
// that is not headless (which moves no address of the table) is pushed
// as EDS and neither generates nor pushes a table; a ServiceEntry's
// address edit pushes the table with the new address, and a new
// ServiceEntry pushes it with the new host. A proxy that does not ask
// for allocated addresses (no DNS capture) gets no entry for web.mesh. (A headless
// Service's endpoint change is in internal/onboard
// TestPilotAgentDNSKubernetesNames, with a real kube-apiserver.)
func TestNameTablePushes(t *testing.T) {
	m := startMesh(t, ndsFiles("10.1.0.1", "10.2.0.1"))
	plain := openNDS(t, m, map[string]any{"DNS_AUTO_ALLOCATE": "true"})
	if tb := tableOf(t, plain.recv()); tb["web.mesh"] != nil || tb["db.mesh"] == nil || !slices.Equal(tb["db.mesh"].IPs, []string{"10.2.0.1"}) {
		t.Fatalf("proxy without DNS capture: %v", tb)
	}

	n := openNDS(t, m, map[string]any{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"})
	tb := tableOf(t, n.recv())
	web := tb["web.mesh"]
	if web == nil || len(web.IPs) != 1 || tb["db.mesh"] == nil || !slices.Equal(tb["db.mesh"].IPs, []string{"10.2.0.1"}) {
		t.Fatalf("first table: %v", tb)
	}
	if err := n.s.Send(&discovery.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{"outbound|80||web.mesh"}}); err != nil {
		t.Fatal(err)
	}
	if r := n.recv(); r.GetTypeUrl() != edsType {
		t.Fatalf("want EDS, got %s", r.GetTypeUrl())
	}

	// web.mesh's endpoint moves: EDS is pushed, the table is neither
	// generated nor pushed (it would come right after the EDS response,
	// before the next change's).
	gens := generations(t, m, "nds")
	m.write("web-we.yaml", weYAML("web", "10.1.0.2"))
	if r := n.recv(); r.GetTypeUrl() != edsType {
		t.Fatalf("after web's endpoint change: want EDS, got %s", r.GetTypeUrl())
	}
	if g := generations(t, m, "nds"); g != gens {
		t.Fatalf("web's endpoint change generated the table %d times", g-gens)
	}
	m.write("db.yaml", dbYAML("10.2.0.2"))
	for {
		r := n.recv()
		if r.GetTypeUrl() != nds.TypeURL {
			continue // db's clusters and endpoints are not subscribed, but web's may be re-sent
		}
		tb = tableOf(t, r)
		break
	}
	if !slices.Equal(tb["db.mesh"].IPs, []string{"10.2.0.2"}) || !slices.Equal(tb["web.mesh"].IPs, web.IPs) {
		t.Fatalf("after db's address edit (the first table pushed since the first): %v", tb)
	}

	m.write("more.yaml", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: api, namespace: default}\n"+
		"spec: {hosts: [api.example.com], addresses: [192.0.2.10], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}\n")
	for {
		r := n.recv()
		if r.GetTypeUrl() != nds.TypeURL {
			continue // the new service's clusters and endpoints
		}
		tb = tableOf(t, r)
		break
	}
	if got := tb["api.example.com"]; got == nil || !slices.Equal(got.IPs, []string{"192.0.2.10"}) || got.Registry != nds.External {
		t.Fatalf("after a new ServiceEntry: %v", tb)
	}
}

// TestNameTableDelta: over Delta xDS (which Istio's agent uses when Envoy
// does) the table is one resource, sent on a wildcard subscription and
// again when it changes.
func TestNameTableDelta(t *testing.T) {
	m := startMesh(t, ndsFiles("10.1.0.1", "10.2.0.1"))
	cc, err := grpc.NewClient(m.d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"DNS_CAPTURE": "true", "DNS_AUTO_ALLOCATE": "true"})
	node := &corev3.Node{Id: "sidecar~10.0.0.9~app.default~default.svc.cluster.local", Metadata: md}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: nds.TypeURL}); err != nil {
		t.Fatal(err)
	}
	recv := func() nds.Table {
		t.Helper()
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		if r.GetTypeUrl() != nds.TypeURL || len(r.GetResources()) != 1 || len(r.GetRemovedResources()) != 0 {
			t.Fatalf("delta response: %v", r)
		}
		tb, err := nds.Parse(r.GetResources()[0].GetResource().GetValue())
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	if tb := recv(); tb["web.mesh"] == nil || tb["db.mesh"] == nil || !slices.Equal(tb["db.mesh"].IPs, []string{"10.2.0.1"}) {
		t.Fatalf("first table: %v", tb)
	}
	m.write("db.yaml", dbYAML("10.2.0.3"))
	if tb := recv(); tb["db.mesh"] == nil || !slices.Equal(tb["db.mesh"].IPs, []string{"10.2.0.3"}) {
		t.Fatalf("after db's address edit: %v", tb)
	}
}

// generations reads how many times type short was generated, from
// baremesh_xds_generate_seconds_count on /metrics.
func generations(t *testing.T, m *mesh, short string) int {
	t.Helper()
	resp, err := http.Get("http://" + m.d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	prefix := `baremesh_xds_generate_seconds_count{type="` + short + `"} `
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	return 0
}
