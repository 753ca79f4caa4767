package analyze

import (
	"strings"
	"testing"

	"github.com/baremesh/baremesh/sources/file"
)

const base = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.mesh]
  ports: [{number: 80, name: http}]
  resolution: STATIC
  workloadSelector: {labels: {app: web}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: ns}
spec:
  hosts: ["*.example.com"]
  ports: [{number: 443, name: tls-ext}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: web-1, namespace: ns}
spec: {address: 10.0.0.1, labels: {app: web, version: v1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: api, namespace: ns}
spec:
  metadata: {labels: {app: api}}
  template: {serviceAccount: api}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: ns}
spec:
  host: web.ns.mesh
  subsets: [{name: v1, labels: {version: v1}}]
`

// TestAnalyze: each case adds documents to base and lists the messages
// expected, as "CODE kind/name: text fragment".
func TestAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"clean base", "", nil},
		{"subset and host found, wildcard host", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.mesh]
  http: [{route: [{destination: {host: web.ns.mesh, subset: v1}, weight: 50}, {destination: {host: api.example.com}, weight: 50}]}]`, nil},
		{"missing subset", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.mesh]
  http: [{route: [{destination: {host: web.ns.mesh, subset: v9}}]}]`,
			[]string{`IST0101 VirtualService/web: Referenced host+subset in destinationrule not found: "web.ns.mesh+v9"`}},
		{"missing host in tcp route and mirror", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.mesh]
  http: [{route: [{destination: {host: web.ns.mesh}}], mirror: {host: shadow.ns.mesh}}]
  tcp: [{route: [{destination: {host: db.ns.mesh}}]}]`,
			[]string{`IST0101 VirtualService/web: Referenced host not found: "db.ns.mesh"`, `IST0101 VirtualService/web: Referenced mirror host not found: "shadow.ns.mesh"`}},
		{"missing gateway; gateway without VS", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.example.com]
  gateways: [mesh, other/gw]
  http: [{route: [{destination: {host: web.ns.mesh}}]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  selector: {app: web}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]`,
			[]string{`IST0101 VirtualService/web: Referenced gateway not found: "other/gw"`, `BM0001 Gateway/gw: No VirtualService binds`}},
		{"gateway bound, selector selects nothing", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.example.com]
  gateways: [gw]
  http: [{route: [{destination: {host: web.ns.mesh}}]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]`,
			[]string{`IST0101 Gateway/gw: Referenced selector not found: "istio=ingressgateway"`}},
		{"sidecar selects a WorkloadGroup's members: fine", `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: api, namespace: ns}
spec:
  workloadSelector: {labels: {app: api}}
  egress: [{hosts: ["./*"]}]`, nil},
		{"sidecar selects nothing; two without selector", `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: a, namespace: ns}
spec:
  workloadSelector: {labels: {app: nothing}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: b, namespace: ns}
spec: {egress: [{hosts: ["./*"]}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: c, namespace: ns}
spec: {egress: [{hosts: ["./*"]}]}`,
			[]string{`IST0101 Sidecar/a: Referenced selector not found: "app=nothing"`,
				`IST0111 Sidecar/b: The Sidecars [ns/b ns/c] in namespace "ns" have no workload selector`,
				`IST0111 Sidecar/c: The Sidecars [ns/b ns/c] in namespace "ns" have no workload selector`}},
		{"two sidecars select one workload", `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: a, namespace: ns}
spec:
  workloadSelector: {labels: {app: web}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: b, namespace: ns}
spec:
  workloadSelector: {labels: {version: v1}}
  egress: [{hosts: ["./*"]}]`,
			[]string{`IST0110 Sidecar/a: The Sidecars [ns/a ns/b] in namespace "ns" select the same workload "WorkloadEntry ns/web-1"`,
				`IST0110 Sidecar/b: The Sidecars [ns/a ns/b] in namespace "ns" select the same workload "WorkloadEntry ns/web-1"`}},
		{"authorization policy selects nothing in its namespace", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: other}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules: [{}]`,
			[]string{`IST0127 AuthorizationPolicy/deny: No matching workloads for this resource with the following labels: app=web`}},
		{"dry-run annotation", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: yes-value, namespace: ns, annotations: {istio.io/dry-run: "yes"}}
spec:
  action: DENY
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: custom, namespace: ns, annotations: {istio.io/dry-run: "true"}}
spec:
  action: CUSTOM
  provider: {name: ext}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: fine, namespace: ns, annotations: {istio.io/dry-run: "True"}}
spec:
  action: DENY
  rules: [{}]`,
			[]string{`IST0125 AuthorizationPolicy/yes-value: Invalid annotation istio.io/dry-run: "yes" is not a boolean (true or false); the policy is enforced`,
				`IST0125 AuthorizationPolicy/custom: Invalid annotation istio.io/dry-run: a CUSTOM policy has no dry run; the policy is enforced (its authorizer decides)`}},
		{"traffic distribution annotation", `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: near, namespace: ns, annotations: {networking.istio.io/traffic-distribution: Nearest}}
spec:
  hosts: [near.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: fine, namespace: ns, annotations: {networking.istio.io/traffic-distribution: prefersamezone}}
spec:
  hosts: [fine.ns.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS`,
			[]string{`IST0125 ServiceEntry/near: Invalid annotation networking.istio.io/traffic-distribution: "Nearest" is none of PreferClose, PreferSameZone, PreferSameNode; endpoints get no preference`}},
		{"fields baremeshd does not act on", `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: sc, namespace: ns}
spec:
  ingress:
  - port: {number: 8443, name: https, protocol: HTTPS}
    defaultEndpoint: 127.0.0.1:8080
    tls: {mode: SIMPLE, serverCertificate: /c.pem, privateKey: /k.pem}
  egress:
  - hosts: ["./*"]
    bind: 127.0.0.1
    port: {number: 9000, name: tcp, protocol: TCP}
    captureMode: NONE
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: ns}
spec:
  host: web.ns.svc.cluster.local
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy: {loadBalancer: {zoneAwareLbSetting: {}}}`,
			[]string{`BM0006 Sidecar/sc: spec.ingress[0].tls is not supported by baremeshd; the sidecar terminates no TLS on this port`,
				`BM0006 Sidecar/sc: spec.egress[0].bind is not supported by baremeshd; the listener is a captured one`,
				`BM0006 Sidecar/sc: spec.egress[0].captureMode is not supported by baremeshd; the proxy's interception mode applies`,
				`BM0006 DestinationRule/dr: loadBalancer.zoneAwareLbSetting is not supported by baremeshd; no zone-aware routing (it needs Envoy's local cluster)`}},
		{"port names", `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: odd, namespace: ns}
spec:
  hosts: [odd.ns.mesh]
  ports:
  - {number: 1, name: grpc-web-ui}
  - {number: 2, name: http2}
  - {number: 3, name: web}
  - {number: 4, name: admin, protocol: TCP}
  - {number: 5, name: metrics, targetPort: 9090}
  resolution: DNS`,
			[]string{`IST0118 ServiceEntry/odd: Port name web (port: 3, targetPort: 3)`, `IST0118 ServiceEntry/odd: Port name metrics (port: 5, targetPort: 9090)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			if tc.yaml != "" {
				src += "---\n" + tc.yaml + "\n"
			}
			cfgs, errs := file.Parse([]byte(src), "case.yaml", "test")
			if len(errs) > 0 {
				t.Fatalf("parse: %v", errs)
			}
			got := Analyze(cfgs)
			var gotS []string
			for _, m := range got {
				gotS = append(gotS, m.Code.ID+" "+string(m.Resource.Kind)+"/"+m.Resource.Name+": "+m.Text)
				if m.Source.File != "case.yaml" || m.Source.Line == 0 {
					t.Errorf("%s: no file:line (%+v)", m, m.Source)
				}
			}
			if len(gotS) != len(tc.want) {
				t.Fatalf("got %d messages, want %d:\n%s", len(gotS), len(tc.want), strings.Join(gotS, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range gotS {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("missing %q in:\n%s", w, strings.Join(gotS, "\n"))
				}
			}
		})
	}
}

func TestMessageString(t *testing.T) {
	cfgs, _ := file.Parse([]byte(base+"---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: ns}\nspec:\n  hosts: [x]\n  http: [{route: [{destination: {host: nope}}]}]\n"), "dir/f.yaml", "t")
	got := Analyze(cfgs)
	want := `Error [IST0101] (VirtualService ns/v dir/f.yaml:37) Referenced host not found: "nope"`
	if len(got) != 1 || got[0].String() != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
