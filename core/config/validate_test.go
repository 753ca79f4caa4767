package config_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
)

// typed decodes one YAML manifest and types it.
func typed(t testing.TB, manifest string) (config.Config, error) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, manifest)
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, manifest)
	}
	return config.Typed(raw, config.Source{Name: "test"})
}

const (
	net1      = "apiVersion: networking.istio.io/v1\n"
	net1beta1 = "apiVersion: networking.istio.io/v1beta1\n"
	net1alpha = "apiVersion: networking.istio.io/v1alpha3\n"
	sec1      = "apiVersion: security.istio.io/v1\n"
	sec1beta1 = "apiVersion: security.istio.io/v1beta1\n"
	meta      = "metadata: {name: x, namespace: ns}\n"
)

// se, vs, … build a manifest of that kind from its spec.
func se(spec string) string { return net1 + "kind: ServiceEntry\n" + meta + "spec:\n" + spec }
func we(spec string) string { return net1 + "kind: WorkloadEntry\n" + meta + "spec:\n" + spec }
func wg(spec string) string { return net1 + "kind: WorkloadGroup\n" + meta + "spec:\n" + spec }
func vs(spec string) string { return net1 + "kind: VirtualService\n" + meta + "spec:\n" + spec }
func dr(spec string) string { return net1 + "kind: DestinationRule\n" + meta + "spec:\n" + spec }
func gw(spec string) string { return net1 + "kind: Gateway\n" + meta + "spec:\n" + spec }
func sc(spec string) string { return net1 + "kind: Sidecar\n" + meta + "spec:\n" + spec }
func pa(spec string) string { return sec1 + "kind: PeerAuthentication\n" + meta + "spec:\n" + spec }
func ap(spec string) string { return sec1 + "kind: AuthorizationPolicy\n" + meta + "spec:\n" + spec }

const (
	sePorts   = "  ports: [{number: 80, name: http, protocol: HTTP}]\n"
	vsRoute   = "  http:\n  - route:\n    - destination: {host: reviews}\n"
	gwServers = "  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n"
)

type row struct {
	name     string
	manifest string
	// want is "" for a valid manifest, else a substring of the error
	// (usually the field path).
	want string
}

var rows = []row{
	// Envelope.
	{"unknown kind", net1 + "kind: Frobnicator\n" + meta + "spec: {}\n", "unknown kind"},
	{"wrong apiVersion", "apiVersion: networking.istio.io/v2\nkind: ServiceEntry\n" + meta + "spec: {}\n", "unsupported apiVersion"},
	{"security kind in networking group", net1 + "kind: PeerAuthentication\n" + meta + "spec: {}\n", "unsupported apiVersion"},
	{"unknown field", se("  hosts: [a.example.com]\n  resolution: DNS\n  bogus: 1\n"), "unknown field"},
	{"missing name", net1 + "kind: ServiceEntry\nmetadata: {namespace: ns}\nspec: {hosts: [a.example.com], resolution: DNS}\n", "metadata.name"},
	{"bad metadata label", net1 + "kind: ServiceEntry\nmetadata: {name: x, labels: {\"-bad\": v}}\nspec: {hosts: [a.example.com], resolution: DNS}\n", "metadata.labels[-bad]"},
	{"bad enum", se("  hosts: [a.example.com]\n  resolution: SOMETIMES\n"), "resolution"},

	// ServiceEntry.
	{"SE valid v1 DNS", se("  hosts: [api.example.com]\n" + sePorts + "  resolution: DNS\n  location: MESH_EXTERNAL\n"), ""},
	{"SE valid v1beta1 static", net1beta1 + "kind: ServiceEntry\n" + meta + "spec:\n  hosts: [db.internal]\n  addresses: [10.0.0.0/24]\n" + sePorts +
		"  resolution: STATIC\n  endpoints: [{address: 10.0.0.5, ports: {http: 8080}, labels: {app: db}}]\n", ""},
	{"SE valid v1alpha3 selector", net1alpha + "kind: ServiceEntry\n" + meta + "spec:\n  hosts: [vm.internal]\n" + sePorts +
		"  resolution: STATIC\n  workloadSelector: {labels: {app: vm}}\n", ""},
	{"SE valid unix endpoint", se("  hosts: [uds.internal]\n" + sePorts + "  resolution: STATIC\n  endpoints: [{address: unix:///var/run/app.sock}]\n"), ""},
	{"SE valid NONE wildcard", se("  hosts: [\"*.example.com\"]\n" + sePorts + "  resolution: NONE\n"), ""},
	{"SE valid protocol lower case, sniffed", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http, protocol: http}, {number: 81, name: auto}]\n  resolution: DNS\n"), ""},
	{"SE hosts required", se("  resolution: DNS\n" + sePorts), "spec.hosts"},
	{"SE star host with DNS", se("  hosts: [\"*\"]\n" + sePorts + "  resolution: DNS\n"), "spec.hosts[0]"},
	{"SE bad host", se("  hosts: [\"bad_host.example.com\"]\n" + sePorts + "  resolution: DNS\n"), "spec.hosts[0]"},
	{"SE numeric TLD", se("  hosts: [\"foo.123\"]\n" + sePorts + "  resolution: NONE\n"), "spec.hosts[0]"},
	{"SE bad address", se("  hosts: [a.example.com]\n  addresses: [10.0.0.300]\n" + sePorts + "  resolution: NONE\n"), "spec.addresses[0]"},
	{"SE CIDR with DNS", se("  hosts: [a.example.com]\n  addresses: [10.0.0.0/8]\n" + sePorts + "  resolution: DNS\n"), "spec.addresses"},
	{"SE port out of range", se("  hosts: [a.example.com]\n  ports: [{number: 70000, name: http, protocol: HTTP}]\n  resolution: DNS\n"), "spec.ports[0].number"},
	{"SE duplicate port number", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP}, {number: 80, name: web, protocol: HTTP}]\n  resolution: DNS\n"), "spec.ports[1].number"},
	{"SE duplicate port name", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http, protocol: HTTP}]\n  resolution: DNS\n"), "spec.ports[1].name"},
	{"SE bad protocol", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http, protocol: SPDY}]\n  resolution: DNS\n"), "spec.ports[0].protocol"},
	{"SE bad port name", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: Http_1, protocol: HTTP}]\n  resolution: DNS\n"), "spec.ports[0].name"},
	{"SE bad targetPort", se("  hosts: [a.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 65536}]\n  resolution: DNS\n"), "spec.ports[0].targetPort"},
	{"SE STATIC without endpoints (valid, as Istio)", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: STATIC\n"), ""},
	{"SE selector and endpoints", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: STATIC\n  workloadSelector: {labels: {app: a}}\n  endpoints: [{address: 1.2.3.4}]\n"), "spec.workloadSelector"},
	{"SE STATIC hostname endpoint", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: STATIC\n  endpoints: [{address: 1.2.3.4}, {address: b.example.com}]\n"), "spec.endpoints[1].address"},
	{"SE DNS hostname endpoint", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: DNS\n  endpoints: [{address: b.example.com}]\n"), ""},
	{"SE DNS_ROUND_ROBIN two endpoints", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: DNS_ROUND_ROBIN\n  endpoints: [{address: b.example.com}, {address: c.example.com}]\n"), "spec.endpoints"},
	{"SE endpoint undeclared port", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: STATIC\n  endpoints: [{address: 1.2.3.4, ports: {grpc: 9000}}]\n"), "spec.endpoints[0].ports[grpc]"},
	{"SE NONE with endpoints", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: NONE\n  endpoints: [{address: 1.2.3.4}]\n"), "spec.endpoints"},
	{"SE DNS wildcard without endpoints", se("  hosts: [\"*.example.com\"]\n" + sePorts + "  resolution: DNS\n"), "spec.hosts[0]"},
	{"SE exportTo bad", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: DNS\n  exportTo: [\"*\", \".\"]\n"), "spec.exportTo"},
	{"SE exportTo duplicate", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: DNS\n  exportTo: [\".\", ns]\n"), "spec.exportTo[1]"},
	{"SE multiple hosts TCP", se("  hosts: [a.example.com, b.example.com]\n  ports: [{number: 5432, name: pg, protocol: TCP}]\n  resolution: DNS\n"), "spec.ports[0].protocol"},
	{"SE selector wildcard", se("  hosts: [a.example.com]\n" + sePorts + "  resolution: STATIC\n  workloadSelector: {labels: {app: \"*\"}}\n"), "spec.workloadSelector.labels[app]"},

	// WorkloadEntry.
	{"WE valid v1", we("  address: 10.1.2.3\n  ports: {http: 8080}\n  labels: {app: vm, version: v1}\n  serviceAccount: vm-sa\n  weight: 10\n"), ""},
	{"WE valid v1beta1 hostname", net1beta1 + "kind: WorkloadEntry\n" + meta + "spec: {address: vm1.example.com}\n", ""},
	{"WE valid v1alpha3 network only", net1alpha + "kind: WorkloadEntry\n" + meta + "spec: {network: remote}\n", ""},
	{"WE address required", we("  labels: {app: vm}\n"), "spec.address"},
	{"WE bad address", we("  address: \"not an address\"\n"), "spec.address"},
	{"WE bad port", we("  address: 10.1.2.3\n  ports: {http: 0}\n"), "spec.ports[http]"},
	{"WE bad label", we("  address: 10.1.2.3\n  labels: {app: \"bad value\"}\n"), "spec.labels[app]"},
	{"WE unix with ports", we("  address: unix:///run/a.sock\n  ports: {http: 80}\n"), "spec.ports"},
	{"WE bad serviceAccount", we("  address: 10.1.2.3\n  serviceAccount: Bad_SA\n"), "spec.serviceAccount"},

	// WorkloadGroup.
	{"WG valid v1", wg("  metadata: {labels: {app: vm}}\n  template: {ports: {http: 8080}, serviceAccount: vm}\n  probe: {periodSeconds: 5, httpGet: {path: /ready, port: 8080}}\n"), ""},
	{"WG valid v1beta1", net1beta1 + "kind: WorkloadGroup\n" + meta + "spec: {template: {}, probe: {tcpSocket: {port: 3306}}}\n", ""},
	{"WG valid v1alpha3", net1alpha + "kind: WorkloadGroup\n" + meta + "spec: {template: {}, probe: {exec: {command: [/bin/check]}}}\n", ""},
	{"WG template address", wg("  template: {address: 1.2.3.4}\n"), "spec.template.address"},
	{"WG bad metadata label", wg("  metadata: {labels: {\"a/b/c\": x}}\n  template: {}\n"), "spec.metadata.labels"},
	{"WG probe without method", wg("  template: {}\n  probe: {periodSeconds: 5}\n"), "spec.probe"},
	{"WG probe bad port", wg("  template: {}\n  probe: {grpc: {port: 0}}\n"), "spec.probe.grpc.port"},
	{"WG probe negative", wg("  template: {}\n  probe: {failureThreshold: -1, tcpSocket: {port: 80}}\n"), "spec.probe.failureThreshold"},

	// VirtualService.
	{"VS valid v1", vs("  hosts: [reviews]\n  gateways: [mesh, istio-system/public]\n  http:\n  - match: [{uri: {prefix: /api}, headers: {x-user: {exact: jason}, x-present: {}}, method: {exact: GET}}]\n" +
		"    route:\n    - destination: {host: reviews, subset: v1, port: {number: 9080}}\n      weight: 75\n    - destination: {host: reviews, subset: v2}\n      weight: 25\n" +
		"    timeout: 5s\n    retries: {attempts: 3, perTryTimeout: 2s, retryOn: \"5xx,connect-failure,503\"}\n" +
		"    fault: {delay: {percentage: {value: 10}, fixedDelay: 1s}, abort: {percentage: {value: 1}, httpStatus: 503}}\n" +
		"    mirror: {host: reviews-shadow}\n    mirrorPercentage: {value: 50}\n    corsPolicy: {allowOrigins: [{exact: \"https://a.example.com\"}], allowMethods: [GET, POST], maxAge: 24h}\n"), ""},
	{"VS valid v1beta1 tcp", net1beta1 + "kind: VirtualService\n" + meta + "spec:\n  hosts: [db]\n  tcp:\n  - match: [{port: 5432}]\n    route: [{destination: {host: db}}]\n", ""},
	{"VS valid v1alpha3 tls", net1alpha + "kind: VirtualService\n" + meta + "spec:\n  hosts: [\"*.example.com\"]\n  gateways: [gw]\n  tls:\n  - match: [{sniHosts: [a.example.com], port: 443}]\n    route: [{destination: {host: a.example.com}}]\n", ""},
	{"VS valid delegate", vs("  http:\n  - match: [{uri: {prefix: /a}}]\n    route: [{destination: {host: a}}]\n"), ""},
	{"VS valid redirect", vs("  hosts: [a.example.com]\n  http:\n  - redirect: {uri: /new, redirectCode: 301}\n"), ""},
	{"VS weights not adding to 100", vs("  hosts: [a]\n  http:\n  - route:\n    - {destination: {host: a}, weight: 1}\n    - {destination: {host: b}, weight: 3}\n"), "spec.http[0].route: the weights of the destinations add up to 4, not 100"},
	{"VS header ops authority", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}, headers: {request: {set: {Host: b.example.com}}}}]\n    headers: {request: {add: {\":authority\": c.example.com}}}\n"), ""},
	{"VS header ops host in response", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    headers: {response: {set: {host: x}}}\n"), "spec.http[0].headers.response.set[host]"},
	{"VS header ops host removed", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    headers: {request: {remove: [HOST]}}\n"), "spec.http[0].headers.request.remove[0]"},
	{"VS header ops pseudo header", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}, headers: {request: {set: {\":path\": /x}}}}]\n"), "spec.http[0].route[0].headers.request.set[:path]"},
	{"VS header ops pseudo header in response", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    headers: {response: {add: {\":authority\": x}}}\n"), "spec.http[0].headers.response.add[:authority]"},
	{"VS valid single weight 50", vs("  hosts: [a]\n  http:\n  - route:\n    - {destination: {host: a}, weight: 50}\n"), ""},
	{"VS no routes", vs("  hosts: [a]\n"), "spec"},
	{"VS route without destination", vs("  hosts: [a]\n  http:\n  - route:\n    - weight: 100\n"), "spec.http[0].route[0].destination"},
	{"VS destination host required", vs("  hosts: [a]\n  http:\n  - route:\n    - destination: {subset: v1}\n"), "spec.http[0].route[0].destination.host"},
	{"VS negative weight", vs("  hosts: [a]\n  http:\n  - route:\n    - {destination: {host: a}, weight: -1}\n    - {destination: {host: b}, weight: 101}\n"), "spec.http[0].route[0].weight"},
	{"VS zero weights", vs("  hosts: [a]\n  http:\n  - route:\n    - {destination: {host: a}, weight: 0}\n    - {destination: {host: b}, weight: 0}\n"), "spec.http[0].route"},
	{"VS empty route rule", vs("  hosts: [a]\n  http:\n  - match: [{uri: {exact: /}}]\n"), "spec.http[0].route"},
	{"VS route and redirect", vs("  hosts: [a]\n  http:\n  - redirect: {uri: /b}\n" + "    route: [{destination: {host: a}}]\n"), "spec.http[0].redirect"},
	{"VS bad regex", vs("  hosts: [a]\n  http:\n  - match: [{uri: {regex: \"(unclosed\"}}]\n    route: [{destination: {host: a}}]\n"), "spec.http[0].match[0].uri.regex"},
	{"VS empty uri match", vs("  hosts: [a]\n  http:\n  - match: [{uri: {}}]\n    route: [{destination: {host: a}}]\n"), "spec.http[0].match[0].uri"},
	{"VS empty authority prefix", vs("  hosts: [a]\n  http:\n  - match: [{authority: {prefix: \"\"}}]\n    route: [{destination: {host: a}}]\n"), "spec.http[0].match[0].authority.prefix"},
	{"VS two match kinds", vs("  hosts: [a]\n  http:\n  - match: [{uri: {exact: /a, prefix: /b}}]\n    route: [{destination: {host: a}}]\n"), "spec"},
	{"VS bad method", vs("  hosts: [a]\n  http:\n  - match: [{method: {exact: \"GE T\"}}]\n    route: [{destination: {host: a}}]\n"), "spec.http[0].match[0].method.exact"},
	{"VS negative retries", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    retries: {attempts: -1}\n"), "spec.http[0].retries.attempts"},
	{"VS bad perTryTimeout", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    retries: {attempts: 2, perTryTimeout: 0.5ms}\n"), "spec.http[0].retries.perTryTimeout"},
	{"VS bad timeout", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    timeout: 0s\n"), "spec.http[0].timeout"},
	{"VS abort status", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    fault: {abort: {httpStatus: 700, percentage: {value: 5}}}\n"), "spec.http[0].fault.abort.httpStatus"},
	{"VS fault percentage", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    fault: {delay: {fixedDelay: 1s, percentage: {value: 150}}}\n"), "spec.http[0].fault.delay.percentage"},
	{"VS mirror host", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    mirror: {host: \"*\"}\n"), "spec.http[0].mirror.host"},
	{"VS mirror percentage", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    mirror: {host: b}\n    mirrorPercentage: {value: 101}\n"), "spec.http[0].mirrorPercentage"},
	{"VS rewrite both", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    rewrite: {uri: /x, uriRegexRewrite: {match: a, rewrite: b}}\n"), "spec.http[0].rewrite"},
	{"VS directResponse status", vs("  hosts: [a]\n  http:\n  - directResponse: {status: 99}\n"), "spec.http[0].directResponse.status"},
	{"VS cors method", vs("  hosts: [a]\n  http:\n  - route: [{destination: {host: a}}]\n    corsPolicy: {allowMethods: [FETCH]}\n"), "spec.http[0].corsPolicy.allowMethods[0]"},
	{"VS star host on mesh", vs("  hosts: [\"*\"]\n" + vsRoute), "spec.hosts[0]"},
	{"VS duplicate hosts", vs("  hosts: [\"*.example.com\", a.example.com]\n  gateways: [gw]\n" + vsRoute), "spec.hosts[1]"},
	{"VS bad gateway", vs("  hosts: [a]\n  gateways: [\"ns/\"]\n" + vsRoute), "spec.gateways[0]"},
	{"VS tls needs match", vs("  hosts: [a.example.com]\n  tls:\n  - route: [{destination: {host: a.example.com}}]\n"), "spec.tls[0].match"},
	{"VS tls sni outside hosts", vs("  hosts: [a.example.com]\n  tls:\n  - match: [{sniHosts: [b.example.com]}]\n    route: [{destination: {host: a.example.com}}]\n"), "spec.tls[0].match[0].sniHosts[0]"},
	{"VS tcp bad subnet", vs("  hosts: [a]\n  tcp:\n  - match: [{destinationSubnets: [10.0.0.0/33]}]\n    route: [{destination: {host: a}}]\n"), "spec.tcp[0].match[0].destinationSubnets[0]"},
	{"VS tcp needs route", vs("  hosts: [a]\n  tcp:\n  - match: [{port: 80}]\n"), "spec.tcp[0].route"},
	{"VS delegate with gateways", vs("  gateways: [gw]\n" + vsRoute), "spec.gateways"},

	// DestinationRule.
	{"DR valid v1", dr("  host: reviews.ns.svc.cluster.local\n  trafficPolicy:\n    loadBalancer: {simple: LEAST_REQUEST}\n    connectionPool: {tcp: {maxConnections: 100, connectTimeout: 30ms}, http: {http2MaxRequests: 1000}}\n" +
		"    outlierDetection: {consecutive5xxErrors: 7, interval: 5m, baseEjectionTime: 15m, maxEjectionPercent: 50}\n    tls: {mode: ISTIO_MUTUAL}\n" +
		"    portLevelSettings: [{port: {number: 80}, loadBalancer: {consistentHash: {httpHeaderName: x-user}}}]\n" +
		"  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}\n"), ""},
	{"DR valid v1beta1", net1beta1 + "kind: DestinationRule\n" + meta + "spec: {host: \"*.example.com\", trafficPolicy: {tls: {mode: SIMPLE}}}\n", ""},
	{"DR valid v1alpha3", net1alpha + "kind: DestinationRule\n" + meta + "spec: {host: a, trafficPolicy: {tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem}}}\n", ""},
	{"DR host required", dr("  subsets: [{name: v1}]\n"), "spec.host"},
	{"DR duplicate subset", dr("  host: a\n  subsets: [{name: v1}, {name: v1}]\n"), "spec.subsets[1].name"},
	{"DR bad subset name", dr("  host: a\n  subsets: [{name: V_1}]\n"), "spec.subsets[0].name"},
	{"DR bad subset label", dr("  host: a\n  subsets: [{name: v1, labels: {version: \"v 1\"}}]\n"), "spec.subsets[0].labels[version]"},
	{"DR simple and hash", dr("  host: a\n  trafficPolicy: {loadBalancer: {simple: RANDOM, consistentHash: {useSourceIp: true}}}\n"), "spec"},
	{"DR outlier percent", dr("  host: a\n  trafficPolicy: {outlierDetection: {maxEjectionPercent: 120}}\n"), "spec.trafficPolicy.outlierDetection.maxEjectionPercent"},
	{"DR negative pool", dr("  host: a\n  trafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}}\n"), "spec.trafficPolicy.connectionPool.tcp.maxConnections"},
	{"DR mutual needs cert", dr("  host: a\n  trafficPolicy: {tls: {mode: MUTUAL}}\n"), "spec.trafficPolicy.tls.clientCertificate"},
	{"DR port level needs port", dr("  host: a\n  trafficPolicy: {portLevelSettings: [{loadBalancer: {simple: RANDOM}}]}\n"), "spec.trafficPolicy.portLevelSettings[0].port"},
	{"DR empty traffic policy", dr("  host: a\n  trafficPolicy: {}\n"), "spec.trafficPolicy"},
	{"DR maglev not prime", dr("  host: a\n  trafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true, maglev: {tableSize: 1000}}}}\n"), "maglev.tableSize"},

	// Gateway.
	{"GW valid v1", gw("  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"ns1/*.example.com\", \"*\"]\n    tls: {httpsRedirect: true}\n" +
		"  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls: {mode: SIMPLE, credentialName: a-cert}\n"), ""},
	{"GW valid v1beta1", net1beta1 + "kind: Gateway\n" + meta + "spec:\n" + gwServers, ""},
	{"GW valid v1alpha3 passthrough", net1alpha + "kind: Gateway\n" + meta + "spec:\n  servers:\n  - port: {number: 15443, name: tls, protocol: TLS}\n    hosts: [\"*.local\"]\n    tls: {mode: AUTO_PASSTHROUGH}\n", ""},
	{"GW servers required", gw("  selector: {istio: ingressgateway}\n"), "spec.servers"},
	{"GW bad port", gw("  servers:\n  - port: {number: 0, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n"), "spec.servers[0].port.number"},
	{"GW hosts required", gw("  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n"), "spec.servers[0].hosts"},
	{"GW bad namespaced host", gw("  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"Bad_NS/a.example.com\"]\n"), "spec.servers[0].hosts[0]"},
	{"GW https without tls", gw("  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n"), "spec.servers[0].tls"},
	{"GW simple without cert", gw("  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls: {mode: SIMPLE}\n"), "spec.servers[0].tls.serverCertificate"},
	{"GW mutual without CA", gw("  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls: {mode: MUTUAL, serverCertificate: /c, privateKey: /k}\n"), "spec.servers[0].tls.caCertificates"},
	{"GW duplicate port name", gw("  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n  - port: {number: 81, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n"), "spec.servers[1].port.name"},
	{"GW bad selector", gw("  selector: {\"bad key!\": x}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n"), "spec.selector"},
	{"GW tls on tcp", gw("  servers:\n  - port: {number: 31400, name: tcp, protocol: TCP}\n    hosts: [\"*\"]\n    tls: {mode: SIMPLE, credentialName: c}\n"), "spec.servers[0].tls"},

	// Sidecar.
	{"SC valid v1", sc("  workloadSelector: {labels: {app: ratings}}\n  ingress:\n  - port: {number: 9080, protocol: HTTP, name: http}\n    defaultEndpoint: 127.0.0.1:8080\n" +
		"  egress:\n  - port: {number: 3306, protocol: MYSQL, name: mysql}\n    hosts: [\"*/mysql.foo.com\"]\n  - hosts: [\"./*\", \"istio-system/*\", \"~/*\"]\n" +
		"  outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n"), ""},
	{"SC valid v1beta1", net1beta1 + "kind: Sidecar\n" + meta + "spec: {egress: [{hosts: [\"*/*\"]}]}\n", ""},
	{"SC valid v1alpha3", net1alpha + "kind: Sidecar\n" + meta + "spec: {outboundTrafficPolicy: {mode: ALLOW_ANY}}\n", ""},
	{"SC host without namespace", sc("  egress: [{hosts: [foo.com]}]\n"), "spec.egress[0].hosts[0]"},
	{"SC two catch-all egress", sc("  egress: [{hosts: [\"*/*\"]}, {hosts: [\"./*\"]}]\n"), "spec.egress[0].port"},
	{"SC ingress needs port", sc("  ingress: [{defaultEndpoint: 127.0.0.1:8080}]\n"), "spec.ingress[0].port"},
	{"SC ingress bad endpoint", sc("  ingress: [{port: {number: 80, protocol: HTTP, name: http}, defaultEndpoint: 10.0.0.1:8080}]\n"), "spec.ingress[0].defaultEndpoint"},
	{"SC empty", sc("  workloadSelector: {labels: {app: a}}\n"), "spec"},
	{"SC egress proxy needs ALLOW_ANY", sc("  outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: proxy.example.com, port: {number: 3128}}}\n"), "spec.outboundTrafficPolicy.egressProxy"},

	// PeerAuthentication.
	{"PA valid v1", pa("  selector: {matchLabels: {app: a}}\n  mtls: {mode: STRICT}\n  portLevelMtls: {\"8080\": {mode: DISABLE}}\n"), ""},
	{"PA valid v1beta1", sec1beta1 + "kind: PeerAuthentication\n" + meta + "spec: {mtls: {mode: PERMISSIVE}}\n", ""},
	{"PA port level without selector", pa("  portLevelMtls: {\"8080\": {mode: DISABLE}}\n"), "spec.portLevelMtls"},
	{"PA port zero", pa("  selector: {matchLabels: {app: a}}\n  portLevelMtls: {\"0\": {mode: DISABLE}}\n"), "spec.portLevelMtls[0]"},
	{"PA bad mode", pa("  mtls: {mode: SOMETIMES}\n"), "mode"},

	// AuthorizationPolicy.
	{"AP valid v1", ap("  selector: {matchLabels: {app: a}}\n  action: ALLOW\n  rules:\n  - from: [{source: {principals: [cluster.local/ns/default/sa/sleep], ipBlocks: [10.0.0.0/8]}}]\n" +
		"    to: [{operation: {methods: [GET], paths: [\"/info*\"], ports: [\"8080\"]}}]\n    when: [{key: \"request.headers[version]\", values: [v1]}, {key: source.ip, notValues: [1.2.3.4]}]\n"), ""},
	// RequestAuthentication, EnvoyFilter, Telemetry: one valid row per
	// version (their rules come with the features that read them).
	{"RA valid v1", sec1 + "kind: RequestAuthentication\n" + meta + "spec: {jwtRules: [{issuer: https://issuer.example}]}\n", ""},
	{"RA valid v1beta1", sec1beta1 + "kind: RequestAuthentication\n" + meta + "spec: {}\n", ""},
	{"EF valid", net1alpha + "kind: EnvoyFilter\n" + meta + "spec: {configPatches: [{applyTo: HTTP_FILTER, patch: {operation: REMOVE}}]}\n", ""},
	{"Telemetry valid v1", "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\n" + meta + "spec: {accessLogging: [{providers: [{name: envoy}]}]}\n", ""},
	{"Telemetry valid v1alpha1", "apiVersion: telemetry.istio.io/v1alpha1\nkind: Telemetry\n" + meta + "spec: {}\n", ""},
	{"AP valid v1beta1 allow nothing", sec1beta1 + "kind: AuthorizationPolicy\n" + meta + "spec: {}\n", ""},
	{"AP valid custom", ap("  action: CUSTOM\n  provider: {name: ext-authz}\n  rules: [{to: [{operation: {paths: [/admin]}}]}]\n"), ""},
	{"AP custom needs provider", ap("  action: CUSTOM\n  rules: [{}]\n"), "spec.provider.name"},
	{"AP provider with allow", ap("  action: ALLOW\n  provider: {name: x}\n  rules: [{}]\n"), "spec.provider"},
	{"AP deny without rules", ap("  action: DENY\n"), "spec.rules"},
	{"AP empty source", ap("  rules: [{from: [{source: {}}]}]\n"), "spec.rules[0].from[0].source"},
	{"AP empty operation", ap("  rules: [{to: [{operation: {}}]}]\n"), "spec.rules[0].to[0].operation"},
	{"AP empty string value", ap("  rules: [{from: [{source: {namespaces: [\"\"]}}]}]\n"), "spec.rules[0].from[0].source.namespaces[0]"},
	{"AP bad port", ap("  rules: [{to: [{operation: {ports: [\"http\"]}}]}]\n"), "spec.rules[0].to[0].operation.ports[0]"},
	{"AP bad ipBlock", ap("  rules: [{from: [{source: {ipBlocks: [\"10.0.0.0/40\"]}}]}]\n"), "spec.rules[0].from[0].source.ipBlocks[0]"},
	{"AP when without values", ap("  rules: [{when: [{key: \"request.auth.claims[iss]\"}]}]\n"), "spec.rules[0].when[0]"},
	{"AP when unknown key", ap("  rules: [{when: [{key: request.color, values: [red]}]}]\n"), "spec.rules[0].when[0].key"},
	{"AP principal with scheme", ap("  rules: [{from: [{source: {principals: [\"spiffe://cluster.local/ns/a/sa/b\"]}}]}]\n"), "spec.rules[0].from[0].source.principals[0]"},
	{"AP principal wildcard inside", ap("  rules: [{from: [{source: {notPrincipals: [\"cluster.local/*/sa/b\"]}}]}]\n"), "spec.rules[0].from[0].source.notPrincipals[0]"},
	{"AP namespace wildcard both ends", ap("  rules: [{from: [{source: {namespaces: [\"*a*\"]}}]}]\n"), "spec.rules[0].from[0].source.namespaces[0]"},
	{"AP path with query", ap("  rules: [{to: [{operation: {paths: [\"/a?b=1\"]}}]}]\n"), "spec.rules[0].to[0].operation.paths[0]"},
	{"AP path with space", ap("  rules: [{to: [{operation: {notPaths: [\"/a b\"]}}]}]\n"), "spec.rules[0].to[0].operation.notPaths[0]"},
	{"AP path not absolute", ap("  rules: [{to: [{operation: {paths: [\"api/x\"]}}]}]\n"), "spec.rules[0].to[0].operation.paths[0]"},
	{"AP path bad template", ap("  rules: [{to: [{operation: {paths: [\"/a/{**}/b\"]}}]}]\n"), "spec.rules[0].to[0].operation.paths[0]"},
	{"AP path template and suffix valid", ap("  rules: [{to: [{operation: {paths: [\"/items/{*}/detail\", \"*.json\", \"/api/*\", \"/x/{**}\"]}}]}]\n"), ""},
	{"AP selector and targetRef", ap("  selector: {matchLabels: {app: a}}\n  targetRef: {kind: Service, name: a}\n"), "spec.selector"},
}

func TestTypedTable(t *testing.T) {
	if len(rows) < 60 {
		t.Fatalf("the table has %d rows, want at least 60", len(rows))
	}
	checkRows(t, rows)
}

// checkRows types each row's manifest: a row without want must be valid,
// one with want must fail with an error naming it.
func checkRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			_, err := typed(t, r.manifest)
			switch {
			case r.want == "" && err != nil:
				t.Fatalf("want valid, got %v\n%s", err, r.manifest)
			case r.want != "" && err == nil:
				t.Fatalf("want an error naming %q, got none\n%s", r.want, r.manifest)
			case r.want != "" && !strings.Contains(err.Error(), r.want):
				t.Fatalf("want an error naming %q, got %v", r.want, err)
			}
		})
	}
}

func TestTypedErrorKinds(t *testing.T) {
	_, err := typed(t, vs("  hosts: [a]\n"))
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("invalid spec: got %v, want ErrInvalid", err)
	}
	_, err = typed(t, net1+"kind: Nope\n"+meta)
	if !errors.Is(err, config.ErrUnknownKind) {
		t.Errorf("unknown kind: got %v, want ErrUnknownKind", err)
	}
}

func TestEveryKindHasValidRow(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range append(rows, gatewayAPIRows...) {
		if r.want != "" {
			continue
		}
		c, err := typed(t, r.manifest)
		if err != nil {
			continue // reported by TestTypedTable
		}
		seen[c.GVK.APIVersion()+"/"+c.GVK.Kind] = true
	}
	for _, k := range config.Kinds() {
		s := config.SchemaFor(k)
		for _, v := range s.Versions {
			if key := s.Group + "/" + v + "/" + s.GVK().Kind; !seen[key] {
				t.Errorf("no valid example of %s", key)
			}
		}
	}
}

func TestValidateLabel(t *testing.T) {
	for _, c := range []struct {
		k, v  string
		valid bool
	}{
		{"app", "reviews", true},
		{"app.kubernetes.io/name", "x", true},
		{"security.istio.io/tlsMode", "istio", true},
		{"k", "", true},
		{"", "v", false},
		{"-app", "v", false},
		{"a/b/c", "v", false},
		{"/name", "v", false},
		{"UPPER.example.com/name", "v", false},
		{strings.Repeat("a", 64), "v", false},
		{"app", strings.Repeat("v", 64), false},
		{"app", "has space", false},
		{"app", "v1_", false},
	} {
		if got := validateLabelForTest(c.k, c.v); (got == "") != c.valid {
			t.Errorf("validateLabel(%q, %q) = %q, want valid=%v", c.k, c.v, got, c.valid)
		}
	}
}

// validateLabelForTest reaches validateLabel through metadata.labels, the
// path a user's input takes.
func validateLabelForTest(k, v string) string {
	raw := map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
		"metadata": map[string]any{"name": "x", "labels": map[string]any{k: v}},
		"spec":     map[string]any{"egress": []any{map[string]any{"hosts": []any{"*/*"}}}},
	}
	if _, err := config.Typed(raw, config.Source{}); err != nil {
		return err.Error()
	}
	return ""
}
