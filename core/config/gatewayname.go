package config

import "strings"

// MeshGateway is the gateway name that binds a VirtualService (or one of
// its matches) to the mesh's sidecars.
const MeshGateway = "mesh"

// ResolveGatewayName is the "ns/name" a VirtualService in namespace ns
// means by a gateway name, as istiod's resolveGatewayName: a short name
// is ns's, "./name" too, a legacy "name.ns.svc.cluster.local" is ns's
// Gateway name, "ns/name" stays; "mesh" is not a Gateway and stays.
func ResolveGatewayName(name, ns string) string {
	gwNS, gwName := splitGatewayName(name, ns)
	if gwNS == "" {
		return gwName
	}
	return gwNS + "/" + gwName
}

// GatewayNamed reports whether one of names, as a VirtualService in
// namespace ns means them (ResolveGatewayName), is gateway ("ns/name",
// or "mesh"). It allocates nothing: match conditions are checked once per
// route and proxy.
func GatewayNamed(names []string, ns, gateway string) bool {
	wantNS, wantName, ok := strings.Cut(gateway, "/")
	if !ok {
		wantNS, wantName = "", gateway
	}
	for _, n := range names {
		if gotNS, gotName := splitGatewayName(n, ns); gotNS == wantNS && gotName == wantName {
			return true
		}
	}
	return false
}

// splitGatewayName resolves name into its namespace and name; the
// namespace is empty for "mesh".
func splitGatewayName(name, ns string) (string, string) {
	if before, after, ok := strings.Cut(name, "/"); ok {
		if before == "." {
			return ns, after
		}
		return before, after
	}
	if name == MeshGateway {
		return "", name
	}
	short, rest, ok := strings.Cut(name, ".")
	if !ok {
		return ns, name
	}
	// Legacy FQDN, backwards compatibility only: name.ns[.svc…].
	gwNS, _, _ := strings.Cut(rest, ".")
	return gwNS, short
}
