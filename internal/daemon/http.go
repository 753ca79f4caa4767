package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
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
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	// /version answers {"version": "x.y.z"}, which baremesh-agent's
	// controlPlane.versionURL reads to check version skew.
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"version": version.Version})
	})
	mux.HandleFunc("/debug/configz", d.configz)
	mux.HandleFunc("/debug/clusterz", d.clusterz) // cluster.go
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	for _, r := range d.extra {
		mux.Handle(r.pattern, r.h)
	}
	return mux
}

type configzResource struct {
	Kind            string            `json:"kind"`
	APIVersion      string            `json:"apiVersion"`
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Source          config.Source     `json:"source"`
	Spec            json.RawMessage   `json:"spec"`
	// Status is the status baremesh computed for a Gateway API object
	// (conditions as the API defines them; core/gatewayapi).
	Status *gatewayapi.Status `json:"status,omitempty"`
}

type configz struct {
	Snapshot  *snapshotInfo     `json:"snapshot,omitempty"`
	Resources []configzResource `json:"resources"`
	Rejected  []store.Problem   `json:"rejected"`
	Conflicts []store.Conflict  `json:"conflicts"`
	// Model lists what the service model could not build as configured
	// (ServiceEntry hosts left without an automatic address).
	Model []store.Problem `json:"model"`
	// Clusters are the Kubernetes clusters, with their connection state.
	Clusters []kube.ClusterStatus `json:"clusters,omitempty"`
	// MCP is the state of each MCP upstream.
	MCP []mcp.Status `json:"mcp,omitempty"`
	// Credentials lists gateway credentials that cannot be served and the
	// Gateway servers left out for it (credentials.go).
	Credentials []credentialProblem `json:"credentials"`
	// Authn lists JWT key sets that could not be fetched and CUSTOM
	// policies whose provider cannot be used (jwks.go).
	Authn authnProblems `json:"authn"`
}

type snapshotInfo struct {
	Version  uint64    `json:"version"`
	Built    time.Time `json:"built"`
	Services int       `json:"services"`
}

// configz shows every resource in force with its source and file, the
// rejected files with their errors, the conflicts between sources and the
// service model's problems.
func (d *Daemon) configz(w http.ResponseWriter, r *http.Request) {
	out := configz{Resources: []configzResource{}, Rejected: d.agg.Problems(), Conflicts: d.agg.Conflicts()}
	if out.Rejected == nil {
		out.Rejected = []store.Problem{}
	}
	if out.Conflicts == nil {
		out.Conflicts = []store.Conflict{}
	}
	out.Model = d.registry.Problems()
	// EnvoyFilter patches that could not be applied (skipped; #29).
	out.Model = append(out.Model, d.xds.Builder().EnvoyFilterProblems()...)
	// Telemetry resources naming providers the mesh lacks, or two at one level (#27).
	out.Model = append(out.Model, telemetry.Problems(d.pipeline.Current())...)
	if k := d.kube.Load(); k != nil {
		out.Clusters = k.Status()
	}
	out.Credentials = credentialProblems(d.pipeline.Current(), d.xds.Proxies())
	out.Authn = d.authnProblems()
	if pc := d.pipeline.Current(); pc != nil {
		out.Snapshot = &snapshotInfo{Version: pc.Version, Built: pc.Built, Services: len(pc.Services())}
	}
	for _, u := range d.upstreams {
		out.MCP = append(out.MCP, u.Status())
	}
	kind := config.Kind(r.URL.Query().Get("kind"))
	var gwStatus map[config.Key]*gatewayapi.Status
	if pc := d.pipeline.Current(); pc != nil {
		gwStatus = pc.GatewayAPIStatus()
	}
	for _, k := range config.Kinds() {
		if kind != "" && k != kind {
			continue
		}
		for _, c := range d.agg.List(k, r.URL.Query().Get("namespace")) {
			spec, err := protojson.Marshal(c.Spec)
			if err != nil {
				spec = []byte(`null`)
			}
			out.Resources = append(out.Resources, configzResource{
				Kind: string(c.Key().Kind), APIVersion: c.GVK.APIVersion(), Namespace: c.Namespace, Name: c.Name,
				Labels: c.Labels, Annotations: c.Annotations, ResourceVersion: c.ResourceVersion, Source: c.Source, Spec: spec,
				Status: gwStatus[c.Key()],
			})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
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
