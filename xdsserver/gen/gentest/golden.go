package gentest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// ProxySpec is one proxy of a scenario's proxies.yaml.
type ProxySpec struct {
	// Name names the golden files ("<name>.<type>.json").
	Name     string            `json:"name"`
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
	Labels   map[string]string `json:"labels"`
	// ProxyConfig is the PROXY_CONFIG metadata, the ProxyConfig as JSON
	// (e.g. {"gatewayTopology": {"numTrustedProxies": 1}}).
	ProxyConfig map[string]any `json:"proxyConfig"`
	Locality    struct {
		Region  string `json:"region"`
		Zone    string `json:"zone"`
		SubZone string `json:"subzone"`
	} `json:"locality"`
	// Identity is the proxy's authenticated identity,
	// "NAMESPACE/SERVICE_ACCOUNT" (trust domain cluster.local), as the TLS
	// port would prove it; empty for an unauthenticated (plaintext)
	// proxy. A gateway needs one to be served credentials over SDS.
	Identity string `json:"identity"`
	// Names per type ("lds", "cds", "rds", "eds") to ask for; RDS and EDS
	// default to what LDS and CDS refer to.
	Names map[string][]string `json:"names"`
}

// Proxies reads dir/proxies.yaml.
func Proxies(t testing.TB, dir string) []ProxySpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "proxies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []ProxySpec
	if err := yaml.UnmarshalStrict(b, &out); err != nil {
		t.Fatalf("%s/proxies.yaml: %v", dir, err)
	}
	return out
}

// Proxy parses the spec through gen.ParseNode, as the server would, or
// fails t.
func (s ProxySpec) Proxy(t testing.TB) *model.Proxy {
	t.Helper()
	fields := map[string]*structpb.Value{}
	for k, v := range s.Metadata {
		fields[k] = structpb.NewStringValue(v)
	}
	if len(s.Labels) > 0 {
		l := map[string]*structpb.Value{}
		for k, v := range s.Labels {
			l[k] = structpb.NewStringValue(v)
		}
		fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: l})
	}
	if s.ProxyConfig != nil {
		pc, err := structpb.NewStruct(s.ProxyConfig)
		if err != nil {
			t.Fatalf("proxy %s: proxyConfig: %v", s.name(), err)
		}
		fields["PROXY_CONFIG"] = structpb.NewStructValue(pc)
	}
	n := &corev3.Node{Id: s.ID, Metadata: &structpb.Struct{Fields: fields}}
	if s.Locality.Region != "" || s.Locality.Zone != "" {
		n.Locality = &corev3.Locality{Region: s.Locality.Region, Zone: s.Locality.Zone, SubZone: s.Locality.SubZone}
	}
	p, err := gen.ParseNode(n)
	if err != nil {
		t.Fatalf("proxy %s: %v", s.name(), err)
	}
	if s.Identity != "" {
		ns, sa, ok := strings.Cut(s.Identity, "/")
		if !ok {
			t.Fatalf("proxy %s: identity %q is not NAMESPACE/SERVICE_ACCOUNT", s.name(), s.Identity)
		}
		p.Identity = &model.Identity{TrustDomain: "cluster.local", Namespace: ns, ServiceAccount: sa, Method: "test"}
	}
	return p
}

// name is the spec's Name, else its node ID.
func (s ProxySpec) name() string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

// JSON renders resources as stable, indented JSON: a list of
// {"name", "resource"} with the resource in protojson, keys sorted.
func JSON(t testing.TB, resources []gen.Resource) []byte {
	t.Helper()
	list := make([]any, 0, len(resources))
	for _, r := range resources {
		b, err := protojson.Marshal(r.Resource)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		list = append(list, map[string]any{"name": r.Name, "resource": v})
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// Golden compares got with the file at path, or writes it when update.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the generated output (run with -update and review the diff)\n%s", path, firstDiff(want, got))
	}
}

func firstDiff(a, b []byte) string {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y []byte
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if !bytes.Equal(x, y) {
			return "line " + itoa(i+1) + ":\n- " + string(x) + "\n+ " + string(y)
		}
	}
	return ""
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
