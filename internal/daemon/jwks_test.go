package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
)

const jwtWorld = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {app: web}}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules: [{issuer: https://issuer.example, jwksUri: "URI"}]
`

// TestJWKSRotationReachesProxies: baremeshd fetches the jwksUri a
// RequestAuthentication names from a real HTTP server and inlines the
// keys into the workload's jwt_authn filter; a rotated key reaches the
// sidecar (a raw ADS client on the xDS port, ACKing) within the refresh
// interval (a push); while the server fails the last keys stay and
// /debug/configz names the failure.
func TestJWKSRotationReachesProxies(t *testing.T) {
	var mu sync.Mutex
	body, code := `{"keys":[{"kty":"RSA","kid":"one","e":"AQAB","n":"AAAA"}]}`, 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	serve := func(b string, c int) { mu.Lock(); body, code = b, c; mu.Unlock() }

	dir := filepath.Join(t.TempDir(), "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jwt.yaml"), []byte(strings.Replace(jwtWorld, "URI", srv.URL+"/keys", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := daemonconfig.Defaults()
	cfg.ConfigDirs = []string{dir}
	cfg.XDSAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MeshConfig = filepath.Join(filepath.Dir(dir), "meshconfig.yaml")
	cfg.Debounce = daemonconfig.Duration{Duration: 10 * time.Millisecond}
	refresh := 300 * time.Millisecond
	cfg.JWKSRefresh = daemonconfig.Duration{Duration: refresh}
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitReady(t, d)

	// The web sidecar, over a real ADS stream: it ACKs every listener
	// response and keeps the jwt_authn keys of the latest one.
	var latest atomic.Pointer[string]
	ads := adsListeners(t, d, func(ls []*listenerv3.Listener) {
		for _, l := range ls {
			if l.GetName() == gen.VirtualInboundListener {
				k := jwtKeysIn(t, l)
				latest.Store(&k)
			}
		}
	})
	defer ads()
	keys := func() string {
		if k := latest.Load(); k != nil {
			return *k
		}
		return ""
	}
	testkit.Eventually(t, "the fetched keys in the listener", func() bool { return strings.Contains(keys(), `"kid":"one"`) })

	serve(`{"keys":[{"kty":"RSA","kid":"two","e":"AQAB","n":"BBBB"}]}`, 200)
	rotated := time.Now()
	testkit.Eventually(t, "the rotated key in the listener", func() bool { return strings.Contains(keys(), `"kid":"two"`) })
	if took := time.Since(rotated); took > refresh+2*time.Second {
		t.Errorf("rotation reached the listener after %v (refresh %v)", took, refresh)
	}
	t.Logf("rotated key in the listener after %v (refresh %v)", time.Since(rotated), refresh)

	serve("down for maintenance", 503)
	testkit.Eventually(t, "the failure on /debug/configz", func() bool {
		for _, p := range configzOf(t, d).Authn.JWKS {
			if strings.Contains(p.Source, srv.URL) && strings.Contains(p.Error, "status 503") {
				return true
			}
		}
		return false
	})
	if k := keys(); !strings.Contains(k, `"kid":"two"`) {
		t.Errorf("keys while the server fails: %s, want the last good ones", k)
	}
	if k := inlineKeys(t, d); !strings.Contains(k, `"kid":"two"`) {
		t.Errorf("keys in the snapshot while the server fails: %s, want the last good ones", k)
	}
}

// adsListeners opens an ADS stream to d's plaintext xDS port as the web
// sidecar, subscribes to every listener and hands each response's
// listeners (each through ValidateAll) to got, ACKing it; the returned
// func closes the stream and waits for the reader.
func adsListeners(t *testing.T, d *Daemon, got func([]*listenerv3.Listener)) func() {
	t.Helper()
	cc, err := grpc.NewClient(d.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"LABELS": map[string]any{"app": "web"}})
	node := &corev3.Node{Id: "sidecar~10.0.0.1~web.default~default.svc.cluster.local", Metadata: md}
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: lds}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			if r.GetTypeUrl() != lds {
				continue
			}
			var ls []*listenerv3.Listener
			var res []gen.Resource
			for _, a := range r.GetResources() {
				l := &listenerv3.Listener{}
				if a.UnmarshalTo(l) == nil {
					ls = append(ls, l)
					res = append(res, gen.Resource{Name: l.GetName(), Resource: l})
				}
			}
			gentest.Validate(t, res)
			got(ls)
			if st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: lds, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}) != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-done; cc.Close() }
}

// inlineKeys generates the web sidecar's inbound listener from the
// daemon's current snapshot and returns its jwt_authn provider's keys.
func inlineKeys(t *testing.T, d *Daemon) string {
	t.Helper()
	md := &structpb.Struct{Fields: map[string]*structpb.Value{"LABELS": structpb.NewStructValue(&structpb.Struct{
		Fields: map[string]*structpb.Value{"app": structpb.NewStringValue("web")}})}}
	p, err := gen.ParseNode(&corev3.Node{Id: "sidecar~10.0.0.1~web.default~default.svc.cluster.local", Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lds.Generate(gen.Input{Push: d.Pipeline().Current(), Proxy: p, Names: []string{gen.VirtualInboundListener}})
	if err != nil || len(res) != 1 {
		t.Fatalf("lds: %v (%d)", err, len(res))
	}
	gentest.Validate(t, res)
	return jwtKeysIn(t, res[0].Resource.(*listenerv3.Listener))
}

// jwtKeysIn returns the inline keys of the first jwt_authn provider in l.
func jwtKeysIn(t *testing.T, l *listenerv3.Listener) string {
	t.Helper()
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			var h hcmv3.HttpConnectionManager
			if f.GetTypedConfig().UnmarshalTo(&h) != nil {
				continue
			}
			for _, hf := range h.GetHttpFilters() {
				var j jwtv3.JwtAuthentication
				if hf.GetTypedConfig().UnmarshalTo(&j) == nil {
					return j.GetProviders()["origins-0"].GetLocalJwks().GetInlineString()
				}
			}
		}
	}
	return ""
}
