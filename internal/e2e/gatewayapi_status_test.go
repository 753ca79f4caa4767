package e2e

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// The Gateway API status tests (read from files: TestGatewayAPIStatusOnConfigz;
// from a kube-apiserver: TestGatewayAPIStatusWrittenToKubernetes) share
// one set-up and one set of expectations.

// statusEcho is the service the status tests' routes reach (always from
// files: baremesh's own config).
const statusEcho = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: edge}
spec:
  hosts: [echo.mesh]
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
`

// statusObjects are the Gateway API objects of the status tests: Gateway
// edge/gw with one HTTP listener (routes of its own namespace), route
// edge/ok attached to it, route apps/refused whose namespace the listener
// does not allow.
const statusObjects = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ok, namespace: edge}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: echo.mesh, port: 7070}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: refused, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: edge}]
  rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: echo.mesh, port: 7070}]}]
`

// statusOf returns an object's status stanza as JSON data (nil: none
// yet). kind is the manifest kind ("Gateway", "HTTPRoute").
type statusOf func(kind, ns, name string) map[string]any

// checkStatusObjects waits until the status of statusObjects is there
// and checks it: the Gateway accepted and programmed with one listener
// and one attached route, edge/ok accepted with its references resolved,
// apps/refused not accepted (NotAllowedByListeners).
func checkStatusObjects(t *testing.T, get statusOf) {
	t.Helper()
	routeCond := func(ns, name, typ string) (string, string) {
		st := get("HTTPRoute", ns, name)
		parents, _ := st["parents"].([]any)
		if len(parents) != 1 {
			return "", "no parent status"
		}
		p, _ := parents[0].(map[string]any)
		return findCond(p["conditions"], typ)
	}
	testkit.EventuallyWithin(t, e2eWait, "route status", func() bool {
		s, _ := routeCond("edge", "ok", "Accepted")
		return s == "True"
	})
	if s, r := routeCond("edge", "ok", "ResolvedRefs"); s != "True" {
		t.Errorf("route edge/ok ResolvedRefs = %q %q, want True", s, r)
	}
	if s, r := routeCond("apps", "refused", "Accepted"); s != "False" || r != "NotAllowedByListeners" {
		t.Errorf("route apps/refused Accepted = %q %q, want False NotAllowedByListeners", s, r)
	}
	var gw map[string]any
	testkit.EventuallyWithin(t, e2eWait, "gateway status", func() bool {
		gw = get("Gateway", "edge", "gw")
		s, _ := findCond(gw["conditions"], "Programmed")
		return s == "True"
	})
	if s, r := findCond(gw["conditions"], "Accepted"); s != "True" || r != "Accepted" {
		t.Errorf("gateway Accepted = %q %q, want True Accepted", s, r)
	}
	listeners, _ := gw["listeners"].([]any)
	if len(listeners) != 1 {
		t.Fatalf("gateway listeners status: %v", listeners)
	}
	switch n := listeners[0].(map[string]any)["attachedRoutes"].(type) {
	case float64: // JSON from configz
		if n != 1 {
			t.Errorf("attachedRoutes = %v, want 1", n)
		}
	case int64: // unstructured from the API server
		if n != 1 {
			t.Errorf("attachedRoutes = %v, want 1", n)
		}
	default:
		t.Errorf("attachedRoutes = %v (%T), want 1", n, n)
	}
}

// findCond returns the status and reason of the condition typ in conds
// (a JSON list of conditions).
func findCond(conds any, typ string) (status, reason string) {
	list, _ := conds.([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			return s, r
		}
	}
	return "", ""
}
