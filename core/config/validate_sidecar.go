package config

// Sidecar validation, after istio/istio pkg/config/validation.

import (
	"net"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

func validateSidecar(c *Config) Errors {
	var errs Errors
	sc := c.Spec.(*networking.Sidecar)
	checkWorkloadSelector(&errs, "spec.workloadSelector", sc.GetWorkloadSelector())
	if len(sc.GetEgress()) == 0 && len(sc.GetIngress()) == 0 && sc.GetOutboundTrafficPolicy() == nil && sc.GetInboundConnectionPool() == nil {
		errs.Add("spec", "a Sidecar needs at least one of egress, ingress, outboundTrafficPolicy or inboundConnectionPool")
	}

	ports := map[uint32]bool{}
	for i, in := range sc.GetIngress() {
		f := idx("spec.ingress", i)
		if in == nil {
			errs.Add(f, "ingress listener must not be null")
			continue
		}
		p := in.GetPort()
		if p == nil {
			errs.Add(f+".port", "port is required for ingress listeners")
			continue
		}
		checkSidecarPort(&errs, f+".port", p)
		if ports[p.GetNumber()] {
			errs.Add(f+".port.number", "port %d is used by another ingress listener", p.GetNumber())
		}
		ports[p.GetNumber()] = true
		if b := in.GetBind(); b != "" {
			checkIP(&errs, f+".bind", b)
		}
		checkEnum(&errs, f+".captureMode", in.GetCaptureMode())
		checkDefaultEndpoint(&errs, f+".defaultEndpoint", in.GetDefaultEndpoint())
		if tls := in.GetTls(); tls != nil {
			if !protocolIsTLS(p.GetProtocol()) {
				errs.Add(f+".tls", "tls settings need protocol HTTPS or TLS")
			}
			if m := tls.GetMode(); m == networking.ServerTLSSettings_ISTIO_MUTUAL || m == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
				errs.Add(f+".tls.mode", "mode %s is not allowed in a sidecar ingress listener", m)
			}
			if tls.GetCredentialName() != "" || tls.GetHttpsRedirect() || len(tls.GetSubjectAltNames()) > 0 {
				errs.Add(f+".tls", "credentialName, httpsRedirect and subjectAltNames are not supported in a sidecar ingress listener")
			}
			checkServerTLS(&errs, f+".tls", tls)
		}
		checkConnectionPool(&errs, f+".connectionPool", in.GetConnectionPool())
	}
	checkConnectionPool(&errs, "spec.inboundConnectionPool", sc.GetInboundConnectionPool())

	ports = map[uint32]bool{}
	binds := map[string]bool{}
	catchAll := false
	for i, eg := range sc.GetEgress() {
		f := idx("spec.egress", i)
		if eg == nil {
			errs.Add(f, "egress listener must not be null")
			continue
		}
		if p := eg.GetPort(); p == nil {
			if catchAll {
				errs.Add(f+".port", "only one egress listener may omit the port")
			} else if i != len(sc.GetEgress())-1 {
				errs.Add(f+".port", "the egress listener without a port must be the last one")
			}
			catchAll = true
		} else if p.GetNumber() == 0 {
			// A Unix domain socket listener.
			checkProtocol(&errs, f+".port.protocol", p.GetProtocol())
			if !strings.HasPrefix(eg.GetBind(), unixAddressPrefix) {
				errs.Add(f+".bind", "a listener with port 0 needs a unix:// bind address")
			} else if e := unixAddressError(strings.TrimPrefix(eg.GetBind(), unixAddressPrefix)); e != "" {
				errs.Add(f+".bind", "%s", e)
			}
			if binds[eg.GetBind()] {
				errs.Add(f+".bind", "unix socket %q is used by another listener", eg.GetBind())
			}
			binds[eg.GetBind()] = true
		} else {
			checkSidecarPort(&errs, f+".port", p)
			if b := eg.GetBind(); b != "" {
				checkIP(&errs, f+".bind", b)
			}
			if ports[p.GetNumber()] {
				errs.Add(f+".port.number", "port %d is used by another egress listener", p.GetNumber())
			}
			ports[p.GetNumber()] = true
		}
		checkEnum(&errs, f+".captureMode", eg.GetCaptureMode())
		if len(eg.GetHosts()) == 0 {
			errs.Add(f+".hosts", "at least one host is required")
		}
		for j, h := range eg.GetHosts() {
			checkNamespacedHost(&errs, idx(f+".hosts", j), h, false)
		}
	}

	if tp := sc.GetOutboundTrafficPolicy(); tp != nil {
		checkEnum(&errs, "spec.outboundTrafficPolicy.mode", tp.GetMode())
		if ep := tp.GetEgressProxy(); ep != nil {
			if tp.GetMode() != networking.OutboundTrafficPolicy_ALLOW_ANY {
				errs.Add("spec.outboundTrafficPolicy.egressProxy", "egressProxy needs mode ALLOW_ANY")
			}
			checkFQDN(&errs, "spec.outboundTrafficPolicy.egressProxy.host", ep.GetHost())
			if ep.GetPort() == nil {
				errs.Add("spec.outboundTrafficPolicy.egressProxy.port", "port is required")
			}
			checkDestination(&errs, "spec.outboundTrafficPolicy.egressProxy", ep)
		}
	}
	return errs
}

func checkSidecarPort(errs *Errors, field string, p *networking.SidecarPort) {
	if p.GetName() != "" {
		checkPortName(errs, field+".name", p.GetName())
	}
	checkProtocol(errs, field+".protocol", p.GetProtocol())
	checkPort(errs, field+".number", p.GetNumber())
}

// checkDefaultEndpoint: 127.0.0.1:port, 0.0.0.0:port, [::1]:port,
// [::]:port, :port or unix://path.
func checkDefaultEndpoint(errs *Errors, field, ep string) {
	if ep == "" {
		return
	}
	if strings.HasPrefix(ep, unixAddressPrefix) {
		if e := unixAddressError(strings.TrimPrefix(ep, unixAddressPrefix)); e != "" {
			errs.Add(field, "%s", e)
		}
		return
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		errs.Add(field, "%q is not host:port: %v", ep, err)
		return
	}
	if !slices.Contains([]string{"", "127.0.0.1", "0.0.0.0", "::1", "::"}, host) {
		errs.Add(field, "must be 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port> or unix://path")
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		errs.Add(field, "port %q is not a number", port)
		return
	}
	checkPort(errs, field, uint32(n))
}
