package gen

import (
	"strconv"
	"strings"

	"github.com/baremesh/baremesh/core/config"
)

// Names of the clusters every Envoy proxy has, as Istio names them.
const (
	PassthroughCluster        = "PassthroughCluster"
	BlackHoleCluster          = "BlackHoleCluster"
	InboundPassthroughCluster = "InboundPassthroughCluster"
)

// Names of listeners and ports Istio uses.
const (
	VirtualOutboundListener = "virtualOutbound"
	VirtualInboundListener  = "virtualInbound"
	VirtualOutboundPort     = 15001
	VirtualInboundPort      = 15006
)

// Direction is the first field of a cluster name.
type Direction string

// Directions.
const (
	Outbound Direction = "outbound"
	Inbound  Direction = "inbound"
)

// ClusterName builds Istio's "DIRECTION|PORT|SUBSET|HOST" cluster name.
// Inbound clusters carry only the port: "inbound|8080||".
func ClusterName(dir Direction, port uint32, subset, host string) string {
	// Built in a stack buffer: one allocation, where concatenating a
	// formatted port makes two. Names are built per route and cluster.
	var buf [128]byte
	b := append(buf[:0], dir...)
	b = append(b, '|')
	b = strconv.AppendUint(b, uint64(port), 10)
	b = append(append(append(b, '|'), subset...), '|')
	return string(append(b, host...))
}

// SNIClusterName is "outbound_.PORT_.SUBSET_.HOST", the SNI Istio's mTLS
// gives a service port (subset) and the name of the cluster an
// AUTO_PASSTHROUGH gateway forwards that SNI to (istiod's
// BuildDNSSrvSubsetKey).
func SNIClusterName(port uint32, subset, host string) string {
	return string(Outbound) + "_." + strconv.FormatUint(uint64(port), 10) + "_." + subset + "_." + host
}

// IsSNIClusterName reports whether name is of SNIClusterName's form.
func IsSNIClusterName(name string) bool { return strings.HasPrefix(name, sniPrefix) }

// sniPrefix starts every SNIClusterName.
const sniPrefix = string(Outbound) + "_."

// ClusterKey is a parsed cluster name.
type ClusterKey struct {
	Direction Direction
	Port      uint32
	Subset    string
	Host      string
	// SNI is set for an SNIClusterName (Direction is Outbound).
	SNI bool
}

// ParseClusterName splits a name made by ClusterName or SNIClusterName;
// ok is false for any other name (PassthroughCluster and the like).
func ParseClusterName(name string) (ClusterKey, bool) {
	if rest, ok := strings.CutPrefix(name, sniPrefix); ok && !strings.Contains(name, "|") {
		port, rest, ok1 := strings.Cut(rest, "_.")
		subset, host, ok2 := strings.Cut(rest, "_.")
		p, err := strconv.ParseUint(port, 10, 32)
		if !ok1 || !ok2 || err != nil || host == "" {
			return ClusterKey{}, false
		}
		return ClusterKey{Direction: Outbound, Port: uint32(p), Subset: subset, Host: host, SNI: true}, true
	}
	parts := strings.Split(name, "|")
	if len(parts) != 4 {
		return ClusterKey{}, false
	}
	if parts[0] != string(Outbound) && parts[0] != string(Inbound) {
		return ClusterKey{}, false
	}
	p, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return ClusterKey{}, false
	}
	return ClusterKey{Direction: Direction(parts[0]), Port: uint32(p), Subset: parts[2], Host: parts[3]}, true
}

// GRPCServerListenerPrefix starts the LDS name a proxyless gRPC server asks
// for: "grpc/server?xds.resource.listening_address=IP:PORT".
const GRPCServerListenerPrefix = "grpc/server?xds.resource.listening_address="

// IstioGRPCServerListenerPrefix starts the LDS name of a proxyless gRPC
// server bootstrapped by Istio's agent (its server listener resource name
// template "xds.istio.io/grpc/lds/inbound/%s"): ".../IP:PORT".
const IstioGRPCServerListenerPrefix = "xds.istio.io/grpc/lds/inbound/"

// GRPCServerAddress is the "IP:PORT" of a proxyless server's listener
// name in either template, ok false for other names.
func GRPCServerAddress(name string) (string, bool) {
	if a, ok := strings.CutPrefix(name, GRPCServerListenerPrefix); ok {
		return a, true
	}
	return strings.CutPrefix(name, IstioGRPCServerListenerPrefix)
}

// HostPort joins a host and a port as "host:port" (IPv6 hosts bracketed).
func HostPort(host string, port uint32) string {
	var buf [128]byte
	b := buf[:0]
	if strings.IndexByte(host, ':') >= 0 {
		b = append(append(append(b, '['), host...), ']')
	} else {
		b = append(b, host...)
	}
	return string(strconv.AppendUint(append(b, ':'), uint64(port), 10))
}

// ListenerName is Istio's "ADDR_PORT" listener name.
func ListenerName(addr string, port uint32) string {
	var buf [64]byte
	return string(strconv.AppendUint(append(append(buf[:0], addr...), '_'), uint64(port), 10))
}

// PortName is a port number as a string, the name of a sidecar's
// per-port outbound route configuration ("80").
func PortName(port uint32) string { return strconv.FormatUint(uint64(port), 10) }

// StatName expands one of the mesh's cluster stat name patterns
// (outboundClusterStatName, inboundClusterStatName) as istiod's
// telemetry.BuildStatPrefix: %SERVICE% is the host ("name.namespace" for
// a Kubernetes Service, kube true), %SERVICE_NAME% the host (the
// Service's name), %SERVICE_FQDN% the host, %SUBSET_NAME%,
// %SERVICE_PORT%, %SERVICE_PORT_NAME% and %TARGET_PORT%.
func StatName(pattern, host, namespace string, kube bool, subset string, port uint32, portName string, target uint32) string {
	return strings.NewReplacer(append(statHost(host, namespace, kube), "%SUBSET_NAME%", subset,
		"%TARGET_PORT%", strconv.FormatUint(uint64(target), 10), "%SERVICE_PORT_NAME%", portName,
		"%SERVICE_PORT%", strconv.FormatUint(uint64(port), 10))...).Replace(pattern)
}

// InboundStatName expands inboundClusterStatName for an inbound chain's
// tcp_proxy as istiod's telemetry.BuildInboundStatPrefix: as StatName
// with no subset, and %TARGET_PORT% left as it is.
func InboundStatName(pattern, host, namespace string, kube bool, port uint32, portName string) string {
	return strings.NewReplacer(append(statHost(host, namespace, kube), "%SUBSET_NAME%", "",
		"%SERVICE_PORT_NAME%", portName, "%SERVICE_PORT%", strconv.FormatUint(uint64(port), 10))...).Replace(pattern)
}

func statHost(host, namespace string, kube bool) []string {
	short, name := host, host
	if kube {
		name, _, _ = strings.Cut(host, ".")
		short = name + "." + namespace
	}
	return []string{"%SERVICE%", short, "%SERVICE_NAME%", name, "%SERVICE_FQDN%", host}
}

// ConfigPath is how istiod names a networking config in the
// filter_metadata.istio.config of what it built from it (its
// BuildConfigInfoMetadata): "/apis/networking.istio.io/v1/namespaces/NS/KIND/NAME",
// KIND as "virtual-service", "destination-rule", "sidecar".
func ConfigPath(kind, namespace, name string) string {
	return "/apis/" + config.NetworkingGroup + "/v1/namespaces/" + namespace + "/" + kind + "/" + name
}
