package config

// Validation of the networking.istio.io kinds that describe services,
// workloads and gateways: ServiceEntry, WorkloadEntry, WorkloadGroup and
// Gateway. VirtualService, DestinationRule and Sidecar have their own
// files.

import (
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

func validateServiceEntry(c *Config) Errors {
	var errs Errors
	se := c.Spec.(*networking.ServiceEntry)
	res := se.GetResolution()
	checkEnum(&errs, "spec.resolution", res)
	checkEnum(&errs, "spec.location", se.GetLocation())

	if len(se.GetHosts()) == 0 {
		errs.Add("spec.hosts", "at least one host is required")
	}
	for i, h := range se.GetHosts() {
		// Istio rejects "*" in every ServiceEntry; baremesh accepts it
		// with resolution NONE, where hosts are not used for routing.
		if h == "*" {
			if res != networking.ServiceEntry_NONE {
				errs.Add(idx("spec.hosts", i), "host \"*\" is allowed only with resolution NONE")
			}
			continue
		}
		checkWildcardHost(&errs, idx("spec.hosts", i), h)
	}

	cidr := false
	for i, a := range se.GetAddresses() {
		cidr = cidr || strings.Contains(a, "/")
		checkIPOrCIDR(&errs, idx("spec.addresses", i), a)
	}
	if cidr && res != networking.ServiceEntry_NONE && res != networking.ServiceEntry_STATIC {
		errs.Add("spec.addresses", "CIDR addresses are allowed only with resolution NONE or STATIC")
	}

	portNames := make(map[string]bool, len(se.GetPorts()))
	portNumbers := make(map[uint32]bool, len(se.GetPorts()))
	for i, p := range se.GetPorts() {
		f := idx("spec.ports", i)
		if p == nil {
			errs.Add(f, "port must not be null")
			continue
		}
		checkPort(&errs, f+".number", p.GetNumber())
		checkPortName(&errs, f+".name", p.GetName())
		checkProtocol(&errs, f+".protocol", p.GetProtocol())
		if p.GetTargetPort() != 0 {
			checkPort(&errs, f+".targetPort", p.GetTargetPort())
		}
		if portNames[p.GetName()] {
			errs.Add(f+".name", "port name %q is already used by another port", p.GetName())
		}
		if portNumbers[p.GetNumber()] {
			errs.Add(f+".number", "port %d is already declared", p.GetNumber())
		}
		portNames[p.GetName()] = true
		portNumbers[p.GetNumber()] = true
	}

	hasSelector := se.GetWorkloadSelector() != nil
	if hasSelector && len(se.GetEndpoints()) > 0 {
		errs.Add("spec.workloadSelector", "only one of workloadSelector and endpoints may be set")
	}
	checkWorkloadSelector(&errs, "spec.workloadSelector", se.GetWorkloadSelector())

	switch res {
	case networking.ServiceEntry_NONE:
		if len(se.GetEndpoints()) > 0 {
			errs.Add("spec.endpoints", "endpoints are not allowed with resolution NONE")
		}
	case networking.ServiceEntry_STATIC:
		// STATIC with neither endpoints nor a selector is valid, as in
		// Istio: a service with no endpoints yet (istiod's own
		// synthetic-kubernetes entry, served over MCP, is one).
		for i, ep := range se.GetEndpoints() {
			checkEndpoint(&errs, idx("spec.endpoints", i), ep, portNames, false)
		}
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN:
		if len(se.GetEndpoints()) == 0 {
			for i, h := range se.GetHosts() {
				if fqdnError(h) != "" {
					errs.Add(idx("spec.hosts", i), "host %q must be a domain name without wildcard when resolution is %s and there are no endpoints", h, res)
				}
			}
		}
		if res == networking.ServiceEntry_DNS_ROUND_ROBIN && len(se.GetEndpoints()) > 1 {
			errs.Add("spec.endpoints", "resolution DNS_ROUND_ROBIN allows at most one endpoint, got %d", len(se.GetEndpoints()))
		}
		for i, ep := range se.GetEndpoints() {
			checkEndpoint(&errs, idx("spec.endpoints", i), ep, portNames, true)
		}
	}

	// With several hosts, only HTTP (Host header) and TLS (SNI) traffic
	// can tell them apart, unless the hosts are not used (NONE).
	if res != networking.ServiceEntry_NONE && len(se.GetHosts()) > 1 {
		for i, p := range se.GetPorts() {
			if p != nil && !protocolIsHTTP(p.GetProtocol()) && !protocolIsTLS(p.GetProtocol()) {
				errs.Add(idx("spec.ports", i)+".protocol", "a ServiceEntry with several hosts needs HTTP or TLS ports to tell them apart, unless resolution is NONE")
				break
			}
		}
	}
	checkExportTo(&errs, "spec.exportTo", c.Namespace, se.GetExportTo(), true)
	for i, san := range se.GetSubjectAltNames() {
		if san == "" {
			errs.Add(idx("spec.subjectAltNames", i), "must not be empty")
		}
	}
	return errs
}

// checkEndpoint checks an endpoint of a ServiceEntry, or a WorkloadEntry
// spec (servicePorts nil). allowHostname accepts a domain name as the
// address (DNS resolution, and WorkloadEntry which may be used by either).
func checkEndpoint(errs *Errors, field string, we *networking.WorkloadEntry, servicePorts map[string]bool, allowHostname bool) {
	if we == nil {
		errs.Add(field, "endpoint must not be null")
		return
	}
	addr := we.GetAddress()
	switch {
	case addr == "":
		if we.GetNetwork() == "" {
			errs.Add(field+".address", "address is required unless network is set")
		}
	case strings.HasPrefix(addr, unixAddressPrefix):
		if e := unixAddressError(strings.TrimPrefix(addr, unixAddressPrefix)); e != "" {
			errs.Add(field+".address", "%s", e)
		}
		if len(we.GetPorts()) > 0 {
			errs.Add(field+".ports", "a unix socket endpoint must not have ports")
		}
		if servicePorts != nil && len(servicePorts) != 1 {
			errs.Add(field+".address", "a unix socket endpoint needs exactly one service port")
		}
	case isIP(addr):
	case allowHostname:
		if fqdnError(addr) != "" {
			errs.Add(field+".address", "%q is not an IP address, a domain name or unix://path", addr)
		}
	default:
		errs.Add(field+".address", "%q is not an IP address or unix://path; resolution STATIC needs IP addresses", addr)
	}
	for name, n := range we.GetPorts() {
		f := mapKey(field+".ports", name)
		checkPortName(errs, f, name)
		checkPort(errs, f, n)
		if servicePorts != nil && !servicePorts[name] {
			errs.Add(f, "port %q is not declared in spec.ports", name)
		}
	}
	checkLabels(errs, field+".labels", we.GetLabels())
	if sa := we.GetServiceAccount(); sa != "" && (len(sa) > 253 || !dns1123Subdomain.MatchString(sa)) {
		errs.Add(field+".serviceAccount", "%q is not a valid service account name (a DNS-1123 subdomain)", sa)
	}
	if n := we.GetNetwork(); n != "" && strings.ContainsAny(n, " \t\n/") {
		errs.Add(field+".network", "%q is not a valid network name", n)
	}
}

func validateWorkloadEntry(c *Config) Errors {
	var errs Errors
	checkEndpoint(&errs, "spec", c.Spec.(*networking.WorkloadEntry), nil, true)
	return errs
}

func validateWorkloadGroup(c *Config) Errors {
	var errs Errors
	wg := c.Spec.(*networking.WorkloadGroup)
	t := wg.GetTemplate()
	if t == nil {
		errs.Add("spec.template", "template is required")
	} else {
		// Address and labels come from each workload, never from the
		// template.
		if t.GetAddress() != "" {
			errs.Add("spec.template.address", "must be empty; each workload supplies its own address")
		}
		if len(t.GetLabels()) > 0 {
			errs.Add("spec.template.labels", "must be empty; use spec.metadata.labels")
		}
		for name, n := range t.GetPorts() {
			f := mapKey("spec.template.ports", name)
			checkPortName(&errs, f, name)
			checkPort(&errs, f, n)
		}
		if sa := t.GetServiceAccount(); sa != "" && !dns1123Subdomain.MatchString(sa) {
			errs.Add("spec.template.serviceAccount", "%q is not a valid service account name", sa)
		}
	}
	if md := wg.GetMetadata(); md != nil {
		checkLabels(&errs, "spec.metadata.labels", md.GetLabels())
	}
	checkProbe(&errs, "spec.probe", wg.GetProbe())
	return errs
}

func checkProbe(errs *Errors, field string, p *networking.ReadinessProbe) {
	if p == nil {
		return
	}
	for name, v := range map[string]int32{
		"initialDelaySeconds": p.GetInitialDelaySeconds(), "timeoutSeconds": p.GetTimeoutSeconds(),
		"periodSeconds": p.GetPeriodSeconds(), "successThreshold": p.GetSuccessThreshold(),
		"failureThreshold": p.GetFailureThreshold(),
	} {
		if v < 0 {
			errs.Add(field+"."+name, "must not be negative")
		}
	}
	switch m := p.GetHealthCheckMethod().(type) {
	case *networking.ReadinessProbe_HttpGet:
		h := m.HttpGet
		if h == nil {
			errs.Add(field+".httpGet", "must not be null")
			return
		}
		checkPort(errs, field+".httpGet.port", h.GetPort())
		if s := h.GetScheme(); s != "" && !strings.EqualFold(s, "http") && !strings.EqualFold(s, "https") {
			errs.Add(field+".httpGet.scheme", "scheme %q is neither HTTP nor HTTPS", s)
		}
		for i, hd := range h.GetHttpHeaders() {
			checkHeaderName(errs, idx(field+".httpGet.httpHeaders", i)+".name", hd.GetName())
		}
	case *networking.ReadinessProbe_TcpSocket:
		if m.TcpSocket == nil {
			errs.Add(field+".tcpSocket", "must not be null")
			return
		}
		checkPort(errs, field+".tcpSocket.port", m.TcpSocket.GetPort())
	case *networking.ReadinessProbe_Grpc:
		if m.Grpc == nil {
			errs.Add(field+".grpc", "must not be null")
			return
		}
		checkPort(errs, field+".grpc.port", m.Grpc.GetPort())
	case *networking.ReadinessProbe_Exec:
		if len(m.Exec.GetCommand()) == 0 {
			errs.Add(field+".exec.command", "a command is required")
		}
	default:
		errs.Add(field, "exactly one of httpGet, tcpSocket, grpc or exec is required")
	}
}

func validateGateway(c *Config) Errors {
	var errs Errors
	gw := c.Spec.(*networking.Gateway)
	// The name is used in "namespace/name" references and route names.
	if !isDNSLabel(c.Name) {
		errs.Add("metadata.name", "a Gateway name must be a DNS-1123 label (no dots)")
	}
	checkSelectorLabels(&errs, "spec.selector", gw.GetSelector())
	if len(gw.GetServers()) == 0 {
		errs.Add("spec.servers", "at least one server is required")
	}
	portNames := map[string]bool{}
	for i, s := range gw.GetServers() {
		f := idx("spec.servers", i)
		if s == nil {
			errs.Add(f, "server must not be null")
			continue
		}
		if len(s.GetHosts()) == 0 {
			errs.Add(f+".hosts", "at least one host is required")
		}
		for j, h := range s.GetHosts() {
			checkNamespacedHost(&errs, idx(f+".hosts", j), h, true)
		}
		if b := s.GetBind(); b != "" && !isIP(b) && !strings.HasPrefix(b, unixAddressPrefix) {
			errs.Add(f+".bind", "%q is neither an IP address nor unix://path", b)
		}
		p := s.GetPort()
		if p == nil {
			errs.Add(f+".port", "port is required")
			checkServerTLS(&errs, f+".tls", s.GetTls())
			continue
		}
		checkPort(&errs, f+".port.number", p.GetNumber())
		if p.GetName() == "" {
			errs.Add(f+".port.name", "port name is required")
		} else if portNames[p.GetName()] {
			errs.Add(f+".port.name", "port name %q is already used by another server", p.GetName())
		}
		portNames[p.GetName()] = true
		if !isProtocol(p.GetProtocol()) {
			errs.Add(f+".port.protocol", "unknown protocol %q; known: HTTP, HTTPS, HTTP2, GRPC, GRPC-WEB, TCP, TLS, MONGO, REDIS, MYSQL, UDP", p.GetProtocol())
			continue
		}
		tls := s.GetTls()
		checkServerTLS(&errs, f+".tls", tls)
		switch {
		case protocolIsTLS(p.GetProtocol()) && tls == nil:
			errs.Add(f+".tls", "a server with protocol %s needs tls settings", p.GetProtocol())
		case !protocolIsTLS(p.GetProtocol()) && tls != nil:
			redirectOnly := tls.GetHttpsRedirect() && tls.GetServerCertificate() == "" && tls.GetPrivateKey() == "" &&
				tls.GetCaCertificates() == "" && tls.GetCredentialName() == ""
			if !protocolIsHTTP(p.GetProtocol()) || !redirectOnly {
				errs.Add(f+".tls", "a server with protocol %s may only set tls.httpsRedirect", p.GetProtocol())
			}
		}
	}
	return errs
}

// checkServerTLS follows Istio's validateTLSOptions.
func checkServerTLS(errs *Errors, field string, tls *networking.ServerTLSSettings) {
	if tls == nil {
		return
	}
	mode := tls.GetMode()
	checkEnum(errs, field+".mode", mode)
	hasFiles := tls.GetServerCertificate() != "" || tls.GetPrivateKey() != "" || tls.GetCaCertificates() != ""
	if mode == networking.ServerTLSSettings_ISTIO_MUTUAL {
		if hasFiles || tls.GetCredentialName() != "" {
			errs.Add(field, "ISTIO_MUTUAL uses the mesh certificates; serverCertificate, privateKey, caCertificates and credentialName must be empty")
		}
		return
	}
	if mode != networking.ServerTLSSettings_SIMPLE && mode != networking.ServerTLSSettings_MUTUAL &&
		mode != networking.ServerTLSSettings_OPTIONAL_MUTUAL {
		return
	}
	if tls.GetCredentialName() != "" || len(tls.GetCredentialNames()) > 0 || len(tls.GetTlsCertificates()) > 0 {
		return // credentials come from a secret or the list
	}
	if tls.GetServerCertificate() == "" {
		errs.Add(field+".serverCertificate", "%s TLS needs a server certificate (or credentialName)", mode)
	}
	if tls.GetPrivateKey() == "" {
		errs.Add(field+".privateKey", "%s TLS needs a private key (or credentialName)", mode)
	}
	if mode != networking.ServerTLSSettings_SIMPLE && tls.GetCaCertificates() == "" {
		errs.Add(field+".caCertificates", "%s TLS needs a client CA bundle (or credentialName)", mode)
	}
}
