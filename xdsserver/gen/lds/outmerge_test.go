package lds

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
)

// TestOutboundListenersMerge: services sharing an outbound listener merge
// as istiod merges them: an HTTP and a TCP service on 0.0.0.0:7070 are
// told apart by the HTTP inspector (TCP the default chain); a TCP service
// whose address is a CIDR matches its CIDR, the rest falls through; a
// MySQL port does not join another protocol's listener; of two TCP
// services on one port the older one's chain stays (not the first by
// name); a TLS and an HTTP service share a port by SNI and sniffing.
func TestOutboundListenersMerge(t *testing.T) {
	pc := gentest.MustBuild(t, `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a-http, namespace: default}
spec:
  hosts: [a.example.com]
  ports: [{number: 7070, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b-tcp, namespace: default}
spec:
  hosts: [b.example.com]
  ports: [{number: 7070, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: c-cidr, namespace: default}
spec:
  hosts: [c.example.com]
  addresses: [192.168.0.0/16]
  ports: [{number: 5000, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: d-http, namespace: default}
spec:
  hosts: [d.example.com]
  ports: [{number: 3306, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: f-newer, namespace: default, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  hosts: [a-newer.example.com]
  ports: [{number: 6000, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: g-older, namespace: default, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  hosts: [z-older.example.com]
  ports: [{number: 6000, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: h-tls, namespace: default}
spec:
  hosts: [tls.example.com]
  ports: [{number: 7443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: i-http, namespace: default}
spec:
  hosts: [web.example.com]
  ports: [{number: 7443, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: e-mysql, namespace: default}
spec:
  hosts: [e.example.com]
  ports: [{number: 3306, name: mysql, protocol: MYSQL}]
  resolution: DNS
`)
	p := gentest.Node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", nil)
	ls := gentest.ByName[*listenerv3.Listener](gentest.Run(t, Generate, gen.Input{Push: pc, Proxy: p}))
	cluster := func(fc *listenerv3.FilterChain) string {
		tp := &tcpproxyv3.TcpProxy{}
		if fc == nil || len(fc.GetFilters()) == 0 || fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(tp) != nil {
			return ""
		}
		return tp.GetCluster()
	}

	l := ls["0.0.0.0_7070"]
	if len(l.GetListenerFilters()) != 1 || l.GetListenerFilters()[0].GetName() != "envoy.filters.listener.http_inspector" {
		t.Errorf("7070: listener filters %v, want the HTTP inspector", l.GetListenerFilters())
	}
	if len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilterChainMatch().GetApplicationProtocols()) == 0 {
		t.Errorf("7070: chains %v, want the HTTP chain", l.GetFilterChains())
	}
	if got := cluster(l.GetDefaultFilterChain()); got != "outbound|7070||b.example.com" {
		t.Errorf("7070: default chain to %q, want the TCP service", got)
	}

	l = ls["0.0.0.0_5000"]
	if len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilterChainMatch().GetPrefixRanges()) != 1 ||
		l.GetFilterChains()[0].GetFilterChainMatch().GetPrefixRanges()[0].GetAddressPrefix() != "192.168.0.0" {
		t.Errorf("5000: chains %v, want one for 192.168.0.0/16", l.GetFilterChains())
	}
	if got := cluster(l.GetDefaultFilterChain()); got != gen.PassthroughCluster {
		t.Errorf("5000: default chain to %q, want the passthrough", got)
	}

	if l := ls["0.0.0.0_6000"]; len(l.GetFilterChains()) != 1 || cluster(l.GetFilterChains()[0]) != "outbound|6000||z-older.example.com" {
		t.Errorf("6000: %v, want the older service's chain only (istiod's order)", l.GetFilterChains())
	}

	l = ls["0.0.0.0_7443"]
	var names []string
	for _, f := range l.GetListenerFilters() {
		names = append(names, f.GetName())
	}
	if len(names) != 2 || names[0] != "envoy.filters.listener.tls_inspector" || names[1] != "envoy.filters.listener.http_inspector" || len(l.GetFilterChains()) != 2 {
		t.Errorf("7443 (TLS and HTTP): inspectors %v, %d chains, want both inspectors, the SNI and the HTTP chain", names, len(l.GetFilterChains()))
	}

	l = ls["0.0.0.0_3306"]
	if len(l.GetFilterChains()) != 1 || cluster(l.GetDefaultFilterChain()) == "outbound|3306||e.example.com" {
		t.Errorf("3306: MySQL merged into the HTTP listener: %v", l)
	}
}

// TestOutboundDefaultChainByAge: an HTTP service with an address and an
// auto-detected one without share 0.0.0.0:9080 (the HTTP one's port is
// always on the wildcard). As istiod, the older one decides: the auto
// service first gives its TCP chain as the default chain; the HTTP one
// first makes the entry sniffed, the auto service then adds nothing and
// the default is the fallthrough. (make test saw istiod's fallthrough
// when the parity harness created gen/sidecar-http's two ServiceEntries
// a second apart.)
func TestOutboundDefaultChainByAge(t *testing.T) {
	for _, c := range []struct {
		httpCreated, autoCreated string
		want                     string
	}{
		{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", gen.PassthroughCluster},
		{"2026-01-01T00:00:02Z", "2026-01-01T00:00:01Z", "outbound|9080||ratings.other.svc.cluster.local"},
		// The same second: by hostname, ratings before reviews.
		{"2026-01-01T00:00:01Z", "2026-01-01T00:00:01Z", "outbound|9080||ratings.other.svc.cluster.local"},
	} {
		pc, err := gentest.Build([]byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default, creationTimestamp: "` + c.httpCreated + `"}
spec:
  hosts: [reviews.default.svc.cluster.local]
  addresses: [10.96.0.10]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: other, creationTimestamp: "` + c.autoCreated + `"}
spec:
  hosts: [ratings.other.svc.cluster.local]
  ports: [{number: 9080, name: http-web}]
  resolution: STATIC
  endpoints: [{address: 10.0.1.1}]
`))
		if err != nil {
			t.Fatal(err)
		}
		p := gentest.Node(t, "sidecar~10.10.9.11~a.default~default.svc.cluster.local", nil)
		res, err := Generate(gen.Input{Push: pc, Proxy: p})
		if err != nil {
			t.Fatal(err)
		}
		gentest.Validate(t, res)
		var l *listenerv3.Listener
		for _, r := range res {
			if r.Name == "0.0.0.0_9080" {
				l = r.Resource.(*listenerv3.Listener)
			}
		}
		tp := &tcpproxyv3.TcpProxy{}
		if l == nil || len(l.GetDefaultFilterChain().GetFilters()) == 0 || l.GetDefaultFilterChain().GetFilters()[0].GetTypedConfig().UnmarshalTo(tp) != nil {
			t.Fatalf("HTTP created %s, auto %s: no 0.0.0.0_9080 with a tcp_proxy default chain: %v", c.httpCreated, c.autoCreated, l)
		}
		if tp.GetCluster() != c.want {
			t.Errorf("HTTP created %s, auto %s: default chain to %q, want %q", c.httpCreated, c.autoCreated, tp.GetCluster(), c.want)
		}
	}
}
