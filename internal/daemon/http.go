package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

func protoEqual(a, b proto.Message) bool { return proto.Equal(a, b) }

// Handle adds a handler to the debug HTTP server (before Run).
func (d *Daemon) Handle(pattern string, h http.Handler) { d.extra = append(d.extra, route{pattern, h}) }

type route struct {
	pattern string
	h       http.Handler
}

func (d *Daemon) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-d.pipeline.Ready():
			_, _ = w.Write([]byte("ready\n"))
		default:
			http.Error(w, "not ready: first snapshot not built yet", http.StatusServiceUnavailable)
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg.Gatherer(), promhttp.HandlerOpts{}))
	// /version answers {"version": "x.y.z"}, which baremesh-agent's
	// controlPlane.versionURL reads to check version skew.
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"version": version.Version})
	})
	mux.HandleFunc("/debug/configz", d.configz)
	mux.Handle("/debug/clusterz", d.cluster.Handler()) // the registration table (cluster.go)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	for _, r := range d.extra {
		mux.Handle(r.pattern, r.h)
	}
	return mux
}

// redactedDumps is the xDS server as /debug/config_dump reads it, with
// the private keys of gateway credentials (SDS) taken out: the debug
// port must never show a secret.
type redactedDumps struct{ *ads.Server }

// redacted is what a private key reads on /debug/config_dump.
const redacted = "[redacted]"

func (r redactedDumps) Dumps(id string) []ads.Dump {
	out := r.Server.Dumps(id)
	for _, d := range out {
		for i, a := range d.Types[xdstype.Secret.Short] {
			s := &tlsv3.Secret{}
			if err := a.UnmarshalTo(s); err != nil {
				d.Types[xdstype.Secret.Short][i] = nil
				d.Errors[xdstype.Secret.Short] = append(d.Errors[xdstype.Secret.Short], fmt.Errorf("secret not shown: %w", err))
				continue
			}
			if c := s.GetTlsCertificate(); c != nil && c.PrivateKey != nil {
				c.PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: redacted}}
			}
			if c := s.GetGenericSecret(); c != nil {
				c.Secret = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: redacted}}
			}
			na, err := anypb.New(s)
			if err != nil {
				na = nil
			}
			d.Types[xdstype.Secret.Short][i] = na
		}
		d.Types[xdstype.Secret.Short] = slices.DeleteFunc(d.Types[xdstype.Secret.Short], func(a *anypb.Any) bool { return a == nil })
	}
	return out
}
