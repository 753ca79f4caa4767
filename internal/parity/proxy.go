package parity

import (
	"fmt"
	"os"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// Proxy is one proxy as it describes itself to a control plane: the node
// ID and metadata Istio's agent (or a proxyless gRPC bootstrap) sends.
type Proxy struct {
	// Name names the proxy in reports and in scenarios' proxy lists.
	Name string `json:"name"`
	// Kind is the proxy kind catalog entries apply to: sidecar,
	// gateway, router, grpc-client, grpc-server.
	Kind     string         `json:"kind"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata"`
	Locality struct {
		Region string `json:"region"`
		Zone   string `json:"zone"`
	} `json:"locality"`
	// Listeners are the LDS names a proxyless proxy subscribes to.
	Listeners []string `json:"listeners"`
	// ScenarioTargets: a proxyless client also subscribes to the
	// "host:port" listener of every service port of the scenario (up to
	// this many).
	ScenarioTargets int `json:"scenarioTargets"`
	// Proxyless is set for GENERATOR=grpc.
	Proxyless bool `json:"-"`
}

// LoadProxies reads the shared proxy descriptions (testdata/proxies.yaml).
func LoadProxies(path string) (map[string]*Proxy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proxies: %w", err)
	}
	var list []*Proxy
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		return nil, fmt.Errorf("proxies %s: %w", path, err)
	}
	out := map[string]*Proxy{}
	for i, p := range list {
		if p.Name == "" || p.ID == "" || p.Kind == "" {
			return nil, fmt.Errorf("proxies %s: entry %d: name, kind and id are required", path, i)
		}
		if _, dup := out[p.Name]; dup {
			return nil, fmt.Errorf("proxies %s: %s listed twice", path, p.Name)
		}
		if _, err := structpb.NewStruct(p.Metadata); err != nil {
			return nil, fmt.Errorf("proxies %s: %s: metadata: %w", path, p.Name, err)
		}
		p.Proxyless = p.Metadata["GENERATOR"] == "grpc"
		out[p.Name] = p
	}
	return out, nil
}

// Node is the xDS node the proxy sends.
func (p *Proxy) Node() *corev3.Node {
	md, _ := structpb.NewStruct(p.Metadata) // checked by LoadProxies
	return &corev3.Node{
		Id:            p.ID,
		Cluster:       fmt.Sprint(p.Metadata["WORKLOAD_NAME"]),
		Metadata:      md,
		Locality:      nodeLocality(p.Locality.Region, p.Locality.Zone),
		UserAgentName: map[bool]string{true: "gRPC Go", false: "envoy"}[p.Proxyless],
	}
}

// withListeners is a copy of p subscribing to more listeners.
func (p *Proxy) withListeners(extra []string) *Proxy {
	c := *p
	c.Listeners = append(append([]string(nil), p.Listeners...), extra...)
	return &c
}
