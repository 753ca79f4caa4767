package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// A Gateway resource in one namespace selecting a gateway deployed in
// another, as Istio allows: its credentials are read in the gateway's
// namespace (istio-system), not the Gateway's (istio-config).
const crossNamespaceGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: istio-config}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: own, protocol: HTTPS}
    hosts: [own.example.com]
    tls: {mode: SIMPLE, credentialName: own-cert}
  - port: {number: 443, name: cfg, protocol: HTTPS}
    hosts: [cfg.example.com]
    tls: {mode: SIMPLE, credentialName: cfg-cert}
`

// TestConfigzAgreesWithServedGateway (issue #31 item 1): /debug/configz
// names a Gateway server's credential problem exactly when the connected
// gateway's LDS leaves that server out; both judge by one rule
// (scope.GatewayServer.CredentialProblem). Before, the page judged by the
// Gateway resource's namespace and the listeners by the gateway's: with a
// Gateway in istio-config for a gateway in istio-system, the page named
// the served own-cert server and not the left-out cfg-cert one.
func TestConfigzAgreesWithServedGateway(t *testing.T) {
	ca := newTestCA(t)
	creds := t.TempDir()
	ownCert, ownKey := ca.issue(t, "own.example.com", 30)
	writeCredential(t, creds, "own-cert", map[string][]byte{"tls.crt": ownCert, "tls.key": ownKey, "namespaces": []byte("istio-system\n")})
	cfgCert, cfgKey := ca.issue(t, "cfg.example.com", 31)
	writeCredential(t, creds, "cfg-cert", map[string][]byte{"tls.crt": cfgCert, "tls.key": cfgKey, "namespaces": []byte("istio-config\n")})
	stateDir := t.TempDir()
	m := startMeshWith(t, map[string]string{"gw.yaml": crossNamespaceGateway}, func(c *daemonconfig.Config) {
		c.CredentialsDir = creds
		c.TLSAddr, c.StateDir, c.TLSSANs = "127.0.0.1:0", stateDir, []string{"127.0.0.1"}
	})
	g := newGatewayClient(t, m, stateDir, "istio-system", "ingress", ingressNode)
	g.send(xdstype.Listener.URL, "", "")
	lds, err := g.recv(xdstype.Listener.URL)
	if err != nil {
		t.Fatal(err)
	}
	served := chains(t, lds)
	if !slices.Equal(served, []string{"own.example.com"}) {
		t.Fatalf("gateway chains %v, want own.example.com only (cfg-cert is istio-config's)", served)
	}
	var leftOut []string // servers configz names for the connected gateway
	testkit.EventuallyWithin(t, 10*time.Second, "configz judges the connected gateway", func() bool {
		resp, err := http.Get("http://" + m.d.HTTPAddr() + "/debug/configz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var cz struct {
			Credentials []struct{ Credential, Gateway, Server, Proxy, Error string } `json:"credentials"`
		}
		if json.NewDecoder(resp.Body).Decode(&cz) != nil {
			return false
		}
		leftOut = nil
		for _, p := range cz.Credentials {
			if p.Gateway != "" {
				if p.Gateway != "istio-config/edge" || p.Proxy != ingressNode {
					t.Errorf("configz problem %+v: want gateway istio-config/edge, proxy %s", p, ingressNode)
				}
				leftOut = append(leftOut, p.Server)
			}
		}
		return len(leftOut) > 0
	})
	// Every server is served or named, never both, never neither.
	for server, host := range map[string]string{"own": "own.example.com", "cfg": "cfg.example.com"} {
		if slices.Contains(served, host) == slices.Contains(leftOut, server) {
			t.Errorf("server %s: served %v, named on configz %v: the page and LDS disagree", server, slices.Contains(served, host), slices.Contains(leftOut, server))
		}
	}
}
