package lds

import (
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// httpClass is where an HTTP connection manager sits; Istio's settings
// differ by it.
type httpClass uint8

const (
	outboundHTTP httpClass = iota // a sidecar's outbound listeners
	inboundHTTP                   // a sidecar's inbound chains
	gatewayHTTP                   // a gateway's servers
)

// hcmOpts are the inputs of Istio's connection manager settings (istiod's
// buildHTTPConnectionManager): the listener class, the mesh's path
// normalization and, for gateways, the gateway topology of the proxy's
// ProxyConfig (its PROXY_CONFIG metadata, else the mesh's defaultConfig).
// It is comparable: it keys the memo of the constant part of rdsFilter.
type hcmOpts struct {
	class       httpClass
	norm        meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType
	trustedHops uint32
	xfcc        hcmv3.HttpConnectionManager_ForwardClientCertDetails
	http2       bool                 // inbound HTTP/2 port: http2_protocol_options
	idle        *durationpb.Duration // the node's IDLE_TIMEOUT (nil: none)
	// istio: istio-proxy's telemetry (telemetry.go); tel keys its
	// resolved tracing, access logs and stats filters (telemetryMemo).
	istio bool
	tel   string
	// ph: the proxy's proxyHeaders (gen.ProxyHeadersOf).
	ph model.ProxyHeaders
}

// newHCMOpts reads the settings of class from the snapshot and proxy.
func newHCMOpts(v *scope.View, class httpClass) hcmOpts {
	o := hcmOpts{class: class, idle: gen.NodeIdleTimeout(v.Proxy), ph: gen.ProxyHeadersOf(v.Proxy, v.Push.Mesh)}
	if m := v.Push.Mesh; m != nil {
		o.norm = m.GetPathNormalization().GetNormalization()
	}
	if class == gatewayHTTP {
		o.xfcc = hcmv3.HttpConnectionManager_SANITIZE_SET
		topo := v.Proxy.GatewayTopology
		if topo == nil && v.Push.Mesh != nil {
			if t := v.Push.Mesh.GetDefaultConfig().GetGatewayTopology(); t != nil {
				topo = &model.GatewayTopology{NumTrustedProxies: t.GetNumTrustedProxies(), ForwardClientCertDetails: int32(t.GetForwardClientCertDetails())}
			}
		}
		if topo != nil {
			o.trustedHops = topo.NumTrustedProxies
			if x, ok := meshXFCC[meshv1alpha1.ForwardClientCertDetails(topo.ForwardClientCertDetails)]; ok {
				o.xfcc = x
			}
		}
	} else if class == inboundHTTP {
		// Gateways take XFCC from their topology; inbound from
		// proxyHeaders.forwardedClientCert (istiod's GetProxyHeaders).
		o.xfcc = hcmv3.HttpConnectionManager_APPEND_FORWARD
		if x, ok := meshXFCC[meshv1alpha1.ForwardClientCertDetails(o.ph.ForwardedClientCert)]; ok {
			o.xfcc = x
		}
	}
	return withTelemetry(o, v)
}

// meshXFCC maps the mesh config's forwardClientCertDetails to Envoy's
// (UNDEFINED is absent: the class's default stays).
var meshXFCC = map[meshv1alpha1.ForwardClientCertDetails]hcmv3.HttpConnectionManager_ForwardClientCertDetails{
	meshv1alpha1.ForwardClientCertDetails_SANITIZE:            hcmv3.HttpConnectionManager_SANITIZE,
	meshv1alpha1.ForwardClientCertDetails_FORWARD_ONLY:        hcmv3.HttpConnectionManager_FORWARD_ONLY,
	meshv1alpha1.ForwardClientCertDetails_APPEND_FORWARD:      hcmv3.HttpConnectionManager_APPEND_FORWARD,
	meshv1alpha1.ForwardClientCertDetails_SANITIZE_SET:        hcmv3.HttpConnectionManager_SANITIZE_SET,
	meshv1alpha1.ForwardClientCertDetails_ALWAYS_FORWARD_ONLY: hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY,
}

// apply sets Istio's connection manager settings on h:
//   - path normalization before routing and RBAC, from the mesh's
//     pathNormalization (NONE, BASE = the default, MERGE_SLASHES,
//     DECODE_AND_MERGE_SLASHES); escaped slashes kept unless decoded;
//   - use_remote_address on gateways only, which then trust as many
//     X-Forwarded-For hops as gatewayTopology.numTrustedProxies says
//     (0: the client's own address) and sanitize x-forwarded-client-cert
//     unless forwardClientCertDetails says otherwise; sidecar inbound
//     appends the peer's certificate details to it;
//   - WebSocket upgrades allowed; stream_idle_timeout 0 (long streams are
//     not reset after Envoy's default 5 minutes); 100-continue proxied;
//   - server name "istio-envoy" on inbound and gateway listeners.
func (o hcmOpts) apply(h *hcmv3.HttpConnectionManager) {
	h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
	switch o.norm {
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE:
		h.NormalizePath = gen.Bool(false)
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES:
		h.NormalizePath, h.MergeSlashes = gen.Bool(true), true
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES:
		h.NormalizePath, h.MergeSlashes = gen.Bool(true), true
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD
	default: // BASE, DEFAULT
		h.NormalizePath = gen.Bool(true)
	}
	h.UseRemoteAddress = gen.Bool(o.class == gatewayHTTP)
	h.UpgradeConfigs = websocketUpgrade
	h.StreamIdleTimeout = gen.Duration(0)
	if o.idle != nil { // the node's IDLE_TIMEOUT, as istiod's buildHTTPConnectionManager
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: o.idle}
	}
	h.Proxy_100Continue = true // istiod's ENABLE_100_CONTINUE_HEADERS default
	// proxyHeaders (istiod's GetProxyHeadersFromProxyConfig): the server
	// header ("istio-envoy" but outbound, where Envoy's own default
	// stays), request IDs, X-Forwarded-Port, HTTP/1 header case.
	if o.class != outboundHTTP {
		h.ServerName = istioServerName
	}
	switch {
	case o.ph.ServerDisabled:
		h.ServerName, h.ServerHeaderTransformation = "", hcmv3.HttpConnectionManager_PASS_THROUGH
	case o.ph.ServerValue != "":
		h.ServerName = o.ph.ServerValue
	}
	if o.ph.NoRequestID {
		h.GenerateRequestId = gen.Bool(false)
	}
	h.AppendXForwardedPort = o.ph.XForwardedPort
	switch o.class {
	case gatewayHTTP:
		h.XffNumTrustedHops = o.trustedHops
		h.ForwardClientCertDetails = o.xfcc
		if o.xfcc == hcmv3.HttpConnectionManager_APPEND_FORWARD || o.xfcc == hcmv3.HttpConnectionManager_SANITIZE_SET {
			h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: gen.Bool(true), Cert: true, Dns: true, Uri: true}
		}
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{}
	case inboundHTTP:
		h.ForwardClientCertDetails = o.xfcc
		h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: gen.Bool(true), Dns: true, Uri: true}
		if d := o.ph; d.HasCertDetails {
			h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: gen.Bool(d.Subject), Dns: d.DNS, Uri: d.URI, Cert: d.Cert, Chain: d.Chain}
		}
		if o.http2 {
			h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{}
		}
	}
	if o.ph.PreserveHTTP1Case {
		if h.HttpProtocolOptions == nil {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{}
		}
		h.HttpProtocolOptions.HeaderKeyFormat = gen.PreserveCaseHeaderFormat
	}
	o.applyTelemetry(h)
	if o.ph.NoDebugHeaders {
		filters := slices.Clone(h.HttpFilters) // the list may be shared
		for i, f := range filters {
			if f == sharedRouter {
				filters[i] = quietRouter
			}
		}
		h.HttpFilters = filters
	}
}

// istioServerName is the server header istiod's inbound and gateway
// listeners set.
const istioServerName = "istio-envoy"

// websocketUpgrade is shared by every connection manager and never
// altered (outputs are only marshalled).
var websocketUpgrade = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}

// rdsRest memoizes, per settings and filter list, the marshalled
// connection manager without its stat prefix and route specifier: the
// constant middle of rdsFilter's bytes. The settings take few values (a
// mesh has one normalization, gateways few topologies), so the memo stays
// small.
var rdsRest sync.Map // hcmOpts -> []byte

// restBytes is the marshalled connection manager of o with the shared
// sidecar filters, without stat prefix and route specifier.
func (o hcmOpts) restBytes() []byte {
	if b, ok := rdsRest.Load(o); ok {
		return b.([]byte)
	}
	h := &hcmv3.HttpConnectionManager{HttpFilters: sidecarHTTPFilters}
	o.apply(h)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		panic("lds: marshal connection manager settings: " + err.Error())
	}
	rdsRest.Store(o, b)
	return b
}
