package rds

import (
	"net"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// grpcRoute builds a proxyless client's route config
// "outbound|PORT||HOST", the name its API listener gives (as istiod's
// grpcgen): the virtual hosts a sidecar's route config for PORT has,
// built for gRPC (routeBuilder.proxyless; domains with their ":PORT"
// forms, as gRPC matches the authority with its port), keeping only
// those for HOST. A name for a port where HOST has no HTTP service gets
// a config without virtual hosts, as istiod's; a name of no outbound
// cluster form gets nothing.
func grpcRoute(v *scope.View, name string) *routev3.RouteConfiguration {
	k, ok := gen.ParseClusterName(name)
	if !ok || k.SNI || k.Direction != gen.Outbound || k.Port == 0 || k.Host == "" {
		return nil
	}
	vb := newVhostBuilder(v, k.Port, len(v.Services), 0, nil)
	vb.rb.proxyless = true
	for _, svc := range v.Services {
		if servedOn(v, svc, k.Port) != notServed {
			vb.service(svc, false)
		}
	}
	vb.vsOnlyHosts()
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: hostsFor(vb.hosts, k.Host, k.Port)}
}

// grpcServiceDomains are the domains of a service's virtual host for a
// proxyless client, as istiod lists them when the port is not ignored in
// host matching: each of its names (serviceNames, and the hostname's
// absolute form "host." after the hostname) and its "name:PORT" form.
// name and clusterName are as serviceDomains gives them.
func grpcServiceDomains(v *scope.View, svc *model.Service, port uint32) (domains []string, name, clusterName string) {
	var stack [8]string
	names := serviceNames(v, svc, &stack)
	ps := ":" + strconv.FormatUint(uint64(port), 10)
	out := make([]string, 0, 2*len(names)+2)
	add := func(n string) {
		if strings.IndexByte(n, ':') >= 0 {
			n = "[" + n + "]" // an IPv6 address, as istiod's IPv6Compliant
		}
		out = append(out, n, n+ps)
	}
	h := svc.Hostname
	add(h)
	if !isIP(h) {
		add(h + ".")
	}
	for _, n := range names[1:] {
		add(n)
	}
	return out, gen.HostPort(h, port), gen.ClusterName(gen.Outbound, port, "", h)
}

// hostsFor keeps the virtual hosts with a domain for host: host itself
// or "host:port", or a wildcard domain ("*.ns.svc.cluster.local",
// with no port or this one) that matches it, as istiod's
// filterVirtualHostsForHostname.
func hostsFor(hosts []*routev3.VirtualHost, host string, port uint32) []*routev3.VirtualHost {
	h := strings.ToLower(host)
	want := h
	if strings.IndexByte(h, ':') >= 0 {
		want = "[" + h + "]"
	}
	ps := strconv.FormatUint(uint64(port), 10)
	wantPort := want + ":" + ps
	var out []*routev3.VirtualHost
	for _, vh := range hosts {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			if d == want || d == wantPort {
				out = append(out, vh)
				break
			}
			dh, dp, err := net.SplitHostPort(d)
			if err != nil {
				dh, dp = d, ""
			}
			if dp != "" && dp != ps {
				continue
			}
			if strings.HasPrefix(dh, "*") && scope.HostMatch(dh, h) || dh == want {
				out = append(out, vh)
				break
			}
		}
	}
	return out
}
