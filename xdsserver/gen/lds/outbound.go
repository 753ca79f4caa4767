package lds

import (
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// outboundListeners builds one listener per service port, Istio's way:
// "0.0.0.0_PORT" for HTTP (RDS "PORT", shared by every HTTP service on
// the port), "ADDR_PORT" for TCP, TLS and auto-detected ports of services
// with an address, "0.0.0.0_PORT" for those without (an auto-detected
// one then routes HTTP by RDS "PORT", as an HTTP port does). A service
// has an address as the proxy sees it (scope.ServiceAddress): an
// allocated one only for a proxy that asks for it. They do not bind:
// virtualOutbound hands connections to them. Services that claim the
// same listener merge as istiod merges them (outEntry): HTTP and TCP
// chains together are sniffed by the HTTP inspector, TCP chains for other
// destination CIDRs are added, and of two chains with the same match the
// older service's (push.ServicesByAge) stays; TLS services without an address share
// one listener by SNI. Listeners are sorted by name. Under a Sidecar, a service port has a listener only when the
// egress listener of that port imports the service (View.ListenerImports).
func outboundListeners(v *scope.View) []*listenerv3.Listener {
	byName := map[string]*listenerv3.Listener{}
	var out []*listenerv3.Listener
	opts := newHCMOpts(v, outboundHTTP)
	passthroughChain := outboundFallthrough(v)
	dual := dualStack(v.Proxy)
	newListener := func(addr string, port uint32) (*listenerv3.Listener, bool) {
		// gen.ListenerName, built on the stack: the lookup of an existing
		// listener (every HTTP service but the first on a port) then
		// allocates nothing.
		var buf [64]byte
		key := strconv.AppendUint(append(append(buf[:0], addr...), '_'), uint64(port), 10)
		if l := byName[string(key)]; l != nil {
			return l, false
		}
		name := string(key)
		l := &listenerv3.Listener{
			Name: name, Address: gen.SocketAddress(addr, port), BindToPort: noBind,
			TrafficDirection: corev3.TrafficDirection_OUTBOUND, ContinueOnListenerFiltersTimeout: true,
		}
		if dual && addr == wildcardIPv4 {
			l.AdditionalAddresses = []*listenerv3.AdditionalAddress{{Address: gen.SocketAddress(wildcardIPv6, port)}}
		}
		byName[name] = l
		out = append(out, l)
		return l, true
	}
	merged := map[string]*outEntry{} // listener name -> its HTTP/TCP/auto chains
	// Oldest first, as istiod: of two services that conflict on a
	// listener, the older one's chain stays.
	for _, svc := range v.Push.ServicesByAge() {
		if !v.ServiceVisible(svc) {
			continue
		}
		// addr is the service's address for this proxy, bind the
		// listener address of its TCP, TLS and auto-detected ports; a
		// service whose address is a CIDR listens on 0.0.0.0 with a
		// chain for the CIDR (istiod's listenerOpts.cidr).
		addr := scope.ServiceAddress(v.Proxy, svc)
		bind := addr
		var cidrs []string
		if addr == "" {
			bind = "0.0.0.0"
			if as := scope.Addresses(v.Proxy, svc); len(as) > 0 && strings.Contains(as[0], "/") && !strings.HasPrefix(svc.Hostname, "*") {
				cidrs = as
			}
		}
		for _, p := range svc.Ports {
			if !v.ListenerImports(svc, p.Number) {
				continue // imported by another port's egress listener only
			}
			lp := scope.ListenerProtocol(p)
			if lp == scope.ListenNone {
				continue
			}
			lbind := bind
			if lp == scope.ListenHTTP {
				lbind = "0.0.0.0"
			}
			l, fresh := newListener(lbind, p.Number)
			e := merged[l.Name]
			if fresh {
				e = &outEntry{l: l, protocol: p.Protocol}
				merged[l.Name] = e
			}
			e.add(v, opts, svc, p, lp, addr, lbind, cidrs, fresh)
		}
	}
	for _, e := range merged {
		e.assemble(passthroughChain)
	}
	detect := gen.Duration(0)
	if m := v.Push.Mesh; m != nil && m.GetProtocolDetectionTimeout() != nil {
		detect = m.GetProtocolDetectionTimeout()
	}
	for _, l := range out {
		// As istiod: no listener filter timeout but where the HTTP
		// inspector sniffs, there the mesh's protocolDetectionTimeout;
		// every chain but the fallthrough bounds its TLS handshake.
		for _, fc := range l.FilterChains {
			fc.TransportSocketConnectTimeout = transportConnectTimeout
		}
		if d := l.DefaultFilterChain; d != nil && d != passthroughChain {
			d.TransportSocketConnectTimeout = transportConnectTimeout
		}
		l.ListenerFiltersTimeout = zeroDuration
		if slices.Contains(l.ListenerFilters, httpInspector()) {
			l.ListenerFiltersTimeout = detect
		}
	}
	slices.SortFunc(out, func(a, b *listenerv3.Listener) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// zeroDuration is shared by every listener and never altered.
var zeroDuration = gen.Duration(0)

// transportConnectTimeout bounds a downstream transport socket's
// handshake (slow TLS handshakes hold memory), as istiod's
// GATEWAY_TRANSPORT_SOCKET_CONNECT_TIMEOUT default; shared, never altered.
var transportConnectTimeout = gen.Duration(15 * time.Second)

// acceptPerEvent is istiod's max_connections_to_accept_per_socket_event
// (1) for the listeners that bind; shared, never altered.
var acceptPerEvent = wrapperspb.UInt32(1)

// outboundFallthrough is the default chain of an HTTP port's listener:
// what the HTTP inspector does not find to be HTTP goes where
// virtualOutbound sends unknown traffic (PassthroughCluster, or
// BlackHoleCluster under REGISTRY_ONLY).
func outboundFallthrough(v *scope.View) *listenerv3.FilterChain {
	cluster := outboundCatchAll(v)
	return &listenerv3.FilterChain{FilterChainMatch: &listenerv3.FilterChainMatch{}, Name: "PassthroughFilterChain",
		Filters: []*listenerv3.Filter{tcpProxy(cluster, cluster, gen.NodeIdleTimeout(v.Proxy))}}
}

// noBind is BindToPort false, shared by every outbound listener and never
// altered.
var noBind = gen.Bool(false)

// outboundCluster is "outbound|PORT||HOST", also Istio's stat prefix
// for the service's chains. It is built only where a chain uses it: most
// HTTP ports join a listener another service already made.
func outboundCluster(svc *model.Service, p model.Port) string {
	return gen.ClusterName(gen.Outbound, p.Number, "", svc.Hostname)
}

// tcpChains are the TCP chains of a service port on a listener matching
// cidrs, as istiod's buildSidecarOutboundTCPFilterChainOpts: the TCP
// rules of its VirtualService that apply (port, source labels, gateways,
// source namespace), in order, as l4Proxy builds them. A rule with a
// match that names no destinationSubnets takes every destination (its
// chain matches cidrs and names the VirtualService in its metadata) and
// ends the list; a rule whose matches that apply all name subnets gets a
// chain matching those subnets, and the rules after it still count.
// Unless a rule took every destination (or a subnet chain has exactly
// cidrs), the last chain goes straight to the service's cluster.
func tcpChains(v *scope.View, svc *model.Service, p model.Port, cidrs []string) []outChain {
	var out []outChain
	if c := v.VirtualServiceFor(svc.Hostname); c != nil {
		for _, r := range c.Spec.(*networking.VirtualService).GetTcp() {
			if len(r.GetRoute()) == 0 {
				continue
			}
			all := len(r.GetMatch()) == 0
			var subnets []string
			for _, m := range r.GetMatch() {
				if !l4Applies(v, m.GetPort(), m.GetGateways(), m.GetSourceLabels(), m.GetSourceNamespace(), p.Number) {
					continue
				}
				if len(m.GetDestinationSubnets()) == 0 {
					all = true
					break
				}
				subnets = append(subnets, m.GetDestinationSubnets()...)
			}
			if !all && len(subnets) == 0 {
				continue
			}
			tp := l4Proxy(v, c, r.GetRoute(), p.Number, p.Name)
			if tp == nil {
				continue
			}
			fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{tcpProxyTo(tp)}}
			if all {
				fc.Metadata = vsMetadata(c)
				return append(out, outChain{cidrs: cidrs, fc: fc})
			}
			out = append(out, outChain{cidrs: subnets, fc: fc})
			if slices.Equal(slices.Sorted(slices.Values(subnets)), slices.Sorted(slices.Values(cidrs))) {
				return out // istiod: a chain with the same match is there already
			}
		}
	}
	fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{tcpProxyTo(serviceProxy(v, svc, p.Number, outboundCluster(svc, p)))}}
	return append(out, outChain{cidrs: cidrs, fc: fc})
}

// vsMetadata is a chain's filter_metadata.istio.config naming the
// VirtualService whose route it is, as istiod's BuildConfigInfoMetadata.
func vsMetadata(c *config.Config) *corev3.Metadata {
	return gen.ConfigMetadata(gen.ConfigPath("virtual-service", c.Namespace, c.Name))
}

// l4Applies is istiod's matchTCP and matchTLS for a sidecar: the match's
// port, gateways ("mesh" among them, when any), source labels and source
// namespace.
func l4Applies(v *scope.View, mport uint32, gateways []string, labels map[string]string, ns string, port uint32) bool {
	return (mport == 0 || mport == port) && scope.LabelsMatch(labels, v.Proxy.Labels) &&
		(len(gateways) == 0 || slices.Contains(gateways, config.MeshGateway)) &&
		(ns == "" || ns == v.Proxy.Namespace)
}
