package gentest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// recorder is a testing.TB that records failures instead of failing the
// test. It is a fake because a real testing.T cannot hand a failure back
// to its caller: Fatal ends the goroutine (as testing.T's does) and the
// failure is kept for the test to inspect.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatal(args ...any) {
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// failures runs f with a recorder in a goroutine of its own (Fatal ends
// it) and returns what f failed with.
func failures(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return strings.Join(r.msgs, "\n")
}

// listener is a listener whose connection manager has statPrefix; an
// empty one fails validation inside the Any.
func listener(statPrefix string) *listenerv3.Listener {
	h := &hcmv3.HttpConnectionManager{StatPrefix: statPrefix, RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: gen.ADS(), RouteConfigName: "80"}}}
	return &listenerv3.Listener{Name: "l", Address: gen.SocketAddress("0.0.0.0", 80), FilterChains: []*listenerv3.FilterChain{{
		Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: gen.MustAny(h)}}},
	}}}
}

// TestRunFailsOnErrorOrInvalidOutput: Run fails the test on a generator
// error and on a resource that does not validate; valid output comes back.
func TestRunFailsOnErrorOrInvalidOutput(t *testing.T) {
	returning := func(res []gen.Resource, err error) gen.Generator {
		return func(gen.Input) ([]gen.Resource, error) { return res, err }
	}
	if got := failures(t, func(tb testing.TB) { Run(tb, returning(nil, errors.New("lds: boom")), gen.Input{}) }); !strings.Contains(got, "lds: boom") {
		t.Errorf("generator error: failures %q, want the error", got)
	}
	bad := []gen.Resource{{Name: "l", Resource: listener("")}}
	if got := failures(t, func(tb testing.TB) { Run(tb, returning(bad, nil), gen.Input{}) }); !strings.Contains(got, "StatPrefix") {
		t.Errorf("invalid listener: failures %q, want its StatPrefix error", got)
	}
	good := []gen.Resource{{Name: "l", Resource: listener("x")}}
	var res []gen.Resource
	if got := failures(t, func(tb testing.TB) { res = Run(tb, returning(good, nil), gen.Input{}) }); got != "" || len(res) != 1 {
		t.Errorf("valid listener: failures %q, %d resources", got, len(res))
	}
	if l := ByName[*listenerv3.Listener](res)["l"]; l == nil || l.GetName() != "l" {
		t.Errorf("ByName: %v, want listener l", l)
	}
}

// TestNodeAndSpecParse: Node and ProxySpec.Proxy go through
// gen.ParseNode (type, namespace, metadata, labels, PROXY_CONFIG), and a
// node it refuses fails the test, named.
func TestNodeAndSpecParse(t *testing.T) {
	p := Node(t, "router~10.0.0.1~gw.edge~edge.svc.cluster.local", map[string]string{"ISTIO_VERSION": "1.31.0"})
	if p.Type != model.Router || p.Namespace != "edge" || !p.IstioProxy {
		t.Errorf("Node: type %s namespace %s istio-proxy %v, want router, edge, true", p.Type, p.Namespace, p.IstioProxy)
	}
	p = ProxySpec{ID: "router~10.0.0.1~gw.edge~edge.svc.cluster.local", Labels: map[string]string{"istio": "ingressgateway"},
		ProxyConfig: map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": 2}}}.Proxy(t)
	if p.Labels["istio"] != "ingressgateway" || p.GatewayTopology == nil || p.GatewayTopology.NumTrustedProxies != 2 {
		t.Errorf("ProxySpec: labels %v, gateway topology %+v; want istio=ingressgateway, 2 trusted hops", p.Labels, p.GatewayTopology)
	}
	if got := failures(t, func(tb testing.TB) { Node(tb, "proxy~10.0.0.1~a.ns~ns.svc.cluster.local", nil) }); !strings.Contains(got, "proxy proxy~10.0.0.1~a.ns~ns.svc.cluster.local") ||
		!strings.Contains(got, "unknown proxy type") {
		t.Errorf("bad node: failures %q, want the node named and the reason", got)
	}
}

// TestMustBuild: documents from several files make one snapshot; a
// document that does not validate fails the test.
func TestMustBuild(t *testing.T) {
	const se = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: %s, namespace: ns}
spec:
  hosts: [%s.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`
	pc := MustBuild(t, fmt.Sprintf(se, "a", "a"), fmt.Sprintf(se, "b", "b"))
	for _, h := range []string{"a.example.com", "b.example.com"} {
		if len(pc.ServicesByHost(h)) != 1 {
			t.Errorf("no service %s", h)
		}
	}
	if got := failures(t, func(tb testing.TB) { MustBuild(tb, fmt.Sprintf(se, "c", "c")+"  bogus: 1\n") }); got == "" {
		t.Error("a ServiceEntry with an unknown field built")
	}
}
