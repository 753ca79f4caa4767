package parity

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultProxies connect in every scenario.
var DefaultProxies = []string{"vm-sidecar", "tproxy-sidecar", "ingress-gateway", "router", "grpc-client", "grpc-server"}

// Scenario is one configuration both control planes get, and the proxies
// that connect to both.
type Scenario struct {
	Name string `json:"name"`
	// Files are YAML files, relative to the package directory; "$BENCH/"
	// is the directory of Istio's benchmark configs.
	Files []string `json:"files"`
	// Proxies are added to DefaultProxies.
	Proxies []string `json:"proxies,omitempty"`
	// Trim, when the run is short, keeps the first Trim documents of
	// each kind (0 keeps all).
	Trim int `json:"trim,omitempty"`
	// Mesh is a mesh config file (relative to the package directory) both
	// control planes get over Istio's defaults; none: the defaults.
	Mesh string `json:"mesh,omitempty"`
	// Networks is a meshNetworks file (relative to the package
	// directory) both control planes get; none: one network.
	Networks string `json:"networks,omitempty"`
	// Apart creates the scenario's own documents one at a time in file
	// order, each in a later second than the one before (creation
	// timestamps have whole seconds), so that where istiod takes the
	// oldest first (services sharing a listener, conflicting rules) the
	// file order is the age order; otherwise documents created in one
	// second are ordered by name.
	Apart bool `json:"apart,omitempty"`
}

// LoadScenarios reads the scenario list.
func LoadScenarios(path string) ([]*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	var list []*Scenario
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		return nil, fmt.Errorf("scenarios %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, s := range list {
		if s.Name == "" || len(s.Files) == 0 || seen[s.Name] {
			return nil, fmt.Errorf("scenarios %s: entry %d (%q): needs a unique name and files", path, i, s.Name)
		}
		seen[s.Name] = true
	}
	return list, nil
}

// Doc is one Kubernetes-style resource of a scenario.
type Doc struct {
	Kind, Namespace, Name string
	Object                map[string]any
	// Apart: created on its own, a second after the document before
	// (Scenario.Apart).
	Apart bool
}

// Load reads the scenario's documents (base first), with namespaces
// defaulted to "default" and, when trim is set, only the first s.Trim
// documents of each kind of the scenario's own files.
func (s *Scenario) Load(base, benchDir string, trim bool) ([]Doc, error) {
	docs, err := readDocs(base)
	if err != nil {
		return nil, err
	}
	perKind := map[string]int{}
	for _, f := range s.Files {
		path := f
		if rest, ok := strings.CutPrefix(f, "$BENCH/"); ok {
			path = filepath.Join(benchDir, rest)
		}
		ds, err := readDocs(path)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		for _, d := range ds {
			if trim && s.Trim > 0 && perKind[d.Kind] >= s.Trim {
				continue
			}
			perKind[d.Kind]++
			d.Apart = s.Apart
			docs = append(docs, d)
		}
	}
	return docs, nil
}

func readDocs(path string) ([]Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Doc
	for i, part := range bytes.Split(b, []byte("\n---")) {
		var obj map[string]any
		if err := yaml.Unmarshal(part, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if obj == nil {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		kind, _ := obj["kind"].(string)
		if md == nil || kind == "" {
			return nil, fmt.Errorf("%s: document %d: no kind or metadata", path, i+1)
		}
		if md["namespace"] == nil {
			md["namespace"] = "default"
		}
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		out = append(out, Doc{Kind: kind, Namespace: ns, Name: name, Object: obj})
	}
	return out, nil
}

// YAML is the documents as one multi-document file.
func YAML(docs []Doc) ([]byte, error) {
	var buf bytes.Buffer
	for _, d := range docs {
		b, err := yaml.Marshal(d.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", d.Kind, d.Namespace, d.Name, err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// GRPCTargets are "host:port" of the services the documents declare
// (ServiceEntries), sorted, at most n.
func GRPCTargets(docs []Doc, n int) []string {
	var out []string
	for _, d := range docs {
		if d.Kind != "ServiceEntry" {
			continue
		}
		spec, _ := d.Object["spec"].(map[string]any)
		hosts, _ := spec["hosts"].([]any)
		ports, _ := spec["ports"].([]any)
		for _, h := range hosts {
			if strings.Contains(fmt.Sprint(h), "*") {
				continue
			}
			for _, p := range ports {
				pm, _ := p.(map[string]any)
				if num, ok := pm["number"].(float64); ok {
					out = append(out, fmt.Sprintf("%v:%d", h, int(num)))
				}
			}
		}
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}
