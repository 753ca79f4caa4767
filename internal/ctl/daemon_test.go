package ctl

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

var update = flag.Bool("update", false, "rewrite testdata golden files and the captured daemon answers")

const (
	typeCDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeLDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	typeEDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// startExample runs a real baremeshd over a copy of examples/vm-mesh's
// config and returns it with an Env pointed at its HTTP server.
func startExample(t *testing.T) (*daemon.Daemon, string) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "../../examples/vm-mesh/conf.d"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(conf, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{conf}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = "../../examples/vm-mesh/meshconfig.yaml"
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	d, err := daemon.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-d.Pipeline().Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready within 20s")
	}
	return d, conf
}

// proxy is a real ADS client speaking as Envoy would: it subscribes to
// CDS and LDS, then to the EDS and RDS names they reference, and ACKs
// (or NACKs) every response.
type proxy struct {
	t    *testing.T
	st   grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
	node *corev3.Node
	nack map[string]string // type URL -> NACK message to answer with
	// names are the subscribed names per type, repeated in every ACK as
	// Envoy does (a SotW request without names is a wildcard).
	names map[string][]string
}

func connectProxy(t *testing.T, xdsAddr, id string, nack map[string]string) *proxy {
	t.Helper()
	return connectNode(t, xdsAddr, &corev3.Node{Id: id}, nack)
}

// connectNode is connectProxy with a whole node (ID and metadata).
func connectNode(t *testing.T, xdsAddr string, node *corev3.Node, nack map[string]string, opts ...grpc.DialOption) *proxy {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(xdsAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, st: st, node: node, nack: nack, names: map[string][]string{}}
	for _, typ := range []string{typeCDS, typeLDS} {
		p.send(&discovery.DiscoveryRequest{TypeUrl: typ})
	}
	// Answer CDS and LDS, then subscribe to what they name, and answer those.
	subscribed := map[string]bool{}
	for answered := 0; answered < 4; answered++ {
		r := p.recv()
		p.answer(r)
		switch r.GetTypeUrl() {
		case typeCDS:
			var names []string
			for _, a := range r.GetResources() {
				var c clusterv3.Cluster
				if err := a.UnmarshalTo(&c); err != nil {
					t.Fatal(err)
				}
				if c.GetType() == clusterv3.Cluster_EDS {
					names = append(names, c.GetName())
				}
			}
			if !subscribed[typeEDS] {
				subscribed[typeEDS] = true
				p.send(&discovery.DiscoveryRequest{TypeUrl: typeEDS, ResourceNames: names})
			}
		case typeLDS:
			var names []string
			for _, a := range r.GetResources() {
				var l listenerv3.Listener
				if err := a.UnmarshalTo(&l); err != nil {
					t.Fatal(err)
				}
				for _, fc := range l.GetFilterChains() {
					for _, f := range fc.GetFilters() {
						var h hcmv3.HttpConnectionManager
						if f.GetTypedConfig().UnmarshalTo(&h) == nil && h.GetRds() != nil {
							names = append(names, h.GetRds().GetRouteConfigName())
						}
					}
				}
			}
			if !subscribed[typeRDS] {
				subscribed[typeRDS] = true
				p.send(&discovery.DiscoveryRequest{TypeUrl: typeRDS, ResourceNames: names})
			}
		}
	}
	return p
}

func (p *proxy) send(r *discovery.DiscoveryRequest) {
	p.t.Helper()
	r.Node = p.node
	if r.ResponseNonce == "" {
		p.names[r.TypeUrl] = r.ResourceNames
	} else {
		r.ResourceNames = p.names[r.TypeUrl]
	}
	if err := p.st.Send(r); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proxy) recv() *discovery.DiscoveryResponse {
	p.t.Helper()
	ch := make(chan *discovery.DiscoveryResponse, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := p.st.Recv()
		if err != nil {
			errc <- err
			return
		}
		ch <- r
	}()
	select {
	case r := <-ch:
		return r
	case err := <-errc:
		p.t.Fatal(err)
	case <-time.After(20 * time.Second):
		p.t.Fatal("no xDS response within 20s")
	}
	return nil
}

// answer ACKs r, or NACKs it if p.nack names its type.
func (p *proxy) answer(r *discovery.DiscoveryResponse) {
	req := &discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
	if msg, ok := p.nack[r.GetTypeUrl()]; ok {
		req.VersionInfo = ""
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: msg}
	}
	p.send(req)
}

// run runs one baremeshctl command line against base and returns its
// exit code, stdout and stderr.
func run(base string, now time.Time, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errb, Daemon: base, HTTP: http.DefaultClient, Now: time.Now}
	if !now.IsZero() {
		e.Now = func() time.Time { return now }
	}
	code := e.Main(args)
	return code, out.String(), errb.String()
}

// pollCtl reruns a command until cond holds on its stdout (20s deadline).
func pollCtl(t *testing.T, base string, cond func(string) bool, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errs := run(base, time.Time{}, args...)
		if code == 0 && cond(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("baremeshctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (rerun with -update if the change is right):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
