package file

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/core/config"
)

// TestNodeJSONAgreesWithTheGenericPath: a resource read through its YAML
// node written as JSON (config.TypedJSON) is the resource the generic
// map path (config.Typed) gives, for the forms config files use: Go
// duration syntax, numbers, booleans, nulls, escapes, non-ASCII text,
// flow and block style, and the apiVersion and kind a <Kind>List gives its
// items.
func TestNodeJSONAgreesWithTheGenericPath(t *testing.T) {
	docs := []struct{ yaml, apiVersion, kind string }{
		{yaml: `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s1, namespace: ns1, labels: {app: web, "version": "1"}, annotations: {note: "a \"quoted\"\nline\twith tab é ✓"}}
spec:
  hosts: [s1.ns1.mesh]
  addresses: [10.0.0.1]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1, weight: 3, labels: {zone: a}}, {address: 10.1.0.2, locality: us/east}]
`},
		{yaml: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: dr
spec:
  host: s1.ns1.mesh
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 100, connectTimeout: 30ms, tcpKeepalive: {time: 1h, interval: 75s}}
      http: {http1MaxPendingRequests: 10, idleTimeout: 1.5s}
    outlierDetection: {consecutive5xxErrors: 7, interval: 5m, baseEjectionTime: 15m, maxEjectionPercent: 100}
    loadBalancer: {simple: LEAST_REQUEST}
    tls: null
`},
		{yaml: `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: ns1}
spec:
  hosts: ["s1.ns1.mesh"]
  http:
  - timeout: 2.5s
    retries: {attempts: 3, perTryTimeout: 500ms, retryOn: "5xx,connect-failure"}
    fault: {delay: {percentage: {value: 0.5}, fixedDelay: 7s}}
    route:
    - destination: {host: s1.ns1.mesh, port: {number: 80}}
      weight: 100
    corsPolicy: {allowCredentials: true, maxAge: 24h}
`},
		{yaml: `metadata: {name: item}
spec:
  hosts: [item.mesh]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
  location: MESH_EXTERNAL
`, apiVersion: "networking.istio.io/v1", kind: "ServiceEntry"},
	}
	for _, d := range docs {
		var node yaml.Node
		if err := yaml.NewDecoder(bytes.NewReader([]byte(d.yaml))).Decode(&node); err != nil {
			t.Fatal(err)
		}
		root := node.Content[0]
		doc, ok := nodeJSON(root, d.apiVersion, d.kind)
		if !ok {
			t.Fatalf("nodeJSON refused plain YAML:\n%s", d.yaml)
		}
		fast, err := config.TypedJSON(doc, config.Source{Name: "file"})
		if err != nil {
			t.Fatalf("TypedJSON(%s): %v", doc, err)
		}
		var raw map[string]any
		if err := root.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		if d.apiVersion != "" {
			raw["apiVersion"], raw["kind"] = d.apiVersion, d.kind
		}
		slow, err := config.Typed(raw, config.Source{Name: "file"})
		if err != nil {
			t.Fatalf("Typed: %v", err)
		}
		if fast.Key() != slow.Key() || !proto.Equal(fast.Spec, slow.Spec) || fast.Labels["version"] != slow.Labels["version"] ||
			fast.Annotations["note"] != slow.Annotations["note"] {
			t.Errorf("%s: the JSON path gives\n%v %v\nthe generic path\n%v %v", fast.Key(), fast.Meta, fast.Spec, slow.Meta, slow.Spec)
		}
	}
}

// TestNodeJSONLeavesTheRestToTheGenericPath: anchors and aliases, merge
// keys, duplicate keys, non-string keys, YAML-only numbers and other tags
// are not written as JSON; the generic path decides them as before.
func TestNodeJSONLeavesTheRestToTheGenericPath(t *testing.T) {
	for _, y := range []string{
		"a: &x {b: 1}\nc: *x\n",
		"base: &b {x: 1}\nd: {<<: *b, y: 2}\n",
		"a: 1\na: 2\n",
		"1: one\n",
		"a: 0x1f\n",
		"a: .inf\n",
		"a: !!binary aGVsbG8=\n",
		"a: 2001-12-14t21:59:43.10-05:00\n",
		"a: True\n",
	} {
		var node yaml.Node
		if err := yaml.Unmarshal([]byte(y), &node); err != nil {
			t.Fatal(err)
		}
		if b, ok := nodeJSON(node.Content[0], "", ""); ok {
			t.Errorf("nodeJSON wrote %q as %s; want the generic path", y, b)
		}
	}
}
