package lds

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// gatewayListeners builds a router's listeners: "0.0.0.0_PORT" per
// server port, bound. HTTP servers share one chain (RDS "http.PORT");
// HTTPS servers terminated here get a chain per server matched by SNI on
// its hosts, with a DownstreamTlsContext (SDS secret credentialName over
// ADS, or certificate files; a server whose credential cannot be served
// to this gateway is left out) and RDS "https.PORT.NAME.GW.NS"; TLS
// passthrough servers get a tcp_proxy chain per VirtualService TLS route
// (by SNI); AUTO_PASSTHROUGH servers a chain per service port and subset
// by the SNI of Istio's mTLS (autoPassthroughChains); TCP servers a
// tcp_proxy to the first bound TCP route. A chain whose match another
// chain already has is dropped (first wins).
func gatewayListeners(v *scope.View) []*listenerv3.Listener {
	ports, byPort := scope.GatewayServers(v.Push, v.Proxy)
	// Only TLS passthrough and TCP servers read VirtualServices here; the
	// index over all of them is built when the first such server needs it.
	var vsByGW map[string][]*config.Config
	boundTo := func(gateway string) []*config.Config {
		if vsByGW == nil {
			vsByGW = virtualServicesByGateway(v)
		}
		return vsByGW[gateway]
	}
	// Security policies selecting the gateway (CUSTOM, JWT, RBAC) before
	// its HTTP filters and before tcp_proxy (authn.go).
	var gwHTTP []*hcmv3.HttpFilter
	gwSec, gwTCP := securityFilters(v, true)
	if len(gwSec)+len(gwTCP) > 0 {
		gwHTTP = append(gwSec, sidecarHTTPFilters...)
	}
	opts := newHCMOpts(v, gatewayHTTP)
	httpFilter := func(stat, route string) *listenerv3.Filter {
		if gwHTTP == nil {
			return rdsFilter(opts, stat, route)
		}
		h := hcmRDS(stat, route, gwHTTP...)
		opts.apply(h)
		return hcmFilter(h)
	}
	var out []*listenerv3.Listener
	tlsSockets := map[tlsKey]*corev3.TransportSocket{}
	for _, port := range ports {
		servers := byPort[port]
		l := &listenerv3.Listener{Name: gen.ListenerName("0.0.0.0", port), Address: gen.SocketAddress("0.0.0.0", port), TrafficDirection: corev3.TrafficDirection_OUTBOUND}
		// claim reports whether no chain has matched names yet; a chain
		// is built only then: the thousand HTTP servers of a port share
		// the first one's chain.
		seen := map[string]bool{}
		claim := func(names []string) bool {
			key := strings.Join(names, ",")
			if seen[key] {
				return false
			}
			seen[key] = true
			return true
		}
		// addL4 adds the TCP chains whose match is not taken, behind the
		// gateway's network security filters.
		addL4 := func(fcs []*listenerv3.FilterChain) {
			for _, fc := range fcs {
				if claim(fc.GetFilterChainMatch().GetServerNames()) {
					if gwTCP != nil {
						fc.Filters = append(slices.Clip(gwTCP), fc.Filters...)
					}
					l.FilterChains = append(l.FilterChains, fc)
				}
			}
		}
		tls := false
		sniSeen := map[string]bool{} // the SNI hosts of the port's passthrough chains
		stat := "outbound_0.0.0.0_" + gen.PortName(port)
		for _, s := range servers {
			switch {
			case strings.HasPrefix(s.RouteName, "http."):
				if claim(nil) {
					l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Filters: []*listenerv3.Filter{httpFilter(stat, s.RouteName)}})
				}
			case s.RouteName != "":
				if s.CredentialProblem(v.Push.Credentials, v.Proxy) != nil { // scope/credential.go
					// Left out rather than waiting for a secret that cannot
					// come (configz says why), which would keep the whole
					// listener from serving: a credential that is missing or
					// unusable, or any credential for a gateway that did not
					// authenticate (SDS serves it none).
					continue
				}
				tls = true
				names := serverNames(s.Server.GetHosts())
				if !claim(names) {
					continue
				}
				if l.FilterChains == nil {
					l.FilterChains = make([]*listenerv3.FilterChain, 0, len(servers))
				}
				// The chain, its match and its filter list in one block.
				b := &struct {
					fc      listenerv3.FilterChain
					m       listenerv3.FilterChainMatch
					filters [1]*listenerv3.Filter
				}{}
				b.m.ServerNames = names
				b.filters[0] = httpFilter(stat, s.RouteName)
				b.fc.FilterChainMatch, b.fc.TransportSocket, b.fc.Filters = &b.m, downstreamTLS(tlsSockets, v.Proxy, v.Push.Mesh, s.Server.GetTls()), b.filters[:]
				l.FilterChains = append(l.FilterChains, &b.fc)
			case s.Server.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH:
				tls = true
				addL4(autoPassthroughChains(v, s))
			default:
				tls = tls || s.Server.GetTls() != nil
				addL4(l4Chains(v, s, boundTo(s.Gateway), sniSeen, tlsSockets))
			}
		}
		if len(l.FilterChains) == 0 {
			continue
		}
		if tls {
			l.ListenerFilters = []*listenerv3.ListenerFilter{tlsInspector()}
		}
		for _, fc := range l.FilterChains {
			fc.TransportSocketConnectTimeout = transportConnectTimeout
		}
		l.MaxConnectionsToAcceptPerSocketEvent = acceptPerEvent
		out = append(out, l)
	}
	return out
}

// virtualServicesByGateway indexes the VirtualServices by the gateways
// ("ns/name") they bind to, oldest first (push.ConfigsByAge).
func virtualServicesByGateway(v *scope.View) map[string][]*config.Config {
	out := map[string][]*config.Config{}
	for _, c := range v.VirtualServicesByAge() {
		for _, gw := range c.Spec.(*networking.VirtualService).GetGateways() {
			if gw != config.MeshGateway {
				gw = config.ResolveGatewayName(gw, c.Namespace)
				out[gw] = append(out[gw], c)
			}
		}
	}
	return out
}

// serverNames are a server's hosts without their namespace part; nil
// when one is "*" (any SNI).
func serverNames(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if i := strings.IndexByte(h, '/'); i >= 0 {
			h = h[i+1:]
		}
		if h == "*" {
			return nil
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return out
}

// gatewayALPN is what a gateway's TLS servers offer; never altered.
var gatewayALPN = []string{"h2", "http/1.1"}

// tlsKey is every field of a server's TLS settings downstreamTLS reads.
type tlsKey struct {
	mutual, istioMutual   bool
	optional              bool // OPTIONAL_MUTUAL: a client certificate checked when given
	sans                  string
	cred, cert, key, cacs string // cred, cert, key: comma-joined lists
	caCred                string
	minV, maxV            networking.ServerTLSSettings_TLSProtocol
	ciphers               string
	spki, hash, crl       string
	insecure              bool
}

// clientValidation is how a server checks a client's certificate beyond
// its CA, as istiod's ApplyToCommonTLSContext and
// ApplyCredentialSDSToServerCommonTLSContext: its subjectAltNames
// (typed: URI for a spiffe:// name, else DNS, each exact), the
// certificate pins (verifyCertificateSpki, verifyCertificateHash), the
// CRL file (caCrl; a credential's CRL comes with its secret), and
// insecureSkipVerify (any chain accepted; the other checks still hold).
// istiod pins only for a credentialName server; we pin wherever they are
// set, so a pinned server never takes another certificate.
func clientValidation(t *networking.ServerTLSSettings, crl bool) *tlsv3.CertificateValidationContext {
	vc := &tlsv3.CertificateValidationContext{
		VerifyCertificateSpki: t.GetVerifyCertificateSpki(), VerifyCertificateHash: t.GetVerifyCertificateHash(),
	}
	for _, n := range t.GetSubjectAltNames() {
		typ := tlsv3.SubjectAltNameMatcher_DNS
		if strings.HasPrefix(n, "spiffe://") {
			typ = tlsv3.SubjectAltNameMatcher_URI
		}
		vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{SanType: typ,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}}})
	}
	if crl && t.GetCaCrl() != "" {
		vc.Crl = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: t.GetCaCrl()}}
	}
	if t.GetInsecureSkipVerify().GetValue() {
		vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
	}
	return vc
}

// downstreamTLS is the transport socket of an HTTPS server terminated at
// the gateway. Servers with the same settings (a thousand ISTIO_MUTUAL
// ones in Istio's gateway benchmark) share one socket from memo, never
// altered, as chains already share filters. An ISTIO_MUTUAL server
// presents the gateway's own workload certificate and requires a client
// certificate from the mesh root (SDS "default" and "ROOTCA" where the
// proxy's workload secrets come from), checking subjectAltNames when
// given, as istiod.
func downstreamTLS(memo map[tlsKey]*corev3.TransportSocket, p *model.Proxy, mesh *meshconfig.MeshConfig, t *networking.ServerTLSSettings) *corev3.TransportSocket {
	creds := scope.CredentialNames(t)
	type pair struct{ cert, key string }
	files := []pair{{t.GetServerCertificate(), t.GetPrivateKey()}}
	if tc := t.GetTlsCertificates(); len(tc) > 0 {
		files = files[:0]
		for _, c := range tc {
			files = append(files, pair{c.GetServerCertificate(), c.GetPrivateKey()})
		}
	}
	var certs, keys []string
	for _, f := range files {
		certs, keys = append(certs, f.cert), append(keys, f.key)
	}
	k := tlsKey{mutual: t.GetMode() == networking.ServerTLSSettings_MUTUAL, optional: t.GetMode() == networking.ServerTLSSettings_OPTIONAL_MUTUAL, cred: strings.Join(creds, ","),
		caCred: t.GetCaCertCredentialName(), cert: strings.Join(certs, ","), key: strings.Join(keys, ","), cacs: t.GetCaCertificates(),
		istioMutual: t.GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL, sans: strings.Join(t.GetSubjectAltNames(), ","),
		minV: t.GetMinProtocolVersion(), maxV: t.GetMaxProtocolVersion(), ciphers: strings.Join(t.GetCipherSuites(), ","),
		spki: strings.Join(t.GetVerifyCertificateSpki(), ","), hash: strings.Join(t.GetVerifyCertificateHash(), ","), crl: t.GetCaCrl(),
		insecure: t.GetInsecureSkipVerify().GetValue()}
	if ts := memo[k]; ts != nil {
		return ts
	}
	// The context is marshalled into its Any at once, so the shared
	// constant parts (ALPN, the ADS config source) are safe to reference.
	common := &tlsv3.CommonTlsContext{AlpnProtocols: gatewayALPN}
	if k.istioMutual {
		sds := gen.WorkloadSDS(p)
		vc := clientValidation(t, true)
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: gen.SDSDefault, SdsConfig: sds}}
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         vc,
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: gen.SDSRootCA, SdsConfig: sds},
		}}
		ts := &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(
			&tlsv3.DownstreamTlsContext{CommonTlsContext: common, RequireClientCertificate: gen.Bool(true)})}}
		memo[k] = ts
		return ts
	}
	// An Istio agent serves certificate files over its SDS (with
	// rotation), as istiod has its proxy read them; another Envoy reads
	// the files itself.
	var agentFiles *corev3.ConfigSource
	if p.IstioVersion != "" && k.cred == "" {
		agentFiles = gen.WorkloadSDS(p)
		agentFiles.InitialFetchTimeout = nil // as istiod's file secrets
	}
	// Several certificates (credentialNames, tlsCertificates: an RSA and
	// an ECDSA one, say) are offered together; Envoy picks by the
	// client's signature algorithms.
	switch {
	case len(creds) > 0:
		for _, c := range creds {
			common.TlsCertificateSdsSecretConfigs = append(common.TlsCertificateSdsSecretConfigs, &tlsv3.SdsSecretConfig{Name: c, SdsConfig: gen.CredentialSDS()})
		}
	case agentFiles != nil:
		for _, f := range files {
			if f.cert != "" {
				common.TlsCertificateSdsSecretConfigs = append(common.TlsCertificateSdsSecretConfigs, &tlsv3.SdsSecretConfig{Name: "file-cert:" + f.cert + "~" + f.key, SdsConfig: agentFiles})
			}
		}
	default:
		for _, f := range files {
			if f.cert != "" {
				common.TlsCertificates = append(common.TlsCertificates, &tlsv3.TlsCertificate{
					CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: f.cert}},
					PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: f.key}},
				})
			}
		}
	}
	common.TlsParams = serverTLSParams(mesh.GetTlsDefaults(), t)
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: common}
	ctx.RequireClientCertificate = gen.Bool(k.mutual) // false written out, as istiod
	// A client certificate is checked against the CA and then against
	// clientValidation's checks: before, a MUTUAL server took any
	// certificate its CA signed whatever its subjectAltNames and pins.
	if k.mutual || k.optional {
		switch {
		case len(creds) > 0:
			// The CA of caCertCredentialName, else of the first credential
			// (istiod's rule), under our "-cacert" SDS name.
			ca := creds[0]
			if k.caCred != "" {
				ca = k.caCred
			}
			common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         clientValidation(t, false),
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: ca + "-cacert", SdsConfig: gen.CredentialSDS()},
			}}
		case k.cacs != "" && agentFiles != nil:
			common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         clientValidation(t, true),
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "file-root:" + k.cacs, SdsConfig: agentFiles},
			}}
		case k.cacs != "":
			vc := clientValidation(t, true)
			vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: k.cacs}}
			common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		}
	}
	ts := &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: gen.MustAny(ctx)}}
	memo[k] = ts
	return ts
}

// l4Chains are the chains of a TLS passthrough or TCP server, as
// istiod's createGatewayTCPFilterChainOpts, from the VirtualServices
// bound to the server's gateway whose hosts the server selects (oldest
// first). Passthrough: a chain per TLS rule match that applies (port,
// gateways), matched by its SNI hosts, unless one of them already has a
// chain on this listener (sniSeen). TCP, or TLS terminated here: one
// chain, the first TCP rule that applies (terminated: matched by the
// server's hosts, with its TLS).
func l4Chains(v *scope.View, s scope.GatewayServer, vss []*config.Config, sniSeen map[string]bool, sockets map[tlsKey]*corev3.TransportSocket) []*listenerv3.FilterChain {
	port := s.Server.GetPort().GetNumber()
	applies := func(ns string, mport uint32, gateways []string) bool {
		return (mport == 0 || mport == port) && (len(gateways) == 0 || config.GatewayNamed(gateways, ns, s.Gateway))
	}
	passthrough := s.Server.GetTls() != nil && scope.IsPassthrough(s.Server.GetTls())
	var out []*listenerv3.FilterChain
	for _, c := range vss {
		vs := c.Spec.(*networking.VirtualService)
		if !slices.ContainsFunc(vs.GetHosts(), func(h string) bool { return serverSelects(s, c.Namespace, v.FQDN(h, c.Namespace)) }) {
			continue
		}
		if !passthrough {
			for _, r := range vs.GetTcp() {
				if len(r.GetRoute()) == 0 || len(r.GetMatch()) > 0 && !slices.ContainsFunc(r.GetMatch(), func(m *networking.L4MatchAttributes) bool {
					return applies(c.Namespace, m.GetPort(), m.GetGateways())
				}) {
					continue
				}
				tp := l4Proxy(v, c, r.GetRoute(), port, s.Server.GetPort().GetName())
				if tp == nil {
					continue
				}
				fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{tcpProxyTo(tp)}}
				if t := s.Server.GetTls(); t != nil {
					fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: serverNames(s.Server.GetHosts())}
					fc.TransportSocket = downstreamTLS(sockets, v.Proxy, v.Push.Mesh, t)
				}
				return []*listenerv3.FilterChain{fc}
			}
			continue
		}
		for _, r := range vs.GetTls() {
			if len(r.GetRoute()) == 0 {
				continue
			}
			for _, m := range r.GetMatch() {
				if !applies(c.Namespace, m.GetPort(), m.GetGateways()) || slices.ContainsFunc(m.GetSniHosts(), func(h string) bool { return sniSeen[h] }) {
					continue // istiod: "duplicate SNI host names", the rule skipped
				}
				for _, h := range m.GetSniHosts() {
					sniSeen[h] = true
				}
				tp := l4Proxy(v, c, r.GetRoute(), port, s.Server.GetPort().GetName())
				if tp == nil {
					continue
				}
				out = append(out, &listenerv3.FilterChain{
					FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: m.GetSniHosts()},
					Filters:          []*listenerv3.Filter{tcpProxyTo(tp)},
				})
			}
		}
	}
	return out
}

// autoPassthroughChains are an AUTO_PASSTHROUGH server's chains, as
// istiod's builtAutoPassthroughFilterChains: for every port (but UDP) of
// every service of the mesh (not mesh-external) whose host the server's
// hosts cover (their namespaces not read), a chain matching the SNI
// Istio's mTLS gives that port (gen.SNIClusterName) and Istio's mTLS
// ALPNs, forwarding the connection as it came (the client's mTLS ends at
// the workload) to the cluster of that name; the same per DestinationRule
// subset. VirtualServices play no part.
func autoPassthroughChains(router *scope.View, s scope.GatewayServer) []*listenerv3.FilterChain {
	v := scope.New(router.Push, router.Proxy) // a router's view lists no services (scope.NewForLookups)
	var out []*listenerv3.FilterChain
	pat := v.Push.Mesh.GetOutboundClusterStatName()
	for _, svc := range v.Services {
		if svc.MeshExternal || !slices.ContainsFunc(s.Server.GetHosts(), func(h string) bool {
			if _, after, ok := strings.Cut(h, "/"); ok {
				h = after
			}
			return scope.HostMatch(h, svc.Hostname)
		}) {
			continue
		}
		var subsets []*networking.Subset
		if v.HasDestinationRules() {
			subsets = v.DestinationRule(svc).GetSubsets()
		}
		for _, p := range svc.Ports {
			if p.Protocol == model.UDP {
				continue
			}
			for i := -1; i < len(subsets); i++ {
				subset := ""
				if i >= 0 {
					subset = subsets[i].GetName()
				}
				cluster := gen.SNIClusterName(p.Number, subset, svc.Hostname)
				stat := cluster
				if pat != "" {
					stat = gen.StatName(pat, svc.Hostname, svc.Namespace, svc.Source.Kind == "", subset, p.Number, p.Name, 0)
				}
				tp := withPool(v, &tcpproxyv3.TcpProxy{StatPrefix: stat, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}, svc, subset)
				out = append(out, &listenerv3.FilterChain{
					FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{cluster}, ApplicationProtocols: istioMTLSALPNs},
					Filters:          []*listenerv3.Filter{tcpProxyTo(tp)},
				})
			}
		}
	}
	return out
}

func serverSelects(s scope.GatewayServer, vsNS, host string) bool {
	for _, sh := range s.Server.GetHosts() {
		if scope.ServerHostMatch(sh, s.Namespace, vsNS, host) {
			return true
		}
	}
	return false
}

// serverTLSParams are a SIMPLE or MUTUAL server's TLS parameters, as
// istiod's applyDownstreamTLSDefaults then applyServerTLSSettings: the
// mesh's tlsDefaults (ECDH curves, cipher suites, minimum version), each
// overridden by the server's own version range and cipher suites
// (duplicates dropped); nil when neither sets any.
func serverTLSParams(defaults *meshconfig.MeshConfig_TLSConfig, t *networking.ServerTLSSettings) *tlsv3.TlsParameters {
	var tp *tlsv3.TlsParameters
	params := func() *tlsv3.TlsParameters {
		if tp == nil {
			tp = &tlsv3.TlsParameters{}
		}
		return tp
	}
	if defaults != nil {
		if c := defaults.GetEcdhCurves(); len(c) > 0 {
			params().EcdhCurves = c
		}
		if c := defaults.GetCipherSuites(); len(c) > 0 {
			params().CipherSuites = c
		}
		switch defaults.GetMinProtocolVersion() { // istiod's GetMinTLSVersion
		case meshconfig.MeshConfig_TLSConfig_TLSV1_2:
			params().TlsMinimumProtocolVersion = tlsv3.TlsParameters_TLSv1_2
		case meshconfig.MeshConfig_TLSConfig_TLSV1_3:
			params().TlsMinimumProtocolVersion = tlsv3.TlsParameters_TLSv1_3
		}
	}
	// The server's enum is Envoy's, value for value (istiod's
	// convertTLSProtocol).
	if v := t.GetMinProtocolVersion(); v != networking.ServerTLSSettings_TLS_AUTO {
		params().TlsMinimumProtocolVersion = tlsv3.TlsParameters_TlsProtocol(v)
	}
	if c := t.GetCipherSuites(); len(c) > 0 {
		var suites []string
		for _, s := range c {
			if !slices.Contains(suites, s) {
				suites = append(suites, s)
			}
		}
		params().CipherSuites = suites
	}
	if v := t.GetMaxProtocolVersion(); v != networking.ServerTLSSettings_TLS_AUTO {
		params().TlsMaximumProtocolVersion = tlsv3.TlsParameters_TlsProtocol(v)
	}
	return tp
}
