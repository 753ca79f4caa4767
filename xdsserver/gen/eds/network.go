package eds

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// networks is the split-horizon EDS of one proxy (istiod's
// EndpointsByNetworkFilter, sidecar mode): with network gateways in the
// mesh (meshNetworks), an endpoint in another network than the proxy's is
// reached through that network's gateways, which take its weight split
// evenly (every weight scaled by the gateways' ScaleFactor first); one in
// a network without gateways, or in the proxy's own, directly. Only
// endpoints that take Istio mTLS can go through a gateway (it routes by
// the SNI of Istio's mTLS); the others of a remote network are left out.
// A proxy without a network of its own also goes through the gateway of
// an endpoint's network. The proxy's REQUESTED_NETWORK_VIEW (a gateway's
// agent sets it) keeps only endpoints of those networks and of none.
type networks struct {
	gws   *model.NetworkGateways
	own   string
	view  []string // nil: every network
	scale uint32
	// v4, v6: the proxy's address families; a proxy of one family is
	// given only the gateways it can reach (istiod's
	// filterGatewaysByIPFamily).
	v4, v6 bool
}

func newNetworks(p *model.Proxy, gws *model.NetworkGateways) networks {
	n := networks{own: p.Network, scale: 1}
	if gws.Enabled() { // else nothing below is read
		n.gws, n.scale = gws, gws.ScaleFactor()
		n.v4, n.v6 = p.IPFamilies()
	}
	if v := p.Metadata[RequestedNetworkView]; v != "" {
		n.view = strings.Split(v, ",")
	}
	return n
}

// RequestedNetworkView is the node metadata naming the networks a proxy
// wants endpoints of (comma-separated).
const RequestedNetworkView = "REQUESTED_NETWORK_VIEW"

// visible reports whether the proxy's network view takes an endpoint of
// network nw.
func (n networks) visible(nw string) bool {
	return n.view == nil || nw == "" || slices.Contains(n.view, nw)
}

// route says how an endpoint of network nw is reached: directly, or
// through gws (none the proxy can reach: left out).
func (n networks) route(nw string) (direct bool, gws []model.NetworkGateway) {
	if n.gws == nil {
		return true, nil
	}
	gws = n.gws.For(nw)
	force := n.own == "" && nw != "" && len(gws) > 0
	if !force && (n.own == "" || nw == "" || nw == n.own || len(gws) == 0) {
		return true, nil
	}
	if n.v4 == n.v6 { // both, or unknown: every gateway
		return false, gws
	}
	reachable := make([]model.NetworkGateway, 0, len(gws))
	for _, gw := range gws {
		if a, err := netip.ParseAddr(gw.Addr); err == nil && a.Is4() == n.v4 {
			reachable = append(reachable, gw)
		}
	}
	return false, reachable
}

// weight is an endpoint's weight scaled (istiod's scaleEndpointLBWeight).
func (n networks) weight(w uint32) uint32 {
	if w == 0 {
		return n.scale
	}
	if w >= math.MaxUint32/n.scale {
		return math.MaxUint32
	}
	return w * n.scale
}

// viaGateways adds the weight of an endpoint reached through gws to
// their share of its locality.
func viaGateways(into map[model.NetworkGateway]uint32, w uint32, gws []model.NetworkGateway) {
	per := w / uint32(len(gws))
	for _, gw := range gws {
		into[gw] += per
	}
}

// gatewayEndpoints are a locality's gateway endpoints, sorted by address
// and port, as istiod makes them: Istio mTLS, no workload.
func gatewayEndpoints(weights map[model.NetworkGateway]uint32) ([]*endpointv3.LbEndpoint, []*model.Endpoint) {
	gws := make([]model.NetworkGateway, 0, len(weights))
	for gw := range weights {
		gws = append(gws, gw)
	}
	slices.SortFunc(gws, func(a, b model.NetworkGateway) int {
		if r := cmp.Compare(a.Addr, b.Addr); r != 0 {
			return r
		}
		return cmp.Compare(a.Port, b.Port)
	})
	lbs := make([]*endpointv3.LbEndpoint, 0, len(gws))
	eps := make([]*model.Endpoint, 0, len(gws))
	for _, gw := range gws {
		w := max(weights[gw], 1)
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier:      &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: gen.SocketAddress(gw.Addr, gw.Port)}},
			LoadBalancingWeight: gen.U32(w),
			Metadata:            gatewayMetadata,
		})
		eps = append(eps, &model.Endpoint{Address: gw.Addr, Port: gw.Port, Network: gw.Network, Weight: w,
			Labels: map[string]string{"topology.istio.io/network": gw.Network}}) // istiod labels a gateway endpoint with its network
	}
	return lbs, eps
}

// gatewayMetadata is every gateway endpoint's: Istio mTLS, and the
// telemetry of no workload. Shared, never altered.
var gatewayMetadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
	"envoy.transport_socket_match": {Fields: map[string]*structpb.Value{"tlsMode": structpb.NewStringValue("istio")}},
	"istio":                        {Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(";;;;")}},
}}
