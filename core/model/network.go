package model

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// NetworkGateway is a gateway into a network: the address and port
// (an east-west gateway's AUTO_PASSTHROUGH server, 15443) that proxies
// in other networks send that network's endpoints' traffic to.
type NetworkGateway struct {
	Network string `json:"network"`
	Addr    string `json:"address"`
	Port    uint32 `json:"port"`
}

// NetworkGateways are the mesh's network gateways (istiod's
// NetworkGateways from meshNetworks), by network, each network's sorted
// by address and port. A nil *NetworkGateways has none.
type NetworkGateways struct {
	byNetwork map[string][]NetworkGateway
	scale     uint32
	// Skipped are the gateways left out, with why (a hostname not
	// resolved, a registryServiceName without IPs).
	Skipped []string
	// Names are the hostnames gateways were given by, sorted: what a
	// resolver keeps resolving (GatewayLookups.Names).
	Names []string
}

// GatewayLookups are what NewNetworkGateways reads besides meshNetworks.
type GatewayLookups struct {
	// Registry gives a registryServiceName's external IPs (a Kubernetes
	// Service's load balancer and external IPs); nil: not read.
	Registry func(host string) []string
	// Names gives a gateway hostname's IPs as last resolved; nil: names
	// are not resolved.
	Names func(host string) []string
}

// NewNetworkGateways reads the gateways of meshNetworks (nil: none),
// with extra ones (Kubernetes Services that are gateways). A gateway
// given by hostname is the IPs look.Names gives it (every such name is in
// Names, for a resolver to resolve); a registryServiceName's gateways are
// the IPs look.Registry gives that host. The gateways left out are listed
// in Skipped.
func NewNetworkGateways(n *meshv1alpha1.MeshNetworks, look GatewayLookups, extra ...NetworkGateway) *NetworkGateways {
	g := &NetworkGateways{byNetwork: map[string][]NetworkGateway{}, scale: 1}
	add := func(gw NetworkGateway) {
		if isIP(gw.Addr) {
			if !slices.Contains(g.byNetwork[gw.Network], gw) {
				g.byNetwork[gw.Network] = append(g.byNetwork[gw.Network], gw)
			}
			return
		}
		if !slices.Contains(g.Names, gw.Addr) {
			g.Names = append(g.Names, gw.Addr)
		}
		var ips []string
		if look.Names != nil {
			ips = look.Names(gw.Addr)
		}
		if len(ips) == 0 {
			g.Skipped = append(g.Skipped, "network "+gw.Network+": address "+gw.Addr+" has not resolved to an IP")
		}
		for _, ip := range ips {
			if r := (NetworkGateway{Network: gw.Network, Addr: ip, Port: gw.Port}); isIP(ip) && !slices.Contains(g.byNetwork[gw.Network], r) {
				g.byNetwork[gw.Network] = append(g.byNetwork[gw.Network], r)
			}
		}
	}
	for _, gw := range extra {
		add(gw)
	}
	for name, nw := range n.GetNetworks() {
		for _, gw := range nw.GetGateways() {
			switch host := gw.GetRegistryServiceName(); {
			case host != "" && look.Registry == nil:
			case host != "":
				addrs := look.Registry(host)
				if len(addrs) == 0 {
					g.Skipped = append(g.Skipped, "network "+name+": registryServiceName "+host+": no Kubernetes Service of that name with a load balancer or external IP")
				}
				for _, a := range addrs {
					add(NetworkGateway{Network: name, Addr: a, Port: gw.GetPort()})
				}
			default:
				add(NetworkGateway{Network: name, Addr: gw.GetAddress(), Port: gw.GetPort()})
			}
		}
	}
	for name, gws := range g.byNetwork {
		slices.SortFunc(gws, compareGateways)
		g.byNetwork[name] = gws
		g.scale = lcm(g.scale, uint32(len(gws)))
	}
	if g.scale > maxScale {
		// Networks with many different gateway counts (lcm(1..23) is
		// past the uint32 range, where istiod's wraps): weights then
		// split among gateways in whole numbers, a little unevenly,
		// rather than overflow.
		g.scale = maxScale
	}
	slices.Sort(g.Skipped)
	slices.Sort(g.Names)
	return g
}

// compareGateways orders gateways by network, address and port.
func compareGateways(a, b NetworkGateway) int {
	if r := cmp.Compare(a.Network, b.Network); r != 0 {
		return r
	}
	if r := cmp.Compare(a.Addr, b.Addr); r != 0 {
		return r
	}
	return cmp.Compare(a.Port, b.Port)
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// Enabled reports whether there is any gateway: only then do networks
// change what proxies are sent (istiod's IsMultiNetworkEnabled).
func (g *NetworkGateways) Enabled() bool { return g != nil && len(g.byNetwork) > 0 }

// For returns network's gateways (nil: none).
func (g *NetworkGateways) For(network string) []NetworkGateway {
	if g == nil {
		return nil
	}
	return g.byNetwork[network]
}

// All returns every gateway, by network name, then address and port.
func (g *NetworkGateways) All() []NetworkGateway {
	if g == nil {
		return nil
	}
	var out []NetworkGateway
	for _, name := range slices.Sorted(maps.Keys(g.byNetwork)) {
		out = append(out, g.byNetwork[name]...)
	}
	return out
}

// ScaleFactor is the least common multiple of the numbers of gateways
// of the networks: endpoint weights are multiplied by it, so that an
// endpoint's weight splits evenly among its network's gateways (istiod's
// GetLBWeightScaleFactor). 1 without gateways.
func (g *NetworkGateways) ScaleFactor() uint32 {
	if g == nil {
		return 1
	}
	return g.scale
}

// maxScale bounds ScaleFactor: an endpoint's weight times it stays far
// from the uint32 range that a locality's weights must sum within.
const maxScale = 1 << 16

// lcm is the least common multiple of a and b, at most maxScale+1 (the
// caller caps it; the bound keeps it from overflowing).
func lcm(a, b uint32) uint32 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return uint32(min(uint64(a/x)*uint64(b), maxScale+1))
}
