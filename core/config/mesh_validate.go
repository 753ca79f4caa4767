package config

// Validation of the mesh config, after istio/istio
// pkg/config/validation/agent ValidateMeshConfig.

import (
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

func validateMeshConfig(m *meshv1alpha1.MeshConfig) Errors {
	var errs Errors
	checkPort(&errs, "proxyListenPort", uint32(max(m.GetProxyListenPort(), 0)))
	checkPort(&errs, "proxyInboundListenPort", uint32(max(m.GetProxyInboundListenPort(), 0)))
	if p := m.GetProxyHttpPort(); p != 0 {
		checkPort(&errs, "proxyHttpPort", uint32(max(p, 0)))
	}
	if m.GetConnectTimeout() == nil {
		errs.Add("connectTimeout", "connectTimeout is required")
	}
	checkDuration(&errs, "connectTimeout", m.GetConnectTimeout())
	if d := m.GetConnectTimeout(); d != nil && d.AsDuration() > 30*time.Second {
		errs.Add("connectTimeout", "%s is longer than the 30s maximum", d.AsDuration())
	}
	checkMsDuration(&errs, "protocolDetectionTimeout", m.GetProtocolDetectionTimeout())
	checkDuration(&errs, "dnsRefreshRate", m.GetDnsRefreshRate())
	checkNonNegativeDuration(&errs, "hboneIdleTimeout", m.GetHboneIdleTimeout())
	checkTrustDomain(&errs, "trustDomain", m.GetTrustDomain())
	for i, a := range m.GetTrustDomainAliases() {
		checkTrustDomain(&errs, idx("trustDomainAliases", i), a)
	}
	if ns := m.GetRootNamespace(); ns != "" && !isNamespace(ns) {
		errs.Add("rootNamespace", "%q is not a namespace name", ns)
	}
	checkEnum(&errs, "outboundTrafficPolicy.mode", m.GetOutboundTrafficPolicy().GetMode())
	checkEnum(&errs, "inboundTrafficPolicy.mode", m.GetInboundTrafficPolicy().GetMode())
	checkEnum(&errs, "ingressControllerMode", m.GetIngressControllerMode())
	checkEnum(&errs, "accessLogEncoding", m.GetAccessLogEncoding())
	checkEnum(&errs, "h2UpgradePolicy", m.GetH2UpgradePolicy())
	checkMeshExportTo(&errs, "defaultServiceExportTo", m.GetDefaultServiceExportTo(), true)
	checkMeshExportTo(&errs, "defaultVirtualServiceExportTo", m.GetDefaultVirtualServiceExportTo(), false)
	checkMeshExportTo(&errs, "defaultDestinationRuleExportTo", m.GetDefaultDestinationRuleExportTo(), false)
	if l := m.GetLocalityLbSetting(); l != nil {
		checkLocalityLB(&errs, "localityLbSetting", l)
	}
	for i, s := range m.GetServiceSettings() {
		for j, h := range s.GetHosts() {
			checkWildcardHost(&errs, idx(idx("serviceSettings", i)+".hosts", j), h)
		}
	}
	names := map[string]bool{}
	for i, p := range m.GetExtensionProviders() {
		f := idx("extensionProviders", i)
		switch {
		case p.GetName() == "":
			errs.Add(f+".name", "name is required")
		case names[p.GetName()]:
			errs.Add(f+".name", "provider name %q is used by another provider", p.GetName())
		}
		names[p.GetName()] = true
		if p.GetProvider() == nil {
			errs.Add(f, "a provider type is required")
		}
	}
	if pc := m.GetDefaultConfig(); pc == nil {
		errs.Add("defaultConfig", "defaultConfig is required")
	} else {
		checkProxyConfig(&errs, "defaultConfig", pc)
	}
	return errs
}

func checkProxyConfig(errs *Errors, f string, pc *meshv1alpha1.ProxyConfig) {
	if pc.GetConfigPath() == "" {
		errs.Add(f+".configPath", "configPath is required")
	}
	if pc.GetBinaryPath() == "" {
		errs.Add(f+".binaryPath", "binaryPath is required")
	}
	if sc, ok := pc.GetClusterName().(*meshv1alpha1.ProxyConfig_ServiceCluster); ok && sc.ServiceCluster == "" {
		errs.Add(f+".serviceCluster", "serviceCluster must not be empty")
	}
	checkDuration(errs, f+".drainDuration", pc.GetDrainDuration())
	if d := pc.GetDrainDuration(); d != nil && d.AsDuration() > time.Hour {
		errs.Add(f+".drainDuration", "%s is longer than the 1h maximum", d.AsDuration())
	}
	checkDuration(errs, f+".terminationDrainDuration", pc.GetTerminationDrainDuration())
	checkProxyAddress(errs, f+".discoveryAddress", pc.GetDiscoveryAddress(), true)
	if z := pc.GetTracing().GetZipkin(); z != nil {
		checkProxyAddress(errs, f+".tracing.zipkin.address", z.GetAddress(), false)
	}
	if s := pc.GetTracing().GetSampling(); s < 0 || s > 100 {
		errs.Add(f+".tracing.sampling", "%v is not in the range 0..100", s)
	}
	checkProxyAddress(errs, f+".statsdUdpAddress", pc.GetStatsdUdpAddress(), false)
	checkPort(errs, f+".proxyAdminPort", uint32(max(pc.GetProxyAdminPort(), 0)))
	checkPort(errs, f+".statusPort", uint32(max(pc.GetStatusPort(), 0)))
	if pc.GetStatNameLength() < 0 {
		errs.Add(f+".statNameLength", "must not be negative")
	}
	if c := pc.GetConcurrency(); c != nil && c.GetValue() < 0 {
		errs.Add(f+".concurrency", "must not be negative")
	}
	switch pc.GetControlPlaneAuthPolicy() {
	case meshv1alpha1.AuthenticationPolicy_NONE, meshv1alpha1.AuthenticationPolicy_MUTUAL_TLS:
	default:
		errs.Add(f+".controlPlaneAuthPolicy", "must be NONE or MUTUAL_TLS")
	}
	checkEnum(errs, f+".interceptionMode", pc.GetInterceptionMode())
}

// checkProxyAddress checks "host:port" with a domain name or IP host.
func checkProxyAddress(errs *Errors, f, addr string, required bool) {
	if addr == "" {
		if required {
			errs.Add(f, "address is required")
		}
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		errs.Add(f, "%q is not host:port", addr)
		return
	}
	if !isIP(host) && fqdnError(host) != "" {
		errs.Add(f, "host %q is neither a domain name nor an IP address", host)
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		errs.Add(f, "port %q is not a number", port)
		return
	}
	checkPort(errs, f, uint32(n))
}

// checkTrustDomain: a non-empty domain; Istio also allows '_' in labels.
func checkTrustDomain(errs *Errors, f, td string) {
	if td == "" {
		errs.Add(f, "trust domain must not be empty")
		return
	}
	if e := fqdnError(strings.ReplaceAll(td, "_", "-")); e != "" {
		errs.Add(f, "%s", e)
	}
}

// checkMsDuration allows 0 but needs millisecond precision.
func checkMsDuration(errs *Errors, f string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	checkNonNegativeDuration(errs, f, d)
	if d.CheckValid() == nil && d.AsDuration()%time.Millisecond != 0 {
		errs.Add(f, "only millisecond precision is supported")
	}
}

// checkMeshExportTo checks a default exportTo; "." means each config's
// own namespace.
func checkMeshExportTo(errs *Errors, f string, v []string, allowNone bool) {
	checkExportTo(errs, f, "", v, allowNone)
}
