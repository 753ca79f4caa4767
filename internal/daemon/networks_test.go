package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/wire"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestMeshNetworksWatched: the meshNetworks file's gateways reach the
// snapshot at start and after each edit; a bad edit is refused and
// counted, the last good gateways staying; removing the file means one
// network again. A bad file at start is refused naming it.
func TestMeshNetworksWatched(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "meshnetworks.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("networks:\n  net-k8s:\n    gateways: [{address: 192.0.2.10, port: 15443}]\n")
	defer func(l func(context.Context, string) ([]net.IPAddr, error)) { lookupGatewayName = l }(lookupGatewayName)
	lookupGatewayName = func(context.Context, string) ([]net.IPAddr, error) { // no network in tests
		return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
	}
	d, _ := startDaemon(t, dir)
	gateways := func() int {
		if pc := d.Pipeline().Current(); pc != nil {
			return len(pc.Networks.For("net-k8s"))
		}
		return -1
	}
	testkit.Eventually(t, "the gateway of the file at start", func() bool { return gateways() == 1 })
	write("networks:\n  net-k8s:\n    gateways: [{address: 192.0.2.10, port: 15443}, {address: 192.0.2.11, port: 15443}, {address: gw.example.com, port: 15443}]\n")
	testkit.Eventually(t, "the edited gateways", func() bool { return gateways() == 2 })
	// /debug/networkz shows them, and the one left out with why.
	if _, body := get(t, "http://"+d.HTTPAddr()+"/debug/networkz"); !strings.Contains(body, `"address": "192.0.2.11"`) || !strings.Contains(body, "gw.example.com has not resolved") {
		t.Errorf("/debug/networkz: %s", body)
	}
	write("networks:\n  net-k8s:\n    gateways: [{port: 15443}]\n")
	testkit.Eventually(t, "the bad edit counted as refused", func() bool {
		_, m := get(t, "http://"+d.HTTPAddr()+"/metrics")
		return regexp.MustCompile(`baremesh_mesh_networks_rejects_total [1-9]`).MatchString(m)
	})
	if n := gateways(); n != 2 {
		t.Fatalf("after a refused edit: %d gateways, want the last good 2", n)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "one network once the file is gone", func() bool {
		pc := d.Pipeline().Current()
		return pc != nil && !pc.Networks.Enabled()
	})

	write("networks: {a: {gateways: [{address: 192.0.2.1, port: 0}]}}\n")
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig, cfg.MeshNetworks = filepath.Join(root, "meshconfig.yaml"), file
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("New with a bad meshNetworks: %v, want a refusal naming the file and the port", err)
	}
	conf := filepath.Join(root, "baremesh.yaml")
	if err := os.WriteFile(conf, []byte("configDirs: [conf.d]\nmeshNetworks: meshnetworks.yaml\nstateDir: state\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckConfig([]string{"--config", conf}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("check-config with a bad meshNetworks: %v, want a refusal naming %s", err, file)
	}
}

// TestMultiNetworkExample: examples/multi-network as shipped: a VM in
// net-vm reaches the pods' service through net-k8s's gateway, a proxy in
// net-k8s reaches them directly, and the VM network's east-west gateway
// forwards Istio mTLS to the VMs' service by SNI.
func TestMultiNetworkExample(t *testing.T) {
	cfg, _, err := daemonconfig.Load([]string{"--config", "../../examples/multi-network/baremesh.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig, cfg.StateDir = filepath.Join(t.TempDir(), "absent.yaml"), t.TempDir()
	d := runDaemon(t, cfg)
	testkit.Eventually(t, "the example's gateways in the snapshot", func() bool {
		pc := d.Pipeline().Current()
		return pc != nil && len(pc.Networks.For("net-k8s")) == 1 && len(pc.Services()) >= 2
	})
	pc := d.Pipeline().Current()
	const reviews = "outbound|9080||reviews.bookinfo.svc.cluster.local"
	endpoints := func(network string) []string {
		p := &model.Proxy{ID: "p-" + network, Type: model.SidecarProxy, Namespace: "bookinfo", Network: network, IPs: []string{"10.10.0.7"}, Labels: map[string]string{}, Metadata: map[string]string{}}
		res, _, err := d.XDS().Builder().Build(pc, xdstype.Endpoint, p, []string{reviews}, nil, nil)
		if err != nil || len(res) != 1 {
			t.Fatalf("EDS for %s: %v, %d resources", network, err, len(res))
		}
		a, err := res[0].Any()
		if err != nil {
			t.Fatal(err)
		}
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range cla.GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				sa := e.GetEndpoint().GetAddress().GetSocketAddress()
				out = append(out, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
			}
		}
		return out
	}
	if got := endpoints("net-vm"); !slices.Equal(got, []string{"192.0.2.10:15443"}) {
		t.Errorf("VM in net-vm: reviews at %v, want net-k8s's gateway", got)
	}
	if got := endpoints("net-k8s"); !slices.Equal(got, []string{"10.20.1.5:9080", "10.20.1.6:9080"}) {
		t.Errorf("proxy in net-k8s: reviews at %v, want the pods", got)
	}
	gw := &model.Proxy{ID: "eastwest", Type: model.Router, Namespace: "istio-system", Network: "net-vm", IPs: []string{"10.10.0.100"},
		Labels: map[string]string{"istio": "eastwestgateway"}, Metadata: map[string]string{}}
	res, _, err := d.XDS().Builder().Build(pc, xdstype.Cluster, gw, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wire.Find(res, "outbound_.9080_._.ratings.bookinfo.svc.cluster.local") == nil {
		t.Error("the VM network's east-west gateway has no SNI cluster for the VMs' service")
	}
}

// TestGatewayHostnameResolved: a meshNetworks gateway given by hostname
// is resolved (as istiod's RESOLVE_HOSTNAME_GATEWAYS): its IPs become the
// network's gateways. "localhost" resolves without a network.
func TestGatewayHostnameResolved(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "meshnetworks.yaml"), []byte("networks:\n  net-lb:\n    gateways: [{address: localhost, port: 15443}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := startDaemon(t, dir)
	testkit.Eventually(t, "localhost resolved to the network's gateway", func() bool {
		pc := d.Pipeline().Current()
		return pc != nil && slices.Contains(pc.Networks.For("net-lb"), model.NetworkGateway{Network: "net-lb", Addr: "127.0.0.1", Port: 15443})
	})
	if _, body := get(t, "http://"+d.HTTPAddr()+"/debug/networkz"); strings.Contains(body, "has not resolved") {
		t.Errorf("/debug/networkz still says the name did not resolve: %s", body)
	}
}
